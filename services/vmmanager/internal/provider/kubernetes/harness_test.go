package kubernetes

// The harness of the API-server tests: a real kube-apiserver (built from
// tools/kubeapiserver, with its embedded etcd), a fault-injecting reverse
// proxy in front of it, and a fake kubelet that runs real desktopd processes
// as the pods' guests.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// env is shared by every API-server test of one run.
var env struct {
	err        error  // why the API server is missing, if it is
	fake       bool   // the tests run on client-go's fake clientset instead
	kubeconfig string // the API server's own kubeconfig
	desktopd   string
	rest       *rest.Config
	apiPID     int                 // the kubeapiserver process, for the benchmarks' CPU figures
	cli        clientset.Interface // direct, for the tests and the fake kubelet
}

func TestMain(m *testing.M) {
	if os.Getenv(envBenchKubelet) != "" {
		// The API benchmarks' kubelet process (bench_api_test.go).
		os.Exit(benchKubeletMain())
	}
	code, cleanup := setupEnv()
	if code == 0 {
		code = m.Run()
	}
	if apiBench.stop != nil {
		apiBench.stop()
	}
	cleanup()
	os.Exit(code)
}

// setupEnv starts the API server when its binary is there ($KUBEAPISERVER,
// else kubeapiserver on $PATH) and builds desktopd. A missing binary is
// recorded in env.err for needAPI; the unit tests run regardless.
func setupEnv() (int, func()) {
	bin := os.Getenv("KUBEAPISERVER")
	if bin == "" {
		bin, _ = exec.LookPath("kubeapiserver")
	}
	dir, err := os.MkdirTemp("", "k8s-provider-test-")
	if err != nil {
		env.err = err
		return 0, func() {}
	}
	cleanup := func() { os.RemoveAll(dir) }
	if bin == "" && os.Getenv("KUBE_FAKE") == "" {
		env.err = fmt.Errorf("no kube-apiserver: build tools/kubeapiserver (cd tools/kubeapiserver && GOWORK=off go build -o /usr/local/bin/kubeapiserver .) or set $KUBEAPISERVER; KUBE_FAKE=1 runs most of these tests on client-go's fake clientset")
		return 0, cleanup
	}
	wd, _ := os.Getwd()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "desktopd"), "./cmd/desktopd")
	build.Dir = filepath.Join(wd, "..", "..", "..", "..", "..", "guest", "desktopd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build desktopd: %v\n%s", err, out)
		return 1, cleanup
	}
	env.desktopd = filepath.Join(dir, "desktopd")
	if bin == "" {
		setupFake()
		return 0, cleanup
	}

	cmd := exec.Command(bin, "-dir", filepath.Join(dir, "api"))
	cmd.Stderr = &tailWriter{max: 64 << 10}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "start %s: %v\n", bin, err)
		return 1, cleanup
	}
	env.apiPID = cmd.Process.Pid
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cleanup()
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case kc, ok := <-lines:
		if !ok {
			fmt.Fprintf(os.Stderr, "kube-apiserver exited before ready:\n%s\n", cmd.Stderr)
			return 1, stop
		}
		env.kubeconfig = kc
	case <-time.After(4 * time.Minute):
		fmt.Fprintf(os.Stderr, "kube-apiserver not ready after 4m:\n%s\n", cmd.Stderr)
		return 1, stop
	}
	rc, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeconfig: %v\n", err)
		return 1, stop
	}
	rc.QPS, rc.Burst = 200, 400
	env.rest = rc
	env.cli = clientset.NewForConfigOrDie(rc)
	return 0, stop
}

// setupFake makes client-go's fake clientset the "API server": an object
// tracker with watches, which gives pods a uid and a creation time on create
// like the API server does, but filters no watch by label, has no status
// subresource of its own, no Eviction API and no error paths.
func setupFake() {
	f := fake.NewClientset()
	var n atomic.Int64
	f.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok {
			o.SetUID(types.UID(fmt.Sprintf("fake-uid-%d", n.Add(1))))
			o.SetCreationTimestamp(metav1.Now())
		}
		return false, nil, nil
	})
	allowAll(f)
	env.fake, env.cli = true, f
}

// allowAll answers every SelfSubjectAccessReview of a fake clientset with
// allowed, as AlwaysAllow would (the fake has no authorizer).
func allowAll(f *fake.Clientset) {
	f.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).DeepCopy()
		r.Status.Allowed = true
		return true, r, nil
	})
}

// needRealAPI skips a test that needs the real API server's behaviour (the
// fault proxy, watches over HTTP) when the tests run on the fake clientset,
// and fails it under CI.
func needRealAPI(t *testing.T) {
	t.Helper()
	needAPI(t)
	if !env.fake {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("required under CI: the kube-apiserver binary (these tests run on the fake clientset)")
	}
	t.Skip("needs the real kube-apiserver (KUBE_FAKE runs on the fake clientset; this test fails under CI)")
}

// needAPI skips the test without an API server (or KUBE_FAKE), but fails it
// under CI so that a missing binary cannot pass as green.
func needAPI(t *testing.T) {
	t.Helper()
	if env.err == nil && (!env.fake || os.Getenv("CI") == "") {
		return
	}
	if env.err == nil {
		env.err = fmt.Errorf("the kube-apiserver binary (KUBE_FAKE is not enough under CI)")
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("required under CI: %v", env.err)
	}
	t.Skipf("%v (this test fails under CI)", env.err)
}

// namespace makes a fresh namespace for one test.
func namespace(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.TrimRight(name, "-") + "-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 36)
	ctx := context.Background()
	if _, err := env.cli.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return name
}

type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = w.buf[len(w.buf)-w.max:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// faultProxy sits between the provider and the API server: it forwards
// everything, except that fault rules answer matching requests themselves
// (or forward them and replace the answer), and it can cut every watch.
type faultProxy struct {
	srv     *http.Server
	url     string
	rp      *httputil.ReverseProxy
	mu      sync.Mutex
	rules   []*fault
	watches map[int]context.CancelFunc
	nextW   int
	// Counts by "METHOD kind" (e.g. "POST pods", "WATCH pods").
	counts sync.Map
}

// fault answers the next n requests matching method and path suffix with
// code; forward sends the request on first and only replaces the answer (a
// create that happened but whose answer was lost).
type fault struct {
	method, suffix string
	code           int
	reason         metav1.StatusReason
	retryAfter     int
	forward        bool
	n              int
}

func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	if env.fake {
		return &faultProxy{}
	}
	target, _ := url.Parse(env.rest.Host)
	p := &faultProxy{watches: map[int]context.CancelFunc{}}
	p.rp = httputil.NewSingleHostReverseProxy(target)
	p.rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // our own loopback test server
	p.rp.FlushInterval = -1
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{Handler: p}
	p.url = "http://" + l.Addr().String()
	go p.srv.Serve(l)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// client is a clientset talking to the API server through the proxy, as
// the administrator.
func (p *faultProxy) client() clientset.Interface {
	if env.fake {
		return env.cli
	}
	return p.clientWithToken(env.rest.BearerToken)
}

// clientWithToken is a clientset talking to the API server through the
// proxy with a bearer token (a ServiceAccount's).
func (p *faultProxy) clientWithToken(token string) clientset.Interface {
	rc := &rest.Config{Host: p.url, BearerToken: token, QPS: 200, Burst: 400}
	return clientset.NewForConfigOrDie(rc)
}

func (p *faultProxy) add(f fault) {
	p.mu.Lock()
	p.rules = append(p.rules, &f)
	p.mu.Unlock()
}

func (p *faultProxy) count(key string) int64 {
	v, _ := p.counts.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64).Load()
}

// dropWatches cuts every open watch, as an API server restart or a load
// balancer's idle timeout does.
func (p *faultProxy) dropWatches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.watches)
	for id, cancel := range p.watches {
		cancel()
		delete(p.watches, id)
	}
	return n
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	verb := r.Method
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		verb = "WATCH"
	}
	kind := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	if strings.Contains(r.URL.Path, "/pods/") {
		kind = "pod"
	}
	v, _ := p.counts.LoadOrStore(verb+" "+kind, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)

	p.mu.Lock()
	var hit *fault
	for _, f := range p.rules {
		if f.n > 0 && f.method == r.Method && strings.HasSuffix(r.URL.Path, f.suffix) && verb != "WATCH" {
			f.n--
			hit = f
			break
		}
	}
	ctx := r.Context()
	var id int
	if verb == "WATCH" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		id = p.nextW
		p.nextW++
		p.watches[id] = cancel
	}
	p.mu.Unlock()
	if verb == "WATCH" {
		defer func() {
			p.mu.Lock()
			delete(p.watches, id)
			p.mu.Unlock()
		}()
	}
	if hit == nil {
		p.rp.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	if hit.forward {
		rec := &discard{header: http.Header{}}
		p.rp.ServeHTTP(rec, r)
	}
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(hit.code), Reason: hit.reason,
		Message: fmt.Sprintf("injected by the test proxy: %d %s", hit.code, hit.reason),
	}
	if hit.reason == metav1.StatusReasonAlreadyExists {
		st.Details = &metav1.StatusDetails{Kind: "pods"}
	}
	w.Header().Set("Content-Type", "application/json")
	if hit.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(hit.retryAfter))
	}
	w.WriteHeader(hit.code)
	json.NewEncoder(w).Encode(st)
}

type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// kubelet plays the node: for every new pod of its namespace it starts a
// desktopd (no display) on a loopback address of its own, 127.0.0.N, at the
// pod's guest port, then sets the pod's status through the status
// subresource: Running, Ready, podIP 127.0.0.N. A deleted pod's desktopd is
// killed.
type kubelet struct {
	t    *testing.T
	ns   string
	port int

	mu     sync.Mutex
	next   int
	guests map[types.UID]*exec.Cmd
	ips    map[types.UID]string
	// behave chooses what happens to a new pod; nil: it becomes ready.
	behave func(*corev1.Pod) behaviour
	stop   context.CancelFunc
}

type behaviour int

const (
	becomeReady behaviour = iota
	// neverReady: Running with an IP, but the container never gets ready
	// (its guest never starts).
	neverReady
)

// setBehave sets what happens to the pods created from now on (nil: they
// become ready); the kubelet's goroutines read it under k.mu.
func (k *kubelet) setBehave(f func(*corev1.Pod) behaviour) {
	k.mu.Lock()
	k.behave = f
	k.mu.Unlock()
}

// ipBase spreads the tests' loopback addresses so that two tests never
// share one.
var ipBase atomic.Int32

func startKubelet(t *testing.T, ns string, port int) *kubelet {
	t.Helper()
	k := &kubelet{t: t, ns: ns, port: port, guests: map[types.UID]*exec.Cmd{}, ips: map[types.UID]string{},
		next: int(ipBase.Add(1)) * 256}
	ctx, cancel := context.WithCancel(context.Background())
	k.stop = cancel
	f := informers.NewSharedInformerFactoryWithOptions(env.cli, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod := obj.(*corev1.Pod)
			if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
				go k.run(ctx, pod)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.kill(pod.UID)
			}
		},
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		k.mu.Lock()
		defer k.mu.Unlock()
		for uid, c := range k.guests {
			c.Process.Kill()
			c.Wait()
			delete(k.guests, uid)
		}
	})
	return k
}

// ip hands out 127.x.y.z addresses (z never 0 or 255), never twice.
func (k *kubelet) ip() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.next++
	n := k.next
	return fmt.Sprintf("127.%d.%d.%d", 10+n/62500, (n/250)%250, n%250+1)
}

func (k *kubelet) run(ctx context.Context, pod *corev1.Pod) {
	b := becomeReady
	k.mu.Lock()
	if k.behave != nil {
		b = k.behave(pod)
	}
	k.mu.Unlock()
	ip := k.ip()
	ready := b == becomeReady
	if ready {
		token := ""
		for _, e := range pod.Spec.Containers[0].Env {
			if e.Name == "DESKTOPD_TOKEN" {
				token = e.Value
			}
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(k.port))
		cmd := exec.Command(env.desktopd, "--display", "none", "--addr", addr, "--log-level", "warn", "--home", k.t.TempDir())
		cmd.Env = append(os.Environ(), "DESKTOPD_TOKEN="+token)
		cmd.Stderr = &tailWriter{max: 8 << 10}
		if err := cmd.Start(); err != nil {
			k.t.Errorf("kubelet: start desktopd for %s: %v", pod.Name, err)
			return
		}
		k.mu.Lock()
		k.guests[pod.UID] = cmd
		k.ips[pod.UID] = ip
		k.mu.Unlock()
		// Like a TCP readiness probe: ready once the port accepts.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				k.t.Errorf("kubelet: desktopd of %s never listened on %s: %s", pod.Name, addr, cmd.Stderr)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	k.setStatus(ctx, pod.Name, pod.UID, func(s *corev1.PodStatus) {
		now := metav1.Now()
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		s.Phase = corev1.PodRunning
		s.HostIP, s.PodIP = "127.0.0.1", ip
		s.PodIPs = []corev1.PodIP{{IP: ip}}
		s.StartTime = &now
		s.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: cond, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: cond, LastTransitionTime: now},
		}
		s.ContainerStatuses = []corev1.ContainerStatus{{
			Name: containerName, Image: pod.Spec.Containers[0].Image, Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}}
	})
}

// setStatus updates a pod's status through the status subresource,
// retrying on conflicts; a pod gone or replaced is left alone.
func (k *kubelet) setStatus(ctx context.Context, name string, uid types.UID, f func(*corev1.PodStatus)) error {
	for {
		pod, err := env.cli.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != uid {
			return fmt.Errorf("pod %s replaced", name)
		}
		f(&pod.Status)
		_, err = env.cli.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
}

func (k *kubelet) kill(uid types.UID) {
	k.mu.Lock()
	c := k.guests[uid]
	delete(k.guests, uid)
	k.mu.Unlock()
	if c != nil {
		c.Process.Kill()
		c.Wait()
	}
}

// evict does what the kubelet does under node pressure: kill the guest and
// mark the pod Failed with reason Evicted (the pod object stays).
func (k *kubelet) evict(ctx context.Context, name string) error {
	pod, err := env.cli.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	k.kill(pod.UID)
	return k.setStatus(ctx, name, pod.UID, func(s *corev1.PodStatus) {
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		for i := range s.Conditions {
			s.Conditions[i].Status = corev1.ConditionFalse
		}
		s.ContainerStatuses[0].Ready = false
		s.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}
	})
}

// loseNode does what the node lifecycle controller does when a node stops
// reporting: the pod turns not ready and is marked as a disruption target
// (the guest process is killed here; on a real lost node it is unreachable).
func (k *kubelet) loseNode(ctx context.Context, name string) error {
	pod, err := env.cli.CoreV1().Pods(k.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	k.kill(pod.UID)
	return k.setStatus(ctx, name, pod.UID, func(s *corev1.PodStatus) {
		now := metav1.Now()
		for i := range s.Conditions {
			if s.Conditions[i].Type == corev1.PodReady {
				s.Conditions[i].Status, s.Conditions[i].Reason = corev1.ConditionFalse, "NodeLost"
			}
		}
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: now})
	})
}

func (k *kubelet) guestCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.guests)
}
