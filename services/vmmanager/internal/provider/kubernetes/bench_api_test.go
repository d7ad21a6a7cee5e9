package kubernetes

// The API-server benchmarks (BenchmarkAPI*, `make bench-k8s`): what vmmanager
// itself spends per pod event, per lease and per health check of a pool of
// 1,024 pods, against the real kube-apiserver of the tests. This process
// runs vmmanager's side only: the pool (size 1,024, the SQLite store), the
// provider with its informer and client-go, and the guest probes' HTTP
// client. The kubelet's part runs in a child process (this test binary run
// again, benchKubeletMain): it makes each new pod Running and Ready at an
// address of its own (127.200.x.y, 2,048 of them, round robin) where it
// answers the guest probe, and it sends the pod events the event benchmark
// counts. The API server and etcd run in theirs. So this process's CPU time
// (getrusage) is vmmanager's cost; the API server's and the kubelet's are
// reported beside it (from /proc).
//
// Latencies include the API server on a shared machine: a pod event's is
// from the child's PATCH being sent to vmmanager's informer handler waking
// the waiter; a reset's is from Release to the pool's "reset done" (delete
// pod, create pod, the child's status update, watch, guest probe).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// Environment of the child kubelet process.
const (
	envBenchKubelet = "ROLLOUTMESH_BENCH_KUBELET" // the namespace: run as the kubelet
	envBenchKubecfg = "ROLLOUTMESH_BENCH_KUBECONFIG"
	envBenchPort    = "ROLLOUTMESH_BENCH_GUEST_PORT"
	annotationSent  = "rolloutmesh.io/bench-sent" // unix nanoseconds of the PATCH
	benchAddrs      = 2048
	// The rates the benchmarks offer, open loop. A pool of 1,024 desktops
	// with 2-minute episodes and 2-second resets serves ~8.4 leases/s, and a
	// lease makes about 4 pod events (delete, add, status, and the old pod's
	// last update): these are 2-3 times that, so latencies are service times
	// rather than a queue the benchmark itself builds (on a shared machine).
	benchLeaseRate = 20  // leases per second
	benchEventRate = 100 // pod events per second
)

// podSelector selects the pods of one vmmanager's pool.
func podSelector(instance, poolName string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelInstance: instance, LabelPool: poolName})
}

// benchAddr is the child's i-th guest address.
func benchAddr(i int) string {
	i %= benchAddrs
	return fmt.Sprintf("127.200.%d.%d", i/250, i%250+1)
}

// apiBench is the fixture the API benchmarks share: one pool of 1,024 VMs,
// filled once.
var apiBench struct {
	once    sync.Once
	err     error
	ns      string
	prov    *Provider
	pool    *pool.Pool
	hub     *pool.Hub
	kubelet *exec.Cmd
	stdin   io.Writer
	stdout  *bufio.Scanner
	stop    func()
}

func setupAPIBench(b *testing.B) {
	b.Helper()
	needAPIBench(b)
	apiBench.once.Do(func() { apiBench.err = fillAPIBench(b) })
	if apiBench.err != nil {
		b.Fatal(apiBench.err)
	}
}

// needAPIBench is needRealAPI for a benchmark.
func needAPIBench(b *testing.B) {
	b.Helper()
	if env.err != nil || env.fake {
		b.Skipf("needs the real kube-apiserver ($KUBEAPISERVER; make bench-k8s builds it): %v", env.err)
	}
}

func fillAPIBench(b *testing.B) error {
	ctx := context.Background()
	ns := namespace(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	kub := exec.Command(os.Args[0], "-test.run=^$")
	kub.Env = append(os.Environ(), envBenchKubelet+"="+ns, envBenchKubecfg+"="+env.kubeconfig, envBenchPort+"="+strconv.Itoa(port))
	kub.Stderr = os.Stderr
	stdin, _ := kub.StdinPipe()
	stdout, _ := kub.StdoutPipe()
	if err := kub.Start(); err != nil {
		return fmt.Errorf("start the kubelet process: %w", err)
	}
	apiBench.kubelet, apiBench.stdin, apiBench.stdout = kub, stdin, bufio.NewScanner(stdout)
	if line, err := readLine(); err != nil || line != "ready" {
		return fmt.Errorf("kubelet process: %q, %v", line, err)
	}

	c := config.Kubernetes{Namespace: ns, Image: "rolloutmesh/desktop:full", GuestPort: port, QPS: 500, Burst: 1000}
	if err := config.Validate([]config.Pool{{Name: "bench", Provider: config.ProviderKubernetes, Size: 1, Kubernetes: &c}}); err != nil {
		return err
	}
	// The client vmmanager builds, from the API server's kubeconfig.
	cli, _, err := NewClient(env.kubeconfig, c.QPS, c.Burst)
	if err != nil {
		return err
	}
	prov, err := New(ctx, Options{Config: c, Pool: "bench", InstanceID: "bench", Client: cli, Guest: *guestClient()})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "k8s-bench-store-")
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, dir)
	if err != nil {
		return err
	}
	hub := pool.NewHub()
	pl := pool.New(pool.Spec{
		Name: "bench", Provider: config.ProviderKubernetes, Size: benchPods, OSType: "Debian",
		ScreenWidth: 1280, ScreenHeight: 720,
		// No health rounds during the measurements: BenchmarkAPICheck
		// measures one check, which a pool does per VM per interval.
		HealthInterval: 0, BootTimeout: 10 * time.Minute, ResetTimeout: 10 * time.Minute,
	}, pool.Options{Provider: prov, Store: st, Clock: clock.Real{}, Logger: zap.NewNop(), Hub: hub})
	apiBench.ns, apiBench.prov, apiBench.pool, apiBench.hub = ns, prov, pl, hub
	apiBench.stop = func() {
		pl.Close(context.Background(), false)
		prov.Close()
		st.Close()
		os.RemoveAll(dir)
		stdin.Close()
		kub.Process.Kill()
		kub.Wait()
	}
	before := sample()
	start := time.Now()
	pl.Start()
	for pl.Stats().ByState[pool.StateReady] < benchPods {
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("pool of %d not ready after 10m: %v", benchPods, pl.Stats().ByState)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, used := time.Since(start), sample().sub(before)
	fmt.Printf("fill: %d pods created and ready in %.1fs; per pod: vmmanager CPU %s, API server %s, kubelet %s\n",
		benchPods, d.Seconds(), used.self/benchPods, used.api/benchPods, used.kubelet/benchPods)
	return nil
}

func readLine() (string, error) {
	if !apiBench.stdout.Scan() {
		if err := apiBench.stdout.Err(); err != nil {
			return "", err
		}
		return "", io.ErrUnexpectedEOF
	}
	return apiBench.stdout.Text(), nil
}

// cpuUse is CPU time spent by vmmanager (this process), the API server and
// the kubelet process.
type cpuUse struct{ self, api, kubelet time.Duration }

func sample() cpuUse {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	u := cpuUse{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	u.api = procCPU(env.apiPID)
	if apiBench.kubelet != nil {
		u.kubelet = procCPU(apiBench.kubelet.Process.Pid)
	}
	return u
}

func (u cpuUse) sub(v cpuUse) cpuUse {
	return cpuUse{u.self - v.self, u.api - v.api, u.kubelet - v.kubelet}
}

// procCPU is a process's user+system time from /proc/PID/stat (clock ticks
// of 10 ms).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// report adds the percentiles and the CPU per operation of each process.
func report(b *testing.B, lat []time.Duration, unit string, used cpuUse, n int) {
	b.Helper()
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), unit+"-p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), unit+"-p99-µs")
	}
	b.ReportMetric(float64(used.self.Microseconds())/float64(n), "vmmanager-cpu-µs/op")
	b.ReportMetric(float64(used.api.Microseconds())/float64(n), "apiserver-cpu-µs/op")
	b.ReportMetric(float64(used.kubelet.Microseconds())/float64(n), "kubelet-cpu-µs/op")
}

// BenchmarkAPILease: one lease as the coordinator takes it from a pool of
// 1,024 pods, AcquireLease then ReleaseLease with reset, started at
// benchLeaseRate per second; the op is the lease and its reset to a new
// pod, so the CPU per op includes the reset's delete, create, watch events
// and guest probe. Reports the acquire's and the reset's (release → "reset
// done") percentiles; ns/op is only the offered rate.
func BenchmarkAPILease(b *testing.B) {
	setupAPIBench(b)
	pl := apiBench.pool
	sub := apiBench.hub.Subscribe(4*b.N + 4*benchPods)
	defer sub.Cancel()
	var mu sync.Mutex
	released := map[string]time.Time{}
	var resets, acquires []time.Duration
	resetsDone := make(chan struct{}, b.N)
	go func() {
		for e := range sub.C {
			if e.Reason != "reset done" {
				continue
			}
			mu.Lock()
			if t, ok := released[e.VM.ID]; ok {
				resets = append(resets, e.Time.Sub(t))
				delete(released, e.VM.ID)
				resetsDone <- struct{}{}
			}
			mu.Unlock()
		}
	}()
	ctx := context.Background()
	errs := make(chan error, b.N)
	tick := time.NewTicker(time.Second / benchLeaseRate)
	defer tick.Stop()
	before := sample()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		go func() {
			start := time.Now()
			g, err := pl.Acquire(ctx, pool.AcquireRequest{Holder: "bench-" + strconv.Itoa(i), TTL: 10 * time.Minute, Wait: 10 * time.Minute})
			if err != nil {
				errs <- fmt.Errorf("Acquire: %w", err)
				return
			}
			mu.Lock()
			acquires = append(acquires, time.Since(start))
			released[g.Lease.VMID] = time.Now()
			mu.Unlock()
			if err := pl.Release(g.Lease.ID, g.Token, true); err != nil {
				errs <- fmt.Errorf("Release: %w", err)
			}
		}()
	}
	timeout := time.After(10 * time.Minute)
	for range b.N {
		select {
		case <-resetsDone:
		case err := <-errs:
			b.Fatal(err)
		case <-timeout:
			b.Fatalf("resets not done after 10m: %v", pl.Stats().ByState)
		}
	}
	b.StopTimer()
	used := sample().sub(before)
	if s := pl.Stats(); s.ByState[pool.StateReady] != benchPods {
		b.Fatalf("after the leases: %v, want %d ready", s.ByState, benchPods)
	}
	mu.Lock()
	defer mu.Unlock()
	report(b, acquires, "acquire", used, b.N)
	sort.Slice(resets, func(i, j int) bool { return resets[i] < resets[j] })
	b.ReportMetric(float64(resets[len(resets)/2].Microseconds()), "reset-p50-µs")
	b.ReportMetric(float64(resets[len(resets)*99/100].Microseconds()), "reset-p99-µs")
}

// BenchmarkAPIPodEvent: one pod event (a metadata change of one of the
// 1,024 pods, sent by the kubelet process at benchEventRate per second)
// through the API server's watch to vmmanager's informer and its handler
// waking the pod's waiter. The CPU
// per op is vmmanager's for one event: the watch's decoding, the informer's
// cache update and handler, and the waiting goroutine this benchmark keeps
// per pod.
func BenchmarkAPIPodEvent(b *testing.B) {
	setupAPIBench(b)
	p := apiBench.prov
	pods, err := p.pods.List(podSelector("bench", "bench"))
	if err != nil || len(pods) != benchPods {
		b.Fatalf("%d pods in the cache (%v), want %d", len(pods), err, benchPods)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	var seen atomic.Int64
	all := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ready sync.WaitGroup
	for _, pod := range pods {
		ready.Add(1)
		go func(name string) {
			ch := p.changed(name)
			ready.Done()
			for {
				select {
				case <-ch:
				case <-ctx.Done():
					return
				}
				ch = p.changed(name)
				cur, err := p.pods.Get(name)
				if err != nil {
					continue
				}
				ns, err := strconv.ParseInt(cur.Annotations[annotationSent], 10, 64)
				if err != nil {
					continue
				}
				d := time.Since(time.Unix(0, ns))
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				if seen.Add(1) == int64(b.N) {
					close(all)
				}
			}
		}(pod.Name)
	}
	ready.Wait()
	before := sample()
	b.ResetTimer()
	fmt.Fprintf(apiBench.stdin, "touch %d %d\n", b.N, benchEventRate)
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d events seen after 10m", seen.Load(), b.N)
	}
	b.StopTimer()
	used := sample().sub(before)
	if line, err := readLine(); err != nil || line != "done" {
		b.Fatalf("kubelet process: %q, %v", line, err)
	}
	mu.Lock()
	defer mu.Unlock()
	report(b, lat, "event", used, b.N)
}

// BenchmarkAPICheck: one health check of a VM of the pool (Check: the pod
// from the informer's cache, then the guest's HTTP probe at the pod's
// address), round robin over the 1,024 VMs, 16 at once. A pool checks each
// idle VM once per health_interval.
func BenchmarkAPICheck(b *testing.B) {
	setupAPIBench(b)
	vms := apiBench.pool.VMs()
	ctx := context.Background()
	var next atomic.Int64
	lat := make([][]time.Duration, 16)
	before := sample()
	b.ResetTimer()
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				v := vms[int(i)%len(vms)]
				start := time.Now()
				if err := apiBench.prov.Check(ctx, pool.Instance{Ref: v.Ref, Endpoint: v.Endpoint}); err != nil {
					failed.Store(&err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	used := sample().sub(before)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	report(b, all, "check", used, b.N)
}

// benchKubeletMain is the child process of the API benchmarks: the kubelet
// of namespace $ROLLOUTMESH_BENCH_KUBELET. It answers every guest probe on
// its 2,048 addresses, makes every new pod Running and Ready at the next
// address, and on "touch N RATE" on stdin patches N pods (round robin, RATE
// per second) with their send time, then prints "done".
func benchKubeletMain() int {
	ns := os.Getenv(envBenchKubelet)
	port := os.Getenv(envBenchPort)
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv(envBenchKubecfg))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench kubelet:", err)
		return 1
	}
	rc.QPS, rc.Burst = 1000, 2000
	cli := clientset.NewForConfigOrDie(rc)
	guest := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	for i := range benchAddrs {
		l, err := net.Listen("tcp", net.JoinHostPort(benchAddr(i), port))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench kubelet:", err)
			return 1
		}
		go guest.Serve(l)
	}
	ctx := context.Background()
	var nextAddr atomic.Int64
	work := make(chan *corev1.Pod, 4096)
	f := informers.NewSharedInformerFactoryWithOptions(cli, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods()
	inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if pod := obj.(*corev1.Pod); pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
			work <- pod
		}
	}})
	for range 16 {
		go func() {
			for pod := range work {
				ip := benchAddr(int(nextAddr.Add(1)))
				if err := benchSetReady(ctx, cli, pod, ip); err != nil && !apierrors.IsNotFound(err) {
					fmt.Fprintln(os.Stderr, "bench kubelet: status of", pod.Name+":", err)
				}
			}
		}()
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var n, rate int
		if _, err := fmt.Sscanf(sc.Text(), "touch %d %d", &n, &rate); err != nil || rate <= 0 {
			fmt.Fprintln(os.Stderr, "bench kubelet: bad command", sc.Text())
			return 1
		}
		pods, _ := inf.Lister().Pods(ns).List(podSelector("bench", "bench"))
		sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
		tick := time.NewTicker(time.Second / time.Duration(rate))
		var wg sync.WaitGroup
		for i := range n {
			<-tick.C
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, annotationSent, time.Now().UnixNano())
				if _, err := cli.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					fmt.Fprintln(os.Stderr, "bench kubelet: patch", name+":", err)
				}
			}(pods[i%len(pods)].Name)
		}
		tick.Stop()
		wg.Wait()
		fmt.Println("done")
	}
	return 0
}

// benchSetReady makes a pod Running and Ready at ip.
func benchSetReady(ctx context.Context, cli clientset.Interface, pod *corev1.Pod, ip string) error {
	pod = pod.DeepCopy()
	for {
		now := metav1.Now()
		pod.Status = corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "127.0.0.1", PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, Image: pod.Spec.Containers[0].Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
		}
		_, err := cli.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return err
		}
		cur, err := cli.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return errors.New("replaced")
		}
		pod = cur
	}
}
