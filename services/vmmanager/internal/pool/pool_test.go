package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// memProvider is an in-memory provider: the pool logic under test is real,
// the VMs are not. Reset takes resetDelay and can be made to fail.
type memProvider struct {
	mu         sync.Mutex
	live       map[string]bool
	created    int
	destroyed  int
	resets     int
	resetDelay time.Duration
	failReset  map[string]bool
	failCheck  map[string]bool
	resetGate  chan struct{} // when set, Reset waits for a value
	failCreate error         // when set, every Create fails with it
	// resetHold, when set, holds Reset until it is closed, deaf to the
	// context (as a provider call already under way in the engine), and
	// the reset then makes a new instance: a new Ref, as docker's does.
	resetHold     chan struct{}
	destroyedRefs []string
}

func newMem() *memProvider {
	return &memProvider{live: map[string]bool{}, failReset: map[string]bool{}, failCheck: map[string]bool{}}
}

func (m *memProvider) Create(ctx context.Context, id string) (Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failCreate != nil {
		return Instance{}, m.failCreate
	}
	m.created++
	m.live[id] = true
	return Instance{Ref: "mem-" + id, Endpoint: "http://" + id, Data: map[string]string{}}, nil
}

func (m *memProvider) Reset(ctx context.Context, id string, inst Instance) (Instance, error) {
	m.mu.Lock()
	gate, d, fail, hold := m.resetGate, m.resetDelay, m.failReset[id], m.resetHold
	m.mu.Unlock()
	if hold != nil {
		<-hold
		m.mu.Lock()
		defer m.mu.Unlock()
		m.resets++
		inst.Ref = fmt.Sprintf("mem-%s-r%d", id, m.resets)
		return inst, nil
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return inst, ctx.Err()
		}
	}
	if d > 0 {
		time.Sleep(d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resets++
	if fail {
		return inst, errors.New("disk on fire")
	}
	return inst, nil
}

func (m *memProvider) Destroy(ctx context.Context, id string, inst Instance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.destroyed++
	m.destroyedRefs = append(m.destroyedRefs, inst.Ref)
	delete(m.live, id)
	return nil
}

func (m *memProvider) Check(ctx context.Context, inst Instance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failCheck[inst.Endpoint[len("http://"):]] {
		return errors.New("no answer")
	}
	return nil
}

func (m *memProvider) Adopt(ctx context.Context, id string, inst Instance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.live[id] {
		return errors.New("gone")
	}
	return nil
}

func (m *memProvider) Sweep(ctx context.Context, known map[string]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.live {
		if !known[id] {
			delete(m.live, id)
			m.destroyed++
		}
	}
	return nil
}

func (m *memProvider) liveCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

type fixture struct {
	p     *Pool
	prov  *memProvider
	clk   *clock.Fake
	st    *store.Store
	reg   *prometheus.Registry
	m     *Metrics
	spec  Spec
	dir   string
	t     *testing.T
	close bool
	// wrap, when set, stands between the pool and the store.
	wrap func(Store) Store
	hub  *Hub
}

func newFixture(t *testing.T, size, spares int) *fixture {
	t.Helper()
	return newFixtureWrapped(t, size, spares, nil)
}

func newFixtureWrapped(t *testing.T, size, spares int, wrap func(Store) Store) *fixture {
	t.Helper()
	f := &fixture{prov: newMem(), clk: clock.NewFake(time.Unix(1_700_000_000, 0)), dir: t.TempDir(), t: t, wrap: wrap}
	f.spec = Spec{Name: "p", Provider: "mem", Size: size, WarmSpares: spares, ResetTimeout: 5 * time.Second,
		BootTimeout: 5 * time.Second, HealthInterval: time.Minute, ClientPassword: "pw", ScreenWidth: 1280, ScreenHeight: 720}
	f.open()
	f.p.Start()
	f.waitReady(size + spares)
	t.Cleanup(func() {
		if !f.close {
			f.p.Close(context.Background(), false)
		}
		f.st.Close()
	})
	return f
}

func (f *fixture) open() {
	st, err := store.Open(context.Background(), f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.st = st
	f.reg = prometheus.NewRegistry()
	m, err := NewMetrics(f.reg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.m = m
	f.hub = NewHub()
	var ps Store = st
	if f.wrap != nil {
		ps = f.wrap(st)
	}
	f.p = New(f.spec, Options{Provider: f.prov, Store: ps, Clock: f.clk, Logger: zaptest.NewLogger(f.t), Metrics: m, Hub: f.hub})
}

// restart simulates a crash: it drops the pool without closing it and
// opens a new one restored from the store.
func (f *fixture) restart() {
	f.t.Helper()
	f.p.Close(context.Background(), true)
	f.st.Close()
	f.open()
	vms, err := f.st.VMs(context.Background(), "p")
	if err != nil {
		f.t.Fatal(err)
	}
	leases, err := f.st.Leases(context.Background(), "p")
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.p.Restore(context.Background(), vms, leases); err != nil {
		f.t.Fatal(err)
	}
}

// waitFor polls cond for up to 5s: background resets run on real goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fixture) waitReady(n int) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d ready VMs", n), func() bool { return f.p.Stats().ByState[StateReady] == n })
}

func (f *fixture) acquire(wait time.Duration) (Grant, error) {
	return f.p.Acquire(context.Background(), AcquireRequest{Holder: "h", TTL: time.Minute, Wait: wait})
}

// waiter starts an acquirer that waits up to 5 s and returns once it is
// queued; its grant arrives on the channel.
func (f *fixture) waiter() <-chan Grant {
	f.t.Helper()
	got := make(chan Grant, 1)
	go func() {
		g, err := f.acquire(5 * time.Second)
		if err != nil {
			f.t.Error(err)
		}
		got <- g
	}()
	waitFor(f.t, "one waiter", func() bool { return f.p.Stats().Waiters == 1 })
	return got
}

func TestAcquireReleaseReset(t *testing.T) {
	f := newFixture(t, 2, 0)
	g1, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	if g1.Lease.VMID == g2.Lease.VMID {
		t.Fatalf("two leases on vm %s", g1.Lease.VMID)
	}
	if g1.Token == "" || g1.ClientPassword != "pw" || g1.Lease.ScreenWidth != 1280 {
		t.Errorf("grant = %+v, want token, password pw and screen 1280", g1)
	}
	if _, err := f.acquire(0); !errors.Is(err, ErrNoVM) {
		t.Fatalf("third acquire without wait: got %v, want ErrNoVM", err)
	}
	start := time.Now()
	if _, err := f.acquire(50 * time.Millisecond); !errors.Is(err, ErrNoVM) {
		t.Fatalf("third acquire with wait: got %v, want ErrNoVM", err)
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("wait returned after %v, want >= 50ms", el)
	}
	if got := len(f.p.Leases("")); got != 2 {
		t.Errorf("Leases() has %d, want 2", got)
	}
	// A blocked acquirer gets the released VM once it is reset.
	done := f.waiter()
	if err := f.p.Release(g1.Lease.ID, g1.Token, true); err != nil {
		t.Fatal(err)
	}
	g3 := <-done
	if g3.Lease.VMID != g1.Lease.VMID {
		t.Errorf("waiter got vm %s, want the released %s", g3.Lease.VMID, g1.Lease.VMID)
	}
	if got := f.p.VMs(); got[0].Resets+got[1].Resets != 1 {
		t.Errorf("resets = %d+%d, want 1", got[0].Resets, got[1].Resets)
	}
	if err := f.p.Release(g3.Lease.ID, "wrong", true); !errors.Is(err, ErrBadToken) {
		t.Errorf("release with wrong token: got %v, want ErrBadToken", err)
	}
	if _, err := f.p.Renew(g3.Lease.ID, "wrong", 0); !errors.Is(err, ErrBadToken) {
		t.Errorf("renew with wrong token: got %v, want ErrBadToken", err)
	}
	if err := f.p.Release("lease-nope", g3.Token, true); !errors.Is(err, ErrLeaseNotFound) {
		t.Errorf("release of unknown lease: got %v, want ErrLeaseNotFound", err)
	}
	if err := f.p.ForceRelease(g2.Lease.ID, false, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Renew(g2.Lease.ID, g2.Token, 0); !errors.Is(err, ErrLeaseNotFound) {
		t.Errorf("renew after force release: got %v, want ErrLeaseNotFound", err)
	}
}

func TestReleaseReturnsBeforeReset(t *testing.T) {
	f := newFixture(t, 1, 0)
	f.prov.mu.Lock()
	f.prov.resetGate = make(chan struct{})
	f.prov.mu.Unlock()
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.p.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatal(err)
	}
	// The reset is blocked: the VM must not be handed out meanwhile.
	if _, err := f.acquire(30 * time.Millisecond); !errors.Is(err, ErrNoVM) {
		t.Fatalf("acquire during reset: got %v, want ErrNoVM", err)
	}
	if got := f.p.VMs()[0].State; got != StateResetting {
		t.Errorf("state = %v, want resetting", got)
	}
	f.prov.resetGate <- struct{}{}
	if _, err := f.acquire(5 * time.Second); err != nil {
		t.Fatalf("acquire after reset: %v", err)
	}
}

// TestCloseDestroysWhatAResetMade closes the pool while a reset is under
// way that ends only after Close began: Close must destroy the instance
// that reset made, not the one it replaced (on compose down, a docker VM's
// new container was left behind).
func TestCloseDestroysWhatAResetMade(t *testing.T) {
	f := newFixture(t, 1, 0)
	hold := make(chan struct{})
	f.prov.mu.Lock()
	f.prov.resetHold = hold
	f.prov.mu.Unlock()
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.p.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatal(err)
	}
	f.close = true
	closed := make(chan error, 1)
	go func() { closed <- f.p.Close(context.Background(), false) }()
	waitFor(t, "Close to begin", func() bool {
		f.p.mu.Lock()
		defer f.p.mu.Unlock()
		return f.p.closed
	})
	close(hold)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	f.prov.mu.Lock()
	defer f.prov.mu.Unlock()
	want := "mem-" + g.Lease.VMID + "-r1"
	if got := f.prov.destroyedRefs; len(got) != 1 || got[0] != want {
		t.Errorf("Close destroyed %v, want [%s], the instance the reset made", got, want)
	}
}

func TestWaiterLeavesQueueOnCancel(t *testing.T) {
	f := newFixture(t, 1, 0)
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.p.Acquire(ctx, AcquireRequest{TTL: time.Minute, Wait: time.Hour})
		errc <- err
	}()
	waitFor(t, "one waiter", func() bool { return f.p.Stats().Waiters == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: got %v, want context.Canceled", err)
	}
	if got := f.p.Stats().Waiters; got != 0 {
		t.Fatalf("waiters = %d after cancel, want 0", got)
	}
	// The VM goes to the next caller, not to the departed waiter.
	if err := f.p.Release(g.Lease.ID, g.Token, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.acquire(0); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

func TestTTLExpiry(t *testing.T) {
	f := newFixture(t, 1, 0)
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(40 * time.Second)
	if _, err := f.p.Renew(g.Lease.ID, g.Token, 0); err != nil {
		t.Fatalf("renew: %v", err)
	}
	// Renewed at t=40s with a 1m TTL: still valid at t=90s.
	f.clk.Advance(50 * time.Second)
	if !f.p.HasLease(g.Lease.ID) {
		t.Fatal("lease expired although renewed")
	}
	f.clk.Advance(11 * time.Second)
	if f.p.HasLease(g.Lease.ID) {
		t.Fatal("lease still held after its TTL")
	}
	if got := testutil.ToFloat64(f.m.expirations.WithLabelValues("p")); got != 1 {
		t.Errorf("expirations = %v, want 1", got)
	}
	if _, err := f.p.Renew(g.Lease.ID, g.Token, 0); !errors.Is(err, ErrLeaseNotFound) {
		t.Errorf("renew after expiry: got %v, want ErrLeaseNotFound", err)
	}
	// Expired → reset → ready again.
	f.waitReady(1)
	if got := f.p.VMs()[0].Resets; got != 1 {
		t.Errorf("resets = %d, want 1", got)
	}
}

func TestQuarantineReplacesFailedVM(t *testing.T) {
	f := newFixture(t, 2, 0)
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	f.prov.mu.Lock()
	f.prov.failReset[g.Lease.VMID] = true
	f.prov.mu.Unlock()
	if err := f.p.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replacement", func() bool {
		vms := f.p.VMs()
		if len(vms) != 2 {
			return false
		}
		for _, v := range vms {
			if v.ID == g.Lease.VMID || v.State != StateReady {
				return false
			}
		}
		return true
	})
	if got := testutil.ToFloat64(f.m.quarantines.WithLabelValues("p", "reset")); got != 1 {
		t.Errorf("quarantines = %v, want 1", got)
	}
	if got := f.prov.liveCount(); got != 2 {
		t.Errorf("provider has %d live VMs, want 2", got)
	}
}

func TestHealthCheckQuarantines(t *testing.T) {
	f := newFixture(t, 2, 0)
	bad := f.p.VMs()[0].ID
	f.prov.mu.Lock()
	f.prov.failCheck[bad] = true
	f.prov.mu.Unlock()
	f.clk.Advance(time.Minute) // one health round
	waitFor(t, "bad vm replaced", func() bool {
		vms := f.p.VMs()
		if len(vms) != 2 {
			return false
		}
		for _, v := range vms {
			if v.ID == bad || v.State != StateReady {
				return false
			}
		}
		return true
	})
	if got := testutil.ToFloat64(f.m.quarantines.WithLabelValues("p", "health")); got != 1 {
		t.Errorf("health quarantines = %v, want 1", got)
	}
}

func TestWarmSpareServesDuringReset(t *testing.T) {
	f := newFixture(t, 1, 1)
	f.prov.mu.Lock()
	f.prov.resetGate = make(chan struct{})
	f.prov.mu.Unlock()
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	// Size 1: a second concurrent lease is refused even though a spare is ready.
	if _, err := f.acquire(0); !errors.Is(err, ErrNoVM) {
		t.Fatalf("second concurrent lease on size 1: got %v, want ErrNoVM", err)
	}
	// A queued waiter gets the spare as soon as the lease ends, without
	// waiting for the reset.
	got := f.waiter()
	if err := f.p.Release(g.Lease.ID, g.Token, true); err != nil {
		t.Fatal(err)
	}
	select {
	case g2 := <-got:
		if g2.Lease.VMID == g.Lease.VMID {
			t.Errorf("got the resetting vm %s", g.Lease.VMID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiter not served by the warm spare while the other VM resets")
	}
	close(f.prov.resetGate)
}

func TestRestoreKeepsLeases(t *testing.T) {
	f := newFixture(t, 2, 0)
	g, err := f.acquire(0)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(20 * time.Second)
	f.restart()
	f.p.Start()
	lv, ok := f.p.Lease(g.Lease.ID)
	if !ok {
		t.Fatal("lease lost across restart")
	}
	if got, want := lv.ExpireTime.Sub(f.clk.Now()), 40*time.Second; got != want {
		t.Errorf("remaining TTL = %v, want %v", got, want)
	}
	if _, err := f.p.Renew(g.Lease.ID, g.Token, 0); err != nil {
		t.Errorf("renew with the old token after restart: %v", err)
	}
	if got := f.prov.liveCount(); got != 2 {
		t.Errorf("live VMs = %d, want 2 (nothing leaked, nothing lost)", got)
	}
	if f.prov.created != 2 {
		t.Errorf("created = %d, want 2 (adopted, not re-created)", f.prov.created)
	}
}

// TestStress runs 16 acquirers on 3 VMs and checks continuously that no VM
// is ever held by two leases and that waiters are served in arrival order.
func TestStress(t *testing.T) {
	f := newFixture(t, 3, 0)
	f.prov.mu.Lock()
	f.prov.resetDelay = 200 * time.Microsecond
	f.prov.mu.Unlock()
	var (
		mu      sync.Mutex
		holding = map[string]string{} // vm → lease
		grants  []Grant
		served  atomic.Int64
	)
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Watchdog: the pool's own view must never show a VM twice either.
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			seen := map[string]bool{}
			for _, l := range f.p.Leases("") {
				if seen[l.VMID] {
					t.Errorf("vm %s appears in two live leases", l.VMID)
				}
				seen[l.VMID] = true
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for time.Now().Before(deadline) {
				g, err := f.p.Acquire(context.Background(), AcquireRequest{Holder: fmt.Sprint(i), TTL: time.Minute, Wait: 5 * time.Second})
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				mu.Lock()
				if other, ok := holding[g.Lease.VMID]; ok {
					t.Errorf("vm %s granted to %s while held by %s", g.Lease.VMID, g.Lease.ID, other)
				}
				holding[g.Lease.VMID] = g.Lease.ID
				grants = append(grants, g)
				mu.Unlock()
				time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
				mu.Lock()
				delete(holding, g.Lease.VMID)
				mu.Unlock()
				if err := f.p.Release(g.Lease.ID, g.Token, r.IntN(2) == 0); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	sort.Slice(grants, func(i, j int) bool { return grants[i].Seq < grants[j].Seq })
	var last uint64
	waited := 0
	for _, g := range grants {
		if g.Ticket == 0 {
			continue
		}
		waited++
		if g.Ticket <= last {
			t.Fatalf("waiter with ticket %d served after ticket %d: not FIFO", g.Ticket, last)
		}
		last = g.Ticket
	}
	if served.Load() < 100 || waited < 50 {
		t.Errorf("only %d leases served, %d after waiting: stress too weak", served.Load(), waited)
	}
	t.Logf("%d leases served, %d after waiting in the queue", served.Load(), waited)
}

func TestDrainSendsWaitersAway(t *testing.T) {
	f := newFixture(t, 1, 0)
	if _, err := f.acquire(0); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := f.acquire(time.Hour)
		errc <- err
	}()
	waitFor(t, "one waiter", func() bool { return f.p.Stats().Waiters == 1 })
	f.p.Drain()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("waiter got %v, want ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("waiter still waiting after Drain")
	}
	if _, err := f.acquire(0); !errors.Is(err, ErrClosed) {
		t.Errorf("acquire after Drain: %v, want ErrClosed", err)
	}
}
