package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pkiFiles: one CA (its key kept, so each apiserver of an HA bed gets a serving certificate of its own) and
// the service-account key pair every apiserver shares, as the instances of a real control plane do.
type pkiFiles struct {
	caFile, serverCert, serverKey, saPub, saKey string
	ca                                          *x509.Certificate
	caKey                                       *rsa.PrivateKey
}

func writePKI(dir string) (pkiFiles, error) {
	p := pkiFiles{
		caFile:     filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "apiserver.crt"),
		serverKey:  filepath.Join(dir, "apiserver.key"),
		saPub:      filepath.Join(dir, "sa.pub"),
		saKey:      filepath.Join(dir, "sa.key"),
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "outrigger-test-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	p.ca, _ = x509.ParseCertificate(caDER)
	p.caKey = caKey
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	if err := writePEMs([]pemFile{
		{p.caFile, "CERTIFICATE", caDER},
		{p.saPub, "PUBLIC KEY", saPubDER},
		{p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
	}); err != nil {
		return p, err
	}
	return p, p.issueServingCert(p.serverCert, p.serverKey, "kube-apiserver")
}

// issueServingCert writes a serving certificate for 127.0.0.1 (and the in-cluster names) signed by the CA.
func (p pkiFiles) issueServingCert(certPath, keyPath, commonName string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	return writePEMs([]pemFile{{certPath, "CERTIFICATE", der}, {keyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)}})
}

type pemFile struct {
	path, kind string
	der        []byte
}

func writePEMs(files []pemFile) error {
	for _, f := range files {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func writeTokens(dir string) (map[string]string, error) {
	tokens := map[string]string{}
	var b strings.Builder
	for _, id := range identities {
		buf := make([]byte, 24)
		if _, err := rand.Read(buf); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(buf)
		tokens[id.name] = tok
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", tok, id.name, id.uid, id.groups)
	}
	return tokens, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(b.String()), 0o600)
}

func writeKubeconfig(path, server, caFile, user, token string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	// JSON is valid YAML, and kubectl and client-node both read it.
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "outrigger-test",
		"clusters": []any{map[string]any{
			"name":    "outrigger-test",
			"cluster": map[string]any{"server": server, "certificate-authority-data": ca},
		}},
		"users": []any{map[string]any{
			"name": user,
			"user": map[string]any{"token": token},
		}},
		"contexts": []any{map[string]any{
			"name":    "outrigger-test",
			"context": map[string]any{"cluster": "outrigger-test", "user": user, "namespace": "default"},
		}},
	}
	return writeJSONAtomic(path, cfg)
}

func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func waitReady(ctx context.Context, server, caFile, token string, errc <-chan error) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-errc:
			return fmt.Errorf("kube-apiserver exited before it was ready: %v", err)
		case <-ctx.Done():
			return errors.New("kube-apiserver was not ready within 120s")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freePorts2() (int, int, error) {
	a, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	for {
		b, err := freePort()
		if err != nil {
			return 0, 0, err
		}
		if b != a {
			return a, b, nil
		}
	}
}
