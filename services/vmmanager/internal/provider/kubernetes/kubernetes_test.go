package kubernetes

// What runs for real in the API-server tests (TestAPI*): kube-apiserver
// v1.37.2 (k8s.io/kubernetes linked into tools/kubeapiserver) on an
// embedded etcd v3.7, both on loopback; client-go's informers, watches and
// requests; the provider and, where a test says so, vmmanager's pool and its
// SQLite store; desktopd processes as the guests, probed over HTTP at the
// pods' IPs. What is played by the test: the kubelet (a goroutine in
// harness_test.go watches the pods, starts a desktopd per pod on its own
// 127.x.y.z address and sets the pod's status — Running, Ready, podIP —
// through the status subresource), the scheduler (pods are never bound to a
// node, so a delete is immediate instead of graceful), eviction by the
// kubelet (phase Failed, reason Evicted, written by the test) and the node
// lifecycle controller (a DisruptionTarget condition, written by the test);
// API errors (409, 429, 500) and dropped watches are injected by a reverse
// proxy between the provider and the API server. Authorization is RBAC: the
// tests act as an administrator (system:masters), except TestAPIRole, which
// acts as the ServiceAccount of deploy/k8s bound to exactly its Role. The
// garbage collector does not run, so the owner reference (to a Deployment,
// or to the StatefulSet deploy/k8s names, in TestAPIRole) is checked on the
// pods, not by deleting its owner. A vmmanager restart is in-process: the pool is closed
// keeping its VMs, a new provider and pool restore from the same store.
//
// Without the kubeapiserver binary ($KUBEAPISERVER or on $PATH) these tests
// skip, and fail under CI. With KUBE_FAKE=1 and no binary they run on
// client-go's fake clientset instead (an object tracker: no API semantics,
// no HTTP, watches not filtered by label), except TestAPIErrors and
// TestAPIWatchDrop, which need the proxy in front of a real server; that
// mode is for a quick check on a developer machine and counts for nothing
// under CI.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// testConfig is a validated kubernetes section for a pool named "desk".
func testConfig(t *testing.T, ns string, port int, edit func(*config.Kubernetes)) config.Kubernetes {
	t.Helper()
	c := config.Kubernetes{Namespace: ns, Image: "rolloutmesh/desktop:full", GuestPort: port}
	if edit != nil {
		edit(&c)
	}
	p := config.Pool{Name: "desk", Provider: config.ProviderKubernetes, Size: 1, Kubernetes: &c}
	if err := config.Validate([]config.Pool{p}); err != nil {
		t.Fatalf("config: %v", err)
	}
	return c
}

// setup is one test's namespace, kubelet, proxy and provider.
type setup struct {
	ns    string
	port  int
	kube  *kubelet
	proxy *faultProxy
	cfg   config.Kubernetes
	log   *zap.Logger
}

func newSetup(t *testing.T, edit func(*config.Kubernetes)) *setup {
	t.Helper()
	needAPI(t)
	s := &setup{ns: namespace(t), port: proctest.FreePort(t), log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	s.kube = startKubelet(t, s.ns, s.port)
	s.proxy = newFaultProxy(t)
	s.cfg = testConfig(t, s.ns, s.port, edit)
	return s
}

func (s *setup) provider(t *testing.T, ctx context.Context, poolName, instance string, pools ...string) *Provider {
	t.Helper()
	return s.providerWith(t, ctx, s.proxy.client(), poolName, instance, pools...)
}

// providerWith is provider with another client (another user's).
func (s *setup) providerWith(t *testing.T, ctx context.Context, cli clientset.Interface, poolName, instance string, pools ...string) *Provider {
	t.Helper()
	p, err := New(ctx, Options{
		Config: s.cfg, Pool: poolName, InstanceID: instance, Pools: pools, ScreenWidth: 1280, ScreenHeight: 720,
		Logger: s.log, Client: cli, Guest: *guestClient(),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func (s *setup) pods(t *testing.T, selector string) []corev1.Pod {
	t.Helper()
	l, err := env.cli.CoreV1().Pods(s.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not after %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAPICreateReadyResetDestroy: Create waits for the pod and its guest,
// the endpoint is the pod IP, a reset replaces the pod, Destroy deletes it,
// and the pod carries the template, labels and owner reference.
func TestAPICreateReadyResetDestroy(t *testing.T) {
	s := newSetup(t, func(c *config.Kubernetes) {
		c.Owner = "deployment/vmmanager"
		c.Resources.Requests = map[string]string{"cpu": "1"}
		c.NodeSelector = map[string]string{"rolloutmesh.io/desktops": "true"}
		c.Tolerations = []config.Toleration{{Key: "desktops", Operator: "Exists", Effect: "NoSchedule"}}
		c.Ports = map[string]int{"chrome": 9222}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "vmmanager", Namespace: s.ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vmmanager"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "vmmanager"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "vmmanager", Image: "rolloutmesh/vmmanager:dev"}}},
			},
		},
	}
	dep, err := env.cli.AppsV1().Deployments(s.ns).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := s.provider(t, ctx, "desk", "inst1")

	inst, err := p.Create(ctx, "desk-00000001")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	pod, err := env.cli.CoreV1().Pods(s.ns).Get(ctx, inst.Ref, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(s.port)); inst.Endpoint != want {
		t.Errorf("endpoint = %q, want %q (the pod IP)", inst.Endpoint, want)
	}
	if got, want := inst.Ports["chrome"], net.JoinHostPort(pod.Status.PodIP, "9222"); got != want {
		t.Errorf("ports[chrome] = %q, want %q", got, want)
	}
	for k, want := range map[string]string{LabelInstance: "inst1", LabelPool: "desk", LabelVM: "desk-00000001"} {
		if got := pod.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != dep.UID || pod.OwnerReferences[0].Kind != "Deployment" {
		t.Errorf("owner references = %+v, want the Deployment %s", pod.OwnerReferences, dep.UID)
	}
	c := pod.Spec.Containers[0]
	if got := c.Resources.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("cpu request = %s, want 1", got.String())
	}
	// The API server's DefaultTolerationSeconds admission adds two of its own.
	tolerated := false
	for _, tol := range pod.Spec.Tolerations {
		tolerated = tolerated || (tol.Key == "desktops" && tol.Operator == corev1.TolerationOpExists && tol.Effect == corev1.TaintEffectNoSchedule)
	}
	if pod.Spec.NodeSelector["rolloutmesh.io/desktops"] != "true" || !tolerated {
		t.Errorf("placement = %v %v, want the node selector and toleration", pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	if err := p.Check(ctx, inst); err != nil {
		t.Errorf("Check of a fresh VM: %v", err)
	}
	// The endpoint is the guest: desktopd answers a command.
	if out, err := guestClient().Execute(ctx, inst.Endpoint, "", []string{"echo", "hello"}); err != nil || strings.TrimSpace(out) != "hello" {
		t.Errorf("execute in guest = %q, %v", out, err)
	}

	reset, err := p.Reset(ctx, "desk-00000001", inst)
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if reset.Ref == inst.Ref || reset.Data[dataUID] == inst.Data[dataUID] {
		t.Errorf("reset kept pod %s; want a new pod", inst.Ref)
	}
	if _, err := env.cli.CoreV1().Pods(s.ns).Get(ctx, inst.Ref, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("old pod after reset: err = %v, want NotFound", err)
	}
	if err := p.Check(ctx, inst); err == nil {
		t.Error("Check of the replaced pod succeeded, want an error")
	}
	if err := p.Check(ctx, reset); err != nil {
		t.Errorf("Check after reset: %v", err)
	}
	if err := p.Destroy(ctx, "desk-00000001", reset); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if pods := s.pods(t, LabelPool+"=desk"); len(pods) != 0 {
		t.Errorf("%d pods left after Destroy, want 0", len(pods))
	}
	eventually(t, 10*time.Second, "guest processes stopped", func() error {
		if n := s.kube.guestCount(); n != 0 {
			return errors.New(strconv.Itoa(n) + " running")
		}
		return nil
	})
}

// TestAPIInGuestReset: with reset_command the pod is kept and the command
// runs in the guest.
func TestAPIInGuestReset(t *testing.T) {
	s := newSetup(t, func(c *config.Kubernetes) {
		c.ResetCommand = []string{"sh", "-c", "touch $HOME/reset-ran"}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s.provider(t, ctx, "desk", "inst1")
	inst, err := p.Create(ctx, "desk-00000002")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := p.Reset(ctx, "desk-00000002", inst)
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if got.Ref != inst.Ref {
		t.Errorf("in-guest reset replaced pod %s with %s", inst.Ref, got.Ref)
	}
	if _, err := guestClient().Execute(ctx, inst.Endpoint, "", []string{"sh", "-c", "test -e $HOME/reset-ran"}); err != nil {
		t.Errorf("reset command did not run in the guest: %v", err)
	}
}

// TestAPINeverReady: a pod that never becomes ready fails Create when the
// boot timeout ends, with the pod's state in the error, and is deleted.
func TestAPINeverReady(t *testing.T) {
	s := newSetup(t, nil)
	s.kube.setBehave(func(*corev1.Pod) behaviour { return neverReady })
	ctx := context.Background()
	p := s.provider(t, ctx, "desk", "inst1")
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := p.Create(cctx, "desk-00000003")
	if err == nil || !strings.Contains(err.Error(), "not ready") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create = %v, want a not-ready timeout", err)
	}
	if pods := s.pods(t, LabelVM+"=desk-00000003"); len(pods) != 0 {
		t.Errorf("%d pods left after a failed Create, want 0", len(pods))
	}
}

// TestAPIBrokenPodEndsWaitAtOnce: a pod that fails while Create waits ends
// the wait at once instead of at the boot timeout.
func TestAPIBrokenPodEndsWaitAtOnce(t *testing.T) {
	s := newSetup(t, nil)
	s.kube.setBehave(func(*corev1.Pod) behaviour { return neverReady })
	ctx := context.Background()
	p := s.provider(t, ctx, "desk", "inst1")
	go func() {
		for {
			pods := s.pods(t, LabelVM+"=desk-00000004")
			if len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
				s.kube.evict(ctx, pods[0].Name)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	_, err := p.Create(cctx, "desk-00000004")
	if err == nil || !strings.Contains(err.Error(), "evicted") {
		t.Fatalf("Create = %v, want the eviction", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Create took %v to notice the eviction", d)
	}
}

// TestAPIPodLost: Check fails as soon as the watch reports a pod evicted by
// the kubelet, evicted through the Eviction API, or on a lost node.
func TestAPIPodLost(t *testing.T) {
	s := newSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := s.provider(t, ctx, "desk", "inst1")
	cases := []struct {
		name string
		do   func(pod string) error
		want string
	}{
		{"kubelet eviction", func(pod string) error { return s.kube.evict(ctx, pod) }, "evicted"},
		{"eviction API", func(pod string) error {
			if env.fake {
				// The fake has no Eviction API; an eviction of an unbound pod
				// deletes it at once.
				return env.cli.CoreV1().Pods(s.ns).Delete(ctx, pod, metav1.DeleteOptions{})
			}
			return env.cli.CoreV1().Pods(s.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: s.ns}})
		}, "gone|disrupted|being deleted"},
		{"node lost", func(pod string) error { return s.kube.loseNode(ctx, pod) }, "disrupted"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "desk-0000001" + strconv.Itoa(i)
			inst, err := p.Create(ctx, id)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if err := tc.do(inst.Ref); err != nil {
				t.Fatal(err)
			}
			// The guest dies first; Check must then also name the pod's
			// state, which only the watch tells.
			eventually(t, 10*time.Second, "Check reports "+tc.want, func() error {
				got := p.Check(ctx, inst)
				if got == nil {
					return errors.New("Check passes")
				}
				if !containsAny(got.Error(), strings.Split(tc.want, "|")) {
					return got
				}
				return nil
			})
			if err := p.Destroy(ctx, id, inst); err != nil {
				t.Errorf("Destroy: %v", err)
			}
		})
	}
}

// TestAPIErrors: creations go through 429s (with and without Retry-After),
// 500s and a 409 for a create whose answer was lost, without leaving a
// second pod.
func TestAPIErrors(t *testing.T) {
	needRealAPI(t)
	s := newSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s.provider(t, ctx, "desk", "inst1")
	cases := []struct {
		name   string
		faults []fault
		posts  int64 // pod creations the API server must have seen through the proxy
	}{
		{"429 without Retry-After", []fault{{method: "POST", suffix: "/pods", code: 429, reason: metav1.StatusReasonTooManyRequests, n: 3}}, 4},
		{"429 with Retry-After", []fault{{method: "POST", suffix: "/pods", code: 429, reason: metav1.StatusReasonTooManyRequests, retryAfter: 1, n: 2}}, 3},
		{"500", []fault{{method: "POST", suffix: "/pods", code: 500, reason: metav1.StatusReasonInternalError, n: 2}}, 3},
		{"409 after the create happened", []fault{{method: "POST", suffix: "/pods", code: 409, reason: metav1.StatusReasonAlreadyExists, forward: true, n: 1}}, 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "desk-0000002" + strconv.Itoa(i)
			before := s.proxy.count("POST pods")
			for _, f := range tc.faults {
				s.proxy.add(f)
			}
			inst, err := p.Create(ctx, id)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if got := s.proxy.count("POST pods") - before; got != tc.posts {
				t.Errorf("pod creations sent = %d, want %d", got, tc.posts)
			}
			if pods := s.pods(t, LabelVM+"="+id); len(pods) != 1 || pods[0].Name != inst.Ref {
				t.Errorf("pods of %s = %d, want exactly %s", id, len(pods), inst.Ref)
			}
			if err := p.Check(ctx, inst); err != nil {
				t.Errorf("Check: %v", err)
			}
			if err := p.Destroy(ctx, id, inst); err != nil {
				t.Errorf("Destroy: %v", err)
			}
		})
	}
	// A 4xx other than 409/429 is not retried.
	s.proxy.add(fault{method: "POST", suffix: "/pods", code: 403, reason: metav1.StatusReasonForbidden, n: 1})
	before := s.proxy.count("POST pods")
	if _, err := p.Create(ctx, "desk-00000029"); !apierrors.IsForbidden(err) {
		t.Errorf("Create with 403 = %v, want Forbidden", err)
	}
	if got := s.proxy.count("POST pods") - before; got != 1 {
		t.Errorf("403 was sent %d times, want 1", got)
	}
}

// TestAPIWatchDrop: after every watch is cut, the informer watches again
// and the provider still sees a pod go away.
func TestAPIWatchDrop(t *testing.T) {
	needRealAPI(t)
	s := newSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s.provider(t, ctx, "desk", "inst1")
	inst, err := p.Create(ctx, "desk-00000030")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	watches := s.proxy.count("WATCH pods")
	if n := s.proxy.dropWatches(); n == 0 {
		t.Fatal("no watch was open to drop")
	}
	eventually(t, 30*time.Second, "a new watch", func() error {
		if s.proxy.count("WATCH pods") <= watches {
			return errors.New("no new watch request")
		}
		return nil
	})
	if err := s.kube.evict(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Check fails after the eviction", func() error {
		if p.Check(ctx, inst) == nil {
			return errors.New("Check passes")
		}
		return nil
	})
	// And a new pod is still seen becoming ready.
	if _, err := p.Create(ctx, "desk-00000031"); err != nil {
		t.Fatalf("Create after the drop: %v", err)
	}
}

// newPool builds a real pool over the provider and a store in dir.
func newPool(t *testing.T, st *store.Store, prov pool.Provider, size, spares int, log *zap.Logger) *pool.Pool {
	t.Helper()
	return newPoolHub(t, st, prov, size, spares, log, pool.NewHub())
}

// newPoolHub is newPool publishing the VMs' state changes on hub.
func newPoolHub(t *testing.T, st *store.Store, prov pool.Provider, size, spares int, log *zap.Logger, hub *pool.Hub) *pool.Pool {
	t.Helper()
	return pool.New(pool.Spec{
		Name: "desk", Provider: config.ProviderKubernetes, Size: size, WarmSpares: spares, OSType: "Debian",
		ScreenWidth: 1280, ScreenHeight: 720, HealthInterval: time.Second,
		BootTimeout: time.Minute, ResetTimeout: time.Minute,
	}, pool.Options{Provider: prov, Store: st, Clock: clock.Real{}, Logger: log, Hub: hub})
}

func waitReady(t *testing.T, p *pool.Pool, n int) {
	t.Helper()
	eventually(t, 90*time.Second, "pool ready", func() error {
		if got := p.Stats().ByState[pool.StateReady]; got < n {
			return errors.New(strconv.Itoa(got) + " ready")
		}
		return nil
	})
}

// TestAPIPoolLeaseEvictionRestart drives vmmanager's pool: lease a VM, use
// its guest, release it (the pod is replaced), lose the leased VM's pod to
// an eviction (the holder's release brings a new pod), then restart: a new
// provider and pool adopt the pods and the live lease, and Sweep deletes a
// stray pod and the pods of a pool no longer configured, but not another
// vmmanager's.
func TestAPIPoolLeaseEvictionRestart(t *testing.T) {
	s := newSetup(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prov := s.provider(t, ctx, "desk", "inst1", "desk")
	pl := newPool(t, st, prov, 2, 0, s.log)
	pl.Start()
	waitReady(t, pl, 2)
	if n := len(s.pods(t, LabelPool+"=desk")); n != 2 {
		t.Fatalf("%d pods for a pool of 2, want 2", n)
	}

	// Lease, use, release with reset: the pod is replaced.
	g, err := pl.Acquire(ctx, pool.AcquireRequest{Holder: "h1", TTL: time.Minute, Wait: time.Minute})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := guestClient().Execute(ctx, g.Lease.Endpoint, "", []string{"true"}); err != nil {
		t.Fatalf("leased guest: %v", err)
	}
	first := podOf(t, s, g.Lease.VMID)
	if err := pl.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	eventually(t, 90*time.Second, "reset to a new pod", func() error {
		if pl.Stats().ByState[pool.StateReady] < 2 {
			return errors.New("not ready")
		}
		if podOf(t, s, g.Lease.VMID) == first {
			return errors.New("same pod")
		}
		return nil
	})

	// Eviction mid-lease: the guest is gone, the holder releases, the VM
	// comes back on a new pod.
	g, err = pl.Acquire(ctx, pool.AcquireRequest{Holder: "h2", TTL: time.Minute, Wait: time.Minute})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	evicted := podOf(t, s, g.Lease.VMID)
	if err := s.kube.evict(ctx, evicted); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "guest unreachable", func() error {
		if guestClient().Probe(ctx, g.Lease.Endpoint, "/healthz", "") == nil {
			return errors.New("still answers")
		}
		return nil
	})
	if err := pl.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	eventually(t, 90*time.Second, "evicted VM replaced", func() error {
		if pl.Stats().ByState[pool.StateReady] < 2 {
			return errors.New("not ready")
		}
		if podOf(t, s, g.Lease.VMID) == evicted {
			return errors.New("same pod")
		}
		return nil
	})

	// A lease that must survive the restart.
	g, err = pl.Acquire(ctx, pool.AcquireRequest{Holder: "h3", TTL: 5 * time.Minute, Wait: time.Minute})
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	leasedPod := podOf(t, s, g.Lease.VMID)
	if err := pl.Close(ctx, true); err != nil {
		t.Fatalf("Close keeping VMs: %v", err)
	}
	prov.Close()

	// While vmmanager is down: a stray of this pool, a pod of a removed
	// pool, and another vmmanager's pod.
	stray := func(name, instance, poolName, vm string) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelInstance: instance, LabelPool: poolName, LabelVM: vm}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "rolloutmesh/desktop:full"}}},
		}
		if _, err := env.cli.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.kube.setBehave(func(*corev1.Pod) behaviour { return neverReady })
	stray("stray", "inst1", "desk", "desk-deadbeef")
	stray("removed-pool", "inst1", "old", "old-deadbeef")
	stray("other-vmmanager", "inst2", "desk", "desk-deadbeef")
	s.kube.setBehave(nil)

	prov2 := s.provider(t, ctx, "desk", "inst1", "desk")
	pl2 := newPool(t, st, prov2, 2, 0, s.log)
	vms, err := st.VMs(ctx, "desk")
	if err != nil {
		t.Fatal(err)
	}
	leases, err := st.Leases(ctx, "desk")
	if err != nil {
		t.Fatal(err)
	}
	if err := pl2.Restore(ctx, vms, leases); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	pl2.Start()
	defer pl2.Close(context.Background(), false)
	if _, err := pl2.Renew(g.Lease.ID, g.Token, time.Minute); err != nil {
		t.Errorf("renew of the lease after the restart: %v", err)
	}
	if got := podOf(t, s, g.Lease.VMID); got != leasedPod {
		t.Errorf("leased VM on pod %s after the restart, want the adopted %s", got, leasedPod)
	}
	if _, err := guestClient().Execute(ctx, g.Lease.Endpoint, "", []string{"true"}); err != nil {
		t.Errorf("leased guest after the restart: %v", err)
	}
	var names []string
	for _, p := range s.pods(t, "") {
		names = append(names, p.Name)
	}
	for _, gone := range []string{"stray", "removed-pool"} {
		for _, n := range names {
			if n == gone {
				t.Errorf("pod %s survived the sweep", gone)
			}
		}
	}
	found := false
	for _, n := range names {
		found = found || n == "other-vmmanager"
	}
	if !found {
		t.Error("the sweep deleted another vmmanager's pod")
	}
	if n := len(s.pods(t, LabelInstance+"=inst1")); n != 2 {
		t.Errorf("%d pods of this vmmanager after the restart, want 2", n)
	}

	// Closing without keep deletes every pod.
	if err := pl2.Close(ctx, false); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(s.pods(t, LabelInstance+"=inst1")); n != 0 {
		t.Errorf("%d pods left after Close, want 0", n)
	}
}

// podOf is the name of VM id's one pod.
func podOf(t *testing.T, s *setup, id string) string {
	t.Helper()
	var live []string
	for _, p := range s.pods(t, LabelVM+"="+id) {
		if p.DeletionTimestamp == nil {
			live = append(live, p.Name)
		}
	}
	if len(live) != 1 {
		return strings.Join(live, ",")
	}
	return live[0]
}

// TestAPIBoundedCreation: with create_concurrency 2, no more than 2 pods of
// the pool are waiting to become ready at once.
func TestAPIBoundedCreation(t *testing.T) {
	s := newSetup(t, func(c *config.Kubernetes) { c.CreateConcurrency = 2 })
	s.kube.setBehave(func(*corev1.Pod) behaviour { return neverReady })
	ctx := context.Background()
	p := s.provider(t, ctx, "desk", "inst1")
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			_, err := p.Create(cctx, "desk-0000004"+strconv.Itoa(i))
			errs <- err
		}()
	}
	max := 0
	for range 20 {
		max = maxInt(max, len(s.pods(t, LabelPool+"=desk")))
		time.Sleep(100 * time.Millisecond)
	}
	for range 6 {
		<-errs
	}
	if max != 2 {
		t.Errorf("at most %d pods at once, want 2", max)
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func guestClient() *guest.Client {
	return &guest.Client{HTTP: &http.Client{Timeout: 10 * time.Second}}
}
