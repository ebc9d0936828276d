// Command testcluster runs a real kube-apiserver, backed by an in-process etcd, on loopback.
//
// Outrigger's tests and local runtime use it so that every claim about Kubernetes behaviour (immutable
// ControllerRevision data, one controller ownerReference, 409 on stale resourceVersion, discovery's
// storageVersionHash, label selector filtering) is checked against the apiserver itself, not a fake.
//
// The same binary is also kubectl when invoked under that name (or as `testcluster kubectl ...`), so the
// project brings the kubectl its interoperability tests use.
//
//	testcluster serve --dir DIR [--port N]
//
// writes DIR/admin.kubeconfig, DIR/outrigger.kubeconfig and, once /readyz answers, DIR/ready.json; it
// runs until SIGINT or SIGTERM, then stops the apiserver and etcd.
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
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		runKubectl()
	}
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		os.Args = append([]string{"kubectl"}, os.Args[2:]...)
		runKubectl()
	}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: testcluster serve --dir DIR [--port N] | testcluster kubectl ARGS...")
		os.Exit(2)
	}
	if err := serve(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func runKubectl() {
	if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
		cmdutil.CheckErr(err) // prints the error the way kubectl does and exits non-zero
	}
	os.Exit(0)
}

// Identities known to the apiserver through its static token file. The outrigger identity has no
// permissions of its own: the test setup binds it to the project's ClusterRole from cluster/rbac.
type identity struct{ name, uid, groups string }

var identities = []identity{
	{name: "admin", uid: "outrigger-test-admin", groups: "system:masters"},
	{name: "outrigger", uid: "outrigger-test-controller", groups: "outrigger:controllers"},
	{name: "migrator", uid: "outrigger-test-migrator", groups: "outrigger:controllers,outrigger:migrators"},
}

type readyInfo struct {
	Server      string            `json:"server"`
	Kubeconfigs map[string]string `json:"kubeconfigs"`
	Tokens      map[string]string `json:"tokens"`
	CAFile      string            `json:"caFile"`
	EtcdURL     string            `json:"etcdUrl"`
	PID         int               `json:"pid"`
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (created; kubeconfigs are written here)")
	port := fs.Int("port", 0, "apiserver secure port on 127.0.0.1 (0: pick a free one)")
	verbose := fs.Bool("v", false, "let the apiserver log at its default verbosity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(*dir, "ready.json"))

	etcdClient, etcdPeer, err := freePorts2()
	if err != nil {
		return err
	}
	apiPort := *port
	if apiPort == 0 {
		if apiPort, err = freePort(); err != nil {
			return err
		}
	}

	etcd, etcdURL, err := startEtcd(filepath.Join(*dir, "etcd"), etcdClient, etcdPeer)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()

	pki, err := writePKI(*dir)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	tokens, err := writeTokens(*dir)
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	kubeconfigs := map[string]string{}
	for _, id := range identities {
		path := filepath.Join(*dir, id.name+".kubeconfig")
		if err := writeKubeconfig(path, server, pki.caFile, id.name, tokens[id.name]); err != nil {
			return err
		}
		kubeconfigs[id.name] = path
	}

	cmd := apiserverapp.NewAPIServerCommand()
	flags := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + pki.serverCert,
		"--tls-private-key-file=" + pki.serverKey,
		"--token-auth-file=" + filepath.Join(*dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--shutdown-delay-duration=0s",
		// The kubernetes Service endpoint cannot point at loopback; nothing here needs it.
		"--endpoint-reconciler-type=none",
		"--shutdown-send-retry-after=false",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// Lets per-cluster tests exercise the in-tree storage version migration API (issue: storage migration).
		// Serving it also takes the (beta, off by default) feature gate.
		"--runtime-config=storagemigration.k8s.io/v1beta1=true",
		"--feature-gates=StorageVersionMigrator=true",
	}
	if !*verbose {
		flags = append(flags, "--v=0", "--logging-format=text")
	}
	cmd.SetArgs(flags)

	errc := make(chan error, 1)
	go func() { errc <- cmd.Execute() }()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := waitReady(ctx, server, pki.caFile, tokens["admin"], errc); err != nil {
		return err
	}
	info := readyInfo{Server: server, Kubeconfigs: kubeconfigs, Tokens: tokens, CAFile: pki.caFile, EtcdURL: etcdURL, PID: os.Getpid()}
	if err := writeJSONAtomic(filepath.Join(*dir, "ready.json"), info); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{"ready": true, "server": server, "kubeconfig": kubeconfigs["admin"]})
	fmt.Println(string(line))

	// The apiserver command installs the SIGINT/SIGTERM handler; it returns once it has shut down.
	err = <-errc
	_ = os.Remove(filepath.Join(*dir, "ready.json"))
	return err
}

func startEtcd(dir string, clientPort, peerPort int) (*embed.Etcd, string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", err
	}
	cfg := embed.NewConfig()
	cfg.Name = "outrigger-test"
	cfg.Dir = dir
	cfg.LogLevel = "error"
	// Tests throw the data away; fsync would only slow every write.
	cfg.UnsafeNoFsync = true
	client := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(clientPort)}
	peer := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(peerPort)}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, "", errors.New("etcd did not become ready within 60s")
	}
	return e, client.String(), nil
}

type pkiFiles struct{ caFile, serverCert, serverKey, saPub, saKey string }

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
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	writes := []struct {
		path, kind string
		der        []byte
	}{
		{p.caFile, "CERTIFICATE", caDER},
		{p.serverCert, "CERTIFICATE", srvDER},
		{p.serverKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey)},
		{p.saPub, "PUBLIC KEY", saPubDER},
		{p.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
	}
	for _, w := range writes {
		if err := os.WriteFile(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), 0o600); err != nil {
			return p, err
		}
	}
	return p, nil
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
