// Command testcluster runs a real kube-apiserver, backed by an in-process etcd, on loopback.
//
// Outrigger's tests and local runtime use it so that every claim about Kubernetes behaviour (immutable
// ControllerRevision data, one controller ownerReference, 409 on stale resourceVersion, discovery's
// storageVersionHash, label selector filtering) is checked against the apiserver itself, not a fake.
//
// The same binary is also kubectl when invoked under that name (or as `testcluster kubectl ...`), so the
// project brings the kubectl its interoperability tests use, and kube-controller-manager
// (`testcluster controller-manager ...`) and kube-scheduler (`testcluster scheduler ...`), so tests that involve the garbage collector or an in-tree
// controller run the real one, from the same Kubernetes release.
//
//	testcluster serve --dir DIR [--port N] [--apiservers N] [--controllers LIST] [--scheduler] [--kwok BIN --kwok-config FILE]
//
// writes DIR/admin.kubeconfig, DIR/outrigger.kubeconfig, DIR/migrator.kubeconfig and, once /readyz answers,
// DIR/ready.json; it runs until SIGINT or SIGTERM, then stops everything it started. With neither
// --apiservers nor --controllers it is the default bed: one apiserver in this process. With either, it is a
// control plane (see control.go): N apiservers as child processes sharing the etcd, a loopback load balancer
// in front of them, optionally kube-controller-manager, and a control endpoint through which a test stops an
// apiserver or restarts it with other flags (a rolling upgrade).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanagerapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	schedulerapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		runKubectl()
	}
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		os.Args = append([]string{"kubectl"}, os.Args[2:]...)
		runKubectl()
	}
	var err error
	switch sub := ""; {
	case len(os.Args) > 1:
		sub = os.Args[1]
		switch sub {
		case "serve":
			err = serve(os.Args[2:])
		case "apiserver":
			err = runChild(os.Args[2:], apiserverapp.NewAPIServerCommand)
		case "controller-manager":
			err = runChild(os.Args[2:], controllermanagerapp.NewControllerManagerCommand)
		case "scheduler":
			err = runChild(os.Args[2:], func() *cobra.Command { return schedulerapp.NewSchedulerCommand() })
		default:
			usage()
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testcluster serve --dir DIR [--port N] [--apiservers N] [--controllers LIST] [--scheduler] [--kwok BIN --kwok-config FILE] | testcluster kubectl ARGS...")
	os.Exit(2)
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
	// A control plane's: each apiserver, and the endpoint that stops and starts them (control.go).
	Apiservers []instanceInfo `json:"apiservers,omitempty"`
	Control    string         `json:"control,omitempty"`
	// A control plane's serving certificate for webhooks a test serves on loopback (tls.crt and tls.key, for
	// 127.0.0.1, signed by CAFile): a webhook configuration's caBundle is CAFile's content.
	WebhookCertDir string `json:"webhookCertDir,omitempty"`
}

// bed is what every apiserver of one test cluster shares: the state directory, etcd, the PKI and the tokens.
type bed struct {
	dir     string
	etcdURL string
	pki     pkiFiles
	tokens  map[string]string
	verbose bool
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "state directory (created; kubeconfigs are written here)")
	port := fs.Int("port", 0, "the cluster's port on 127.0.0.1: the apiserver's, or the load balancer's (0: pick a free one)")
	apiservers := fs.Int("apiservers", 0, "run a control plane of N apiservers (child processes) behind a loopback load balancer")
	controllers := fs.String("controllers", "", "also run kube-controller-manager with these controllers (its --controllers list)")
	scheduler := fs.Bool("scheduler", false, "also run kube-scheduler (a control plane)")
	kwok := fs.String("kwok", "", "also run this kwok binary, which plays the kubelet of every node annotated kwok.x-k8s.io/node=fake (a control plane)")
	kwokConfig := fs.String("kwok-config", "", "kwok's --config: the stages its nodes and pods go through")
	verbose := fs.Bool("v", false, "let the apiserver log at its default verbosity")
	var firstFlags repeated
	fs.Var(&firstFlags, "apiserver-flag", "a control plane's apiservers start with this flag too (repeatable; a restart sets its own)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if *apiservers < 0 || *apiservers > 9 {
		return errors.New("--apiservers takes 1 to 9")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(*dir, "ready.json"))
	// The same way out as Ctrl-C: every part shuts down in order.
	exitWithParent(func() { _ = syscall.Kill(os.Getpid(), syscall.SIGTERM) })

	etcdClient, etcdPeer, err := freePorts2()
	if err != nil {
		return err
	}
	clusterPort := *port
	if clusterPort == 0 {
		if clusterPort, err = freePort(); err != nil {
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
	b := &bed{dir: *dir, etcdURL: etcdURL, pki: pki, tokens: tokens, verbose: *verbose}
	server := "https://127.0.0.1:" + strconv.Itoa(clusterPort)
	kubeconfigs, err := b.writeKubeconfigs(*dir, server)
	if err != nil {
		return err
	}
	info := readyInfo{Server: server, Kubeconfigs: kubeconfigs, Tokens: tokens, CAFile: pki.caFile, EtcdURL: etcdURL, PID: os.Getpid()}
	if *apiservers == 0 && *controllers == "" && !*scheduler && *kwok == "" {
		return serveOne(b, clusterPort, info)
	}
	nodes := nodeAgents{scheduler: *scheduler, kwok: *kwok, kwokConfig: *kwokConfig}
	return serveControlPlane(b, clusterPort, max(*apiservers, 1), *controllers, nodes, firstFlags, info)
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// serveOne is the default bed: one apiserver, in this process.
func serveOne(b *bed, port int, info readyInfo) error {
	cmd := apiserverapp.NewAPIServerCommand()
	cmd.SetArgs(b.apiserverFlags(port, b.pki.serverCert, b.pki.serverKey))
	errc := make(chan error, 1)
	go func() { errc <- cmd.Execute() }()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := waitReady(ctx, info.Server, b.pki.caFile, b.tokens["admin"], errc); err != nil {
		return err
	}
	if err := b.announce(info); err != nil {
		return err
	}
	// The apiserver command installs the SIGINT/SIGTERM handler; it returns once it has shut down.
	err := <-errc
	_ = os.Remove(filepath.Join(b.dir, "ready.json"))
	return err
}

// announce writes ready.json and the one stdout line the starter waits for.
func (b *bed) announce(info readyInfo) error {
	if err := writeJSONAtomic(filepath.Join(b.dir, "ready.json"), info); err != nil {
		return err
	}
	line, _ := json.Marshal(map[string]any{"ready": true, "server": info.Server, "kubeconfig": info.Kubeconfigs["admin"]})
	fmt.Println(string(line))
	return nil
}

// writeKubeconfigs writes one kubeconfig per identity for `server` into dir.
func (b *bed) writeKubeconfigs(dir, server string) (map[string]string, error) {
	kubeconfigs := map[string]string{}
	for _, id := range identities {
		path := filepath.Join(dir, id.name+".kubeconfig")
		if err := writeKubeconfig(path, server, b.pki.caFile, id.name, b.tokens[id.name]); err != nil {
			return nil, err
		}
		kubeconfigs[id.name] = path
	}
	return kubeconfigs, nil
}

// apiserverFlags are every apiserver's flags; a control plane's test may add more to one instance (control.go).
func (b *bed) apiserverFlags(port int, cert, key string) []string {
	flags := []string{
		"--etcd-servers=" + b.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + cert,
		"--tls-private-key-file=" + key,
		"--token-auth-file=" + filepath.Join(b.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + b.pki.saPub,
		"--service-account-signing-key-file=" + b.pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--shutdown-delay-duration=0s",
		// The kubernetes Service endpoint cannot point at loopback; nothing here needs it.
		"--endpoint-reconciler-type=none",
		"--shutdown-send-retry-after=false",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		// Lets per-cluster tests exercise the in-tree storage version migration API
		// (docs/controllers/storage-migration.md#in-tree-migrations). Serving it also takes the (beta, off by default) feature gate.
		"--runtime-config=storagemigration.k8s.io/v1beta1=true",
		"--feature-gates=StorageVersionMigrator=true",
	}
	if !b.verbose {
		flags = append(flags, "--v=0", "--logging-format=text")
	}
	return flags
}

// exitWithParent calls stop once the process that started this one is gone (a test run killed midway must not
// leave a cluster behind).
func exitWithParent(stop func()) {
	parent := os.Getppid()
	go func() {
		for range time.Tick(time.Second) {
			if os.Getppid() != parent {
				stop()
				return
			}
		}
	}()
}

// runChild runs an apiserver or kube-controller-manager as a control plane's child process (control.go): the
// hostname first, when asked (each apiserver's identity lease is named from it), and it stops when its parent
// does, however the parent died.
func runChild(args []string, command func() *cobra.Command) error {
	if len(args) > 1 && args[0] == "--hostname" {
		if err := syscall.Sethostname([]byte(args[1])); err != nil {
			return fmt.Errorf("sethostname %s: %w", args[1], err)
		}
		args = args[2:]
	}
	exitWithParent(func() { os.Exit(1) })
	cmd := command()
	cmd.SetArgs(args)
	return cmd.Execute()
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
