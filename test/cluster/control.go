package main

// A control plane for tests, as clusters users run have one: N kube-apiservers sharing the etcd, each a child
// process in a UTS namespace of its own (its hostname names its identity lease in kube-system, so each has its
// own), a loopback TCP load balancer that spreads new connections over the serving ones as a cloud load
// balancer does, optionally kube-controller-manager, and a control endpoint (plain HTTP on loopback; the bed
// is throwaway):
//
//	GET  /                          the apiservers: name, server, kubeconfigs, serving, this run's extra flags
//	POST /apiservers/NAME/stop      stops one (SIGTERM; SIGKILL after 5 s); the others keep serving
//	POST /apiservers/NAME/start     starts it again, with {"flags": [...]} added for this run only (a rolling
//	                                upgrade: stop, start with other flags); answers once its /readyz does
import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type instanceInfo struct {
	Name        string            `json:"name"`
	Server      string            `json:"server"`
	Kubeconfigs map[string]string `json:"kubeconfigs"`
	Serving     bool              `json:"serving"`
	Flags       []string          `json:"flags"`
}

type instance struct {
	name, addr, server, dir, cert, key string
	port                               int
	kubeconfigs                        map[string]string
	serving                            atomic.Bool

	mu      sync.Mutex // held while starting or stopping
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	exitErr error
	flags   []string
}

type controlPlane struct {
	b         *bed
	self      string
	instances []*instance
	// Whether children get a UTS namespace (needs CAP_SYS_ADMIN); without it every apiserver has the machine's
	// hostname, so they share one identity lease.
	uts atomic.Bool
}

// nodeAgents are what make pods run on a control plane: kube-scheduler binds them to nodes, and kwok plays the
// kubelet of every node annotated kwok.x-k8s.io/node=fake (the test creates the nodes), moving their pods
// through the stages in kwokConfig (Running and Ready, deleted when asked) and renewing each node's lease.
type nodeAgents struct {
	scheduler        bool
	kwok, kwokConfig string
}

func serveControlPlane(b *bed, lbPort, n int, controllers string, nodes nodeAgents, firstFlags []string, info readyInfo) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cp := &controlPlane{b: b, self: self}
	cp.uts.Store(true)
	for i := 1; i <= n; i++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		in := &instance{name: fmt.Sprintf("apiserver-%d", i), port: port, addr: "127.0.0.1:" + strconv.Itoa(port)}
		in.server = "https://" + in.addr
		in.dir = filepath.Join(b.dir, in.name)
		in.cert, in.key = filepath.Join(in.dir, "apiserver.crt"), filepath.Join(in.dir, "apiserver.key")
		if err := os.MkdirAll(in.dir, 0o700); err != nil {
			return err
		}
		if err := b.pki.issueServingCert(in.cert, in.key, in.name); err != nil {
			return err
		}
		if in.kubeconfigs, err = b.writeKubeconfigs(in.dir, in.server); err != nil {
			return err
		}
		cp.instances = append(cp.instances, in)
	}
	info.WebhookCertDir = filepath.Join(b.dir, "webhook")
	if err := os.MkdirAll(info.WebhookCertDir, 0o700); err != nil {
		return err
	}
	if err := b.pki.issueServingCert(filepath.Join(info.WebhookCertDir, "tls.crt"), filepath.Join(info.WebhookCertDir, "tls.key"), "webhook"); err != nil {
		return err
	}
	lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lbPort))
	if err != nil {
		return fmt.Errorf("load balancer: %w", err)
	}
	defer lb.Close()
	go cp.balance(lb)
	defer cp.stopAll()

	starts := make(chan error, n)
	for _, in := range cp.instances {
		go func() { starts <- cp.start(in, firstFlags) }()
	}
	for range cp.instances {
		if err := <-starts; err != nil {
			return err
		}
	}
	if controllers != "" {
		kcm, err := cp.startControllerManager(info.Kubeconfigs["admin"], controllers)
		if err != nil {
			return err
		}
		defer stopChild(kcm.cmd, kcm.done)
	}
	if nodes.scheduler {
		sched, err := cp.startScheduler(info.Kubeconfigs["admin"])
		if err != nil {
			return err
		}
		defer stopChild(sched.cmd, sched.done)
	}
	if nodes.kwok != "" {
		kwok, err := cp.startKwok(nodes.kwok, nodes.kwokConfig, info.Kubeconfigs["admin"])
		if err != nil {
			return err
		}
		defer stopChild(kwok.cmd, kwok.done)
	}
	control, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer control.Close()
	go func() { _ = http.Serve(control, cp.routes()) }()

	info.Control = "http://" + control.Addr().String()
	info.Apiservers = cp.status()
	if err := b.announce(info); err != nil {
		return err
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	_ = os.Remove(filepath.Join(b.dir, "ready.json"))
	return nil
}

func (cp *controlPlane) status() []instanceInfo {
	out := make([]instanceInfo, 0, len(cp.instances))
	for _, in := range cp.instances {
		in.mu.Lock()
		flags := append([]string{}, in.flags...)
		in.mu.Unlock()
		out = append(out, instanceInfo{Name: in.name, Server: in.server, Kubeconfigs: in.kubeconfigs, Serving: in.serving.Load(), Flags: flags})
	}
	return out
}

func (cp *controlPlane) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, cp.status()) })
	act := func(w http.ResponseWriter, r *http.Request, do func(*instance) error) {
		for _, in := range cp.instances {
			if in.name == r.PathValue("name") {
				if err := do(in); err != nil {
					writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
					return
				}
				writeJSON(w, http.StatusOK, cp.status())
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no apiserver " + r.PathValue("name")})
	}
	mux.HandleFunc("POST /apiservers/{name}/stop", func(w http.ResponseWriter, r *http.Request) { act(w, r, cp.stop) })
	mux.HandleFunc("POST /apiservers/{name}/start", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Flags []string `json:"flags"`
		}
		if r.ContentLength != 0 {
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: " + err.Error()})
				return
			}
		}
		act(w, r, func(in *instance) error { return cp.start(in, body.Flags) })
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// start runs one apiserver with the bed's flags and `extra`, and returns once its /readyz answers.
func (cp *controlPlane) start(in *instance, extra []string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd != nil {
		return fmt.Errorf("%s is running; stop it first", in.name)
	}
	args := append(cp.b.apiserverFlags(in.port, in.cert, in.key), extra...)
	cmd, done, exitErr, err := cp.spawn(filepath.Join(in.dir, "apiserver.log"), "apiserver", in.name, args)
	if err != nil {
		return err
	}
	in.cmd, in.done, in.flags = cmd, done, append([]string{}, extra...)
	errc := make(chan error, 1)
	go func() {
		<-done
		in.serving.Store(false)
		errc <- *exitErr
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := waitReady(ctx, in.server, cp.b.pki.caFile, cp.b.tokens["admin"], errc); err != nil {
		stopChild(cmd, done)
		in.cmd = nil
		return fmt.Errorf("%s: %w (log: %s)", in.name, err, filepath.Join(in.dir, "apiserver.log"))
	}
	in.serving.Store(true)
	return nil
}

// stop takes one apiserver out of the load balancer, then stops it.
func (cp *controlPlane) stop(in *instance) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.serving.Store(false)
	if in.cmd != nil {
		stopChild(in.cmd, in.done)
		in.cmd = nil
	}
	return nil
}

func (cp *controlPlane) stopAll() {
	var wg sync.WaitGroup
	for _, in := range cp.instances {
		wg.Add(1)
		go func() { defer wg.Done(); _ = cp.stop(in) }()
	}
	wg.Wait()
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (cp *controlPlane) startControllerManager(kubeconfig, controllers string) (child, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		// Each controller acts as its own service account (tokens from the TokenRequest API, signed with the
		// apiservers' key), held to the bootstrap system:controller:* roles, as in a real cluster.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + cp.b.pki.saKey,
		"--root-ca-file=" + cp.b.pki.caFile,
		"--secure-port=0",
	}
	if !cp.b.verbose {
		args = append(args, "--v=0", "--logging-format=text")
	}
	log := filepath.Join(cp.b.dir, "controller-manager.log")
	cmd, done, _, err := cp.spawn(log, "controller-manager", "", args)
	if err != nil {
		return child{}, err
	}
	// It has no readiness endpoint here (its port is off); a start that fails fails within a second or two.
	select {
	case <-done:
		return child{}, fmt.Errorf("kube-controller-manager exited at start (log: %s)", log)
	case <-time.After(2 * time.Second):
	}
	return child{cmd, done}, nil
}

func (cp *controlPlane) startScheduler(kubeconfig string) (child, error) {
	args := []string{"--kubeconfig=" + kubeconfig, "--leader-elect=false", "--secure-port=0"}
	if !cp.b.verbose {
		args = append(args, "--v=0", "--logging-format=text")
	}
	return cp.startAgent("kube-scheduler", filepath.Join(cp.b.dir, "scheduler.log"), cp.self, append([]string{"scheduler"}, args...))
}

func (cp *controlPlane) startKwok(bin, config, kubeconfig string) (child, error) {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + config,
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Leases as kubelets renew them (node-lease heartbeat), and the pods' IPs from a range of their own.
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
		"--node-ip=10.0.0.1",
	}
	return cp.startAgent("kwok", filepath.Join(cp.b.dir, "kwok.log"), bin, args)
}

// startAgent starts a child that has no readiness endpoint here: one that fails at start fails within a second or
// two. It is killed with this process, however this one ends.
func (cp *controlPlane) startAgent(what, logPath, bin string, args []string) (child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return child{}, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return child{}, fmt.Errorf("%s: %w", what, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(done) }()
	select {
	case <-done:
		return child{}, fmt.Errorf("%s exited at start (log: %s)", what, logPath)
	case <-time.After(2 * time.Second):
	}
	return child{cmd, done}, nil
}

// spawn starts `testcluster <sub>` as a child whose output goes to logPath; with a hostname, in a UTS
// namespace of its own when this process may make one.
func (cp *controlPlane) spawn(logPath, sub, hostname string, args []string) (*exec.Cmd, chan struct{}, *error, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, nil, err
	}
	for {
		uts := hostname != "" && cp.uts.Load()
		full := []string{sub}
		if uts {
			full = append(full, "--hostname", hostname)
		}
		cmd := exec.Command(cp.self, append(full, args...)...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if uts {
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
		}
		if err := cmd.Start(); err != nil {
			if uts && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL)) {
				fmt.Fprintln(os.Stderr, "testcluster: no UTS namespaces here; the apiservers share one hostname and so one identity lease")
				cp.uts.Store(false)
				continue
			}
			logFile.Close()
			return nil, nil, nil, err
		}
		done := make(chan struct{})
		var exitErr error
		go func() {
			exitErr = cmd.Wait()
			logFile.Close()
			close(done)
		}()
		return cmd, done, &exitErr, nil
	}
}

// stopChild stops a child gracefully, but for 5 s at most: an apiserver with watches open through the load
// balancer waits on their HTTP/2 streams for up to a minute before it exits, and a test's rolling upgrade
// would wait with it.
func stopChild(cmd *exec.Cmd, done chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// balance hands each new connection to the next serving apiserver in turn, trying the others if one refuses.
func (cp *controlPlane) balance(l net.Listener) {
	var next atomic.Uint64
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			first := int(next.Add(1))
			for k := range cp.instances {
				in := cp.instances[(first+k)%len(cp.instances)]
				if !in.serving.Load() {
					continue
				}
				up, err := net.DialTimeout("tcp", in.addr, 2*time.Second)
				if err != nil {
					continue
				}
				splice(c, up)
				return
			}
		}()
	}
}

// splice copies both ways until either side closes, then closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}
