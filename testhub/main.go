// Command testhub runs a throwaway Kubernetes "test hub" on 127.0.0.1 for the
// integration tests: embedded etcd, an in-process kube-apiserver and a
// kube-controller-manager child process (garbage collector + namespace
// controllers), with the CRDs given by --crd installed.
//
// Test infrastructure only; never use it for anything that matters.
//
//	testhub --dir DIR [--crd FILE|DIR]... [--kubeconfig PATH] [--ready-file PATH] [--exit-on-stdin-eof]
//	testhub healthcheck --kubeconfig PATH       # exit 0 when /readyz answers ok
//	testhub controller-manager [KCM FLAGS]...   # used internally (child process)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testhub: "+format+"\n", args...)
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "controller-manager":
			os.Exit(runControllerManager(os.Args[2:]))
		case "healthcheck":
			os.Exit(runHealthcheck(os.Args[2:]))
		}
	}
	os.Exit(runHub(os.Args[1:]))
}

type hubOptions struct {
	dir            string
	kubeconfig     string
	readyFile      string
	crds           stringList
	apiserverArgs  stringList
	controllers    string
	exitOnStdinEOF bool
	detach         bool
	probe          bool
	keepData       bool
	resume         bool
	pausableEtcd   bool
	verbosity      int
	etcdLogLevel   string
	startTimeout   time.Duration
}

func runHub(args []string) int {
	var o hubOptions
	fs := flag.NewFlagSet("testhub", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "state directory (certs, tokens, etcd data); wiped at start (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default <dir>/kubeconfig)")
	fs.StringVar(&o.readyFile, "ready-file", "", "file to touch once the hub is ready")
	fs.Var(&o.crds, "crd", "CRD file or directory of *.yaml (repeatable; applied in order, a later CRD of the same name wins)")
	fs.Var(&o.apiserverArgs, "apiserver-arg", "extra kube-apiserver flag, e.g. --feature-gates=X=true (repeatable)")
	fs.StringVar(&o.controllers, "controllers", "garbagecollector,namespace", "kube-controller-manager --controllers; empty = no controller manager")
	fs.BoolVar(&o.exitOnStdinEOF, "exit-on-stdin-eof", false, "shut down when stdin reaches EOF (parent died)")
	fs.BoolVar(&o.detach, "detach", false, "start a new session (setsid) so terminal signals do not reach the hub")
	fs.BoolVar(&o.probe, "probe", true, "before reporting ready, check that the garbage collector deletes a dependent of a deleted owner")
	fs.BoolVar(&o.keepData, "keep-data", false, "keep the etcd data directory on exit")
	fs.BoolVar(&o.resume, "resume", false, "start on the state an earlier run left in --dir (etcd data, credentials, port), as after a crash")
	fs.BoolVar(&o.pausableEtcd, "pausable-etcd", false, "put a proxy between the API server and etcd that SIGUSR1 pauses and SIGUSR2 resumes")
	fs.IntVar(&o.verbosity, "v", 0, "kube-apiserver/controller-manager log verbosity")
	fs.StringVar(&o.etcdLogLevel, "etcd-log-level", "error", "embedded etcd log level")
	fs.DurationVar(&o.startTimeout, "start-timeout", 5*time.Minute, "give up if not ready within this time")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dir == "" || fs.NArg() > 0 {
		logf("usage: testhub --dir DIR [--crd PATH]... (see -h)")
		return 2
	}
	if o.detach {
		if _, err := syscall.Setsid(); err != nil {
			logf("setsid: %v (continuing)", err)
		}
	}
	var err error
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		logf("%v", err)
		return 2
	}
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(o.dir, "kubeconfig")
	}
	if o.kubeconfig, err = filepath.Abs(o.kubeconfig); err != nil {
		logf("%v", err)
		return 2
	}
	return (&hub{opts: o}).run()
}

type hub struct {
	opts     hubOptions
	files    *hubFiles
	etcd     *embed.Etcd
	port     int
	stopping atomic.Bool
	kcm      *supervisor
}

func (h *hub) run() int {
	o := h.opts
	started := time.Now()
	removeQuietly(o.readyFile)
	removeQuietly(o.kubeconfig)

	// Validate the CRD inputs before starting anything.
	crdFiles, err := expandCRDPaths(o.crds)
	if err != nil {
		logf("%v", err)
		return 2
	}
	crds, err := loadCRDs(crdFiles)
	if err != nil {
		logf("%v", err)
		return 2
	}

	pki := filepath.Join(o.dir, "pki")
	if o.resume {
		if h.files, err = loadCredentials(pki); err != nil {
			logf("--resume: %v", err)
			return 1
		}
	} else {
		for _, sub := range []string{"etcd", "pki"} {
			if err := os.RemoveAll(filepath.Join(o.dir, sub)); err != nil {
				logf("%v", err)
				return 1
			}
		}
		if err := os.MkdirAll(pki, 0o700); err != nil {
			logf("%v", err)
			return 1
		}
		if h.files, err = generateCredentials(pki); err != nil {
			logf("generate credentials: %v", err)
			return 1
		}
	}

	etcdURL, err := h.startEtcd(filepath.Join(o.dir, "etcd"))
	if err != nil {
		logf("start etcd: %v", err)
		return 1
	}
	logf("etcd ready at %s (%.1fs)", etcdURL, time.Since(started).Seconds())
	if o.pausableEtcd {
		target := strings.TrimPrefix(etcdURL, "http://")
		proxy, addr, err := startPausableProxy(target)
		if err != nil {
			logf("etcd proxy: %v", err)
			h.closeEtcd()
			return 1
		}
		proxy.pauseOnSignals()
		etcdURL = "http://" + addr
		logf("etcd behind a pausable proxy at %s", etcdURL)
	}

	if h.port = savedPort(o.dir); !o.resume || h.port == 0 {
		if h.port, err = freePort(); err != nil {
			logf("%v", err)
			h.closeEtcd()
			return 1
		}
	}
	if err := savePort(o.dir, h.port); err != nil {
		logf("%v", err)
		h.closeEtcd()
		return 1
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", h.port)

	// NewAPIServerCommand installs the process' only SIGTERM/SIGINT handler
	// (genericapiserver.SetupSignalContext) and exposes its context as cmd.Context().
	// Everything else in this process hangs off that context; to stop ourselves we
	// send ourselves SIGTERM.
	cmd := apiserverapp.NewAPIServerCommand()
	sigCtx := cmd.Context()
	if sigCtx == nil {
		// Older kube-apiservers (scripts/hub.sh with MWRS_HUB_K8S, e.g. v1.27) install
		// their handler only once the command runs and keep its context to themselves.
		// Watch the same signals: signal.Notify delivers each one to every subscriber,
		// so the apiserver's handler still sees the first SIGTERM (and exits on a second).
		var stopSignals context.CancelFunc
		sigCtx, stopSignals = signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stopSignals()
	}
	cmd.SetArgs(append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(h.port),
		"--tls-cert-file=" + h.files.ServerCert,
		"--tls-private-key-file=" + h.files.ServerKey,
		"--cert-dir=" + pki,
		"--token-auth-file=" + h.files.Tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=" + server,
		"--service-account-key-file=" + h.files.SAPub,
		"--service-account-signing-key-file=" + h.files.SAKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=" + strconv.Itoa(o.verbosity),
	}, o.apiserverArgs...))
	apiDone := make(chan error, 1)
	go func() { apiDone <- cmd.Execute() }()

	go func() {
		<-sigCtx.Done()
		shutdownRequested.Store(true)
		h.stopping.Store(true)
		logf("shutting down")
		removeQuietly(o.readyFile)
		removeQuietly(o.kubeconfig)
	}()
	if o.exitOnStdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			logf("stdin closed")
			requestShutdown()
		}()
	}

	cfg := &rest.Config{
		Host:            server,
		BearerToken:     h.files.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: h.files.CAData},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
	startCtx, cancelStart := context.WithTimeout(sigCtx, o.startTimeout)
	startErr := make(chan error, 1)
	go func() { startErr <- h.bringUp(startCtx, cfg, crds, started) }()

	exitCode := 0
	var apiErr error
	apiExited := false
	select {
	case err := <-startErr:
		if err != nil {
			if sigCtx.Err() == nil {
				logf("startup failed: %v", err)
				exitCode = 1
				requestShutdown()
			}
		}
	case apiErr = <-apiDone:
		apiExited = true
	}
	cancelStart()
	if !apiExited {
		select {
		case <-sigCtx.Done():
		case apiErr = <-apiDone:
			apiExited = true
		}
	}
	if apiExited && sigCtx.Err() == nil {
		logf("kube-apiserver exited unexpectedly: %v", apiErr)
		exitCode = 1
		h.stopping.Store(true)
		removeQuietly(o.readyFile)
		removeQuietly(o.kubeconfig)
	}

	// Shutdown: controller manager, then apiserver, then etcd.
	h.stopping.Store(true)
	if h.kcm != nil {
		h.kcm.stop(15 * time.Second)
		if h.kcm.failed.Load() {
			exitCode = 1
		}
	}
	if !apiExited {
		select {
		case apiErr = <-apiDone:
			if apiErr != nil {
				logf("kube-apiserver: %v", apiErr)
			}
		case <-time.After(60 * time.Second):
			logf("kube-apiserver did not stop within 60s")
			exitCode = 1
		}
	}
	h.closeEtcd()
	klog.Flush()
	logf("stopped")
	return exitCode
}

// bringUp waits for the apiserver, installs CRDs, starts the controllers and
// finally publishes the kubeconfig.
func (h *hub) bringUp(ctx context.Context, cfg *rest.Config, crds []crdSource, started time.Time) error {
	o := h.opts
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if err != nil {
			last = fmt.Errorf("%v %s", err, strings.TrimSpace(string(body)))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for /readyz: %v (last: %v)", err, last)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{})
		last = err
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for namespace default: %v (last: %v)", err, last)
	}
	logf("kube-apiserver ready at %s (%.1fs)", cfg.Host, time.Since(started).Seconds())

	if err := installCRDs(ctx, cfg, crds); err != nil {
		return err
	}
	if len(crds) > 0 {
		logf("%d CRDs installed (%.1fs)", len(crds), time.Since(started).Seconds())
	}

	if o.controllers != "" {
		kcmKubeconfig := filepath.Join(o.dir, "pki", "controller-manager.kubeconfig")
		if err := writeKubeconfig(kcmKubeconfig, cfg.Host, h.files.CAData, h.files.KCMToken, "system:kube-controller-manager"); err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		h.kcm = newSupervisor(self, []string{
			"controller-manager", "--exit-on-stdin-eof",
			"--kubeconfig=" + kcmKubeconfig,
			"--controllers=" + o.controllers,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--kube-api-qps=200",
			"--kube-api-burst=400",
			"--v=" + strconv.Itoa(o.verbosity),
		}, &h.stopping)
		if err := h.kcm.start(); err != nil {
			return fmt.Errorf("start kube-controller-manager: %w", err)
		}
		if o.probe {
			if err := probeControllers(ctx, client, o.controllers); err != nil {
				return err
			}
			logf("controllers work (%.1fs)", time.Since(started).Seconds())
		}
	}

	if err := writeKubeconfig(o.kubeconfig, cfg.Host, h.files.CAData, h.files.AdminToken, "admin"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fmt.Printf("TEST_HUB_READY kubeconfig=%s\n", o.kubeconfig)
	if o.readyFile != "" {
		if err := os.WriteFile(o.readyFile, []byte(o.kubeconfig+"\n"), 0o644); err != nil {
			return err
		}
	}
	logf("ready in %.1fs: server %s, kubeconfig %s", time.Since(started).Seconds(), cfg.Host, o.kubeconfig)
	return nil
}

// probeControllers proves the controller manager runs: a dependent of a deleted
// owner disappears (garbage collector informers synced and working). The namespace
// controller lives in the same process; it is not probed because it waits a fixed
// 5 s (namespaceDeletionGracePeriod) before acting on any deleted namespace.
func probeControllers(ctx context.Context, client kubernetes.Interface, controllers string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for _, c := range strings.Split(controllers, ",") {
		switch strings.TrimSpace(c) {
		case "garbagecollector", "garbage-collector-controller", "*":
			return probeGC(ctx, client, rand.String(6))
		}
	}
	return nil
}

func probeGC(ctx context.Context, client kubernetes.Interface, suffix string) error {
	cms := client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "testhub-probe-owner-" + suffix}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("gc probe: %w", err)
	}
	dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "testhub-probe-dependent-" + suffix,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}
	if _, err := cms.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("gc probe: %w", err)
	}
	bg := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return fmt.Errorf("gc probe: %w", err)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, dep.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("gc probe: dependent ConfigMap was not garbage-collected: %w", err)
	}
	return nil
}

func (h *hub) startEtcd(dir string) (string, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		// --resume starts on an earlier run's data.
		if !h.opts.resume {
			if err := os.RemoveAll(dir); err != nil {
				return "", err
			}
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		clientPort, err := freePort()
		if err != nil {
			return "", err
		}
		peerPort, err := freePort()
		if err != nil {
			return "", err
		}
		cu := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))}
		pu := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}
		cfg := embed.NewConfig()
		cfg.Name = "testhub"
		cfg.Dir = dir
		setEtcdURLs(cfg, cu, pu)
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		cfg.Logger = "zap"
		cfg.LogLevel = h.opts.etcdLogLevel
		cfg.LogOutputs = []string{"stderr"}
		cfg.UnsafeNoFsync = true
		// The fleet benchmarks write gigabytes between two compactions by the API server
		// (every 5 minutes): 60,000 ManifestWorks written, answered and rewritten. etcd's
		// default 2 GiB quota would refuse writes midway.
		cfg.QuotaBackendBytes = 16 << 30
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if strings.Contains(err.Error(), "address already in use") {
				continue
			}
			return "", err
		}
		select {
		case <-e.Server.ReadyNotify():
			h.etcd = e
			return cu.String(), nil
		case err := <-e.Err():
			e.Close()
			return "", err
		case <-time.After(60 * time.Second):
			e.Close()
			return "", errors.New("etcd not ready within 60s")
		}
	}
	return "", lastErr
}

func (h *hub) closeEtcd() {
	if h.etcd == nil {
		return
	}
	logf("closing etcd (its \"server closed\" errors below are expected)")
	h.etcd.Close()
	if !h.opts.keepData {
		_ = os.RemoveAll(filepath.Join(h.opts.dir, "etcd"))
	}
}

// ---- kube-controller-manager child process ----

type supervisor struct {
	path     string
	args     []string
	stopping *atomic.Bool
	failed   atomic.Bool

	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

func newSupervisor(path string, args []string, stopping *atomic.Bool) *supervisor {
	return &supervisor{path: path, args: args, stopping: stopping}
}

func (s *supervisor) spawn() error {
	cmd := exec.Command(s.path, s.args...)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	// The child exits when this pipe closes, i.e. when we die for any reason.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.stdin, s.done = cmd, stdin, done
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		close(done)
		if s.stopping.Load() {
			return
		}
		logf("kube-controller-manager (pid %d) exited unexpectedly: %v", cmd.Process.Pid, err)
		s.restart()
	}()
	logf("kube-controller-manager started (pid %d)", cmd.Process.Pid)
	return nil
}

func (s *supervisor) start() error { return s.spawn() }

var kcmRestarts atomic.Int32

func (s *supervisor) restart() {
	if kcmRestarts.Add(1) > 5 {
		logf("kube-controller-manager keeps failing; shutting the hub down")
		s.failed.Store(true)
		requestShutdown()
		return
	}
	time.Sleep(time.Second)
	if s.stopping.Load() {
		return
	}
	if err := s.spawn(); err != nil {
		logf("restart kube-controller-manager: %v", err)
		s.failed.Store(true)
		requestShutdown()
	}
}

func (s *supervisor) stop(timeout time.Duration) {
	s.mu.Lock()
	cmd, stdin, done := s.cmd, s.stdin, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = stdin.Close()
	select {
	case <-done:
	case <-time.After(timeout):
		logf("kube-controller-manager did not stop; killing it")
		_ = cmd.Process.Kill()
		<-done
	}
}

// runControllerManager is the child: the stock kube-controller-manager command.
func runControllerManager(args []string) int {
	if len(args) > 0 && args[0] == "--exit-on-stdin-eof" {
		args = args[1:]
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			klog.Flush()
			os.Exit(0)
		}()
	}
	cmd := kcmapp.NewControllerManagerCommand()
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return 1
	}
	return 0
}

// runHealthcheck exits 0 when the hub behind --kubeconfig answers /readyz.
func runHealthcheck(args []string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the hub")
	timeout := fs.Duration("timeout", 5*time.Second, "request timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Timeout = *timeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "not ready: %v %s\n", err, body)
		return 1
	}
	fmt.Println(strings.TrimSpace(string(body)))
	return 0
}

// ---- helpers ----

var (
	shutdownRequested atomic.Bool
	shutdownOnce      sync.Once
)

// requestShutdown stops the hub through the apiserver's signal handler. It sends
// at most one signal: a second SIGTERM would make that handler exit immediately.
func requestShutdown() {
	if shutdownRequested.Load() {
		return
	}
	shutdownOnce.Do(func() { _ = syscall.Kill(os.Getpid(), syscall.SIGTERM) })
}

func removeQuietly(path string) {
	if path != "" {
		_ = os.Remove(path)
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

// writeKubeconfig writes a token kubeconfig with context "test-hub" atomically.
func writeKubeconfig(path, server string, caData []byte, token, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test-hub"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test-hub"] = &clientcmdapi.Context{Cluster: "test-hub", AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = "test-hub"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubeconfig-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
