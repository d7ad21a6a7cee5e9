// Package pool keeps a pool of M VMs and hands them out as leases.
//
// Waiters are served strictly in arrival order. A released VM is reset in
// the background and only handed out again once it is clean. A VM that fails
// to boot, reset or answer health checks is quarantined, destroyed and
// replaced so that the pool stays at its size. Leases expire unless renewed
// within their TTL; the clock is injected so that tests control time.
//
// All state of a pool is guarded by one mutex; the store is written under it
// so that what is persisted never runs ahead of or behind what was answered.
package pool

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// Errors returned by the pool; the gRPC layer maps them to codes.
var (
	ErrNoVM          = errors.New("no VM became free in time")
	ErrLeaseNotFound = errors.New("lease not found")
	ErrBadToken      = errors.New("wrong lease token")
	ErrClosed        = errors.New("pool is shutting down")
	ErrUnsupported   = errors.New("not supported by this pool's provider")
	ErrTooManyLabels = fmt.Errorf("a lease has at most %d labels", MaxLabels)
	ErrPoolBroken    = errors.New("the pool cannot start VMs")
)

// BrokenAfter is how many boots in a row must fail, with no VM up, before
// the pool refuses leases instead of keeping acquirers waiting for a VM
// that cannot come (a missing image, a provider that cannot run). It keeps
// booting with backoff meanwhile, and takes leases again after a boot
// succeeds.
const BrokenAfter = 5

// MaxLabels bounds a lease's labels, those set at renewal included.
const MaxLabels = 16

// State is a VM's lifecycle state.
type State int

// VM states: provisioning → ready → leased → resetting → ready; failures go to
// quarantined and the VM is destroyed; stopping on shutdown.
const (
	StateProvisioning State = iota + 1
	StateReady
	StateLeased
	StateResetting
	StateQuarantined
	StateStopping
)

var stateNames = map[State]string{
	StateProvisioning: "provisioning", StateReady: "ready", StateLeased: "leased",
	StateResetting: "resetting", StateQuarantined: "quarantined", StateStopping: "stopping",
}

func (s State) String() string { return stateNames[s] }

// ParseState is the inverse of String.
func ParseState(s string) (State, bool) {
	for k, v := range stateNames {
		if v == s {
			return k, true
		}
	}
	return 0, false
}

// States lists every state in lifecycle order.
var States = []State{StateProvisioning, StateReady, StateLeased, StateResetting, StateQuarantined, StateStopping}

type vm struct {
	id         string
	state      State
	inst       Instance
	leaseID    string
	holder     string
	createTime time.Time
	stateTime  time.Time
	lastErr    string
	served     int64
	resets     int64
	checking   bool
}

type lease struct {
	id        string
	tokenHash []byte
	vmID      string
	holder    string
	ttl       time.Duration
	acquire   time.Time
	expire    time.Time
	renewals  int64
	labels    map[string]string
	timer     clock.Timer
}

type waiter struct {
	ticket   uint64
	holder   string
	labels   map[string]string
	ttl      time.Duration
	grace    time.Duration
	elem     *list.Element
	ch       chan Grant // capacity 1: the dispatcher never blocks
	granted  bool
	enqueued time.Time
}

// Grant is a lease as answered to its acquirer: the only place its token,
// the guest password and the guest token appear.
type Grant struct {
	Lease          LeaseView
	Token          string
	ClientPassword string
	GuestToken     string
	// Ticket is the acquirer's place in the wait queue (0: served at once),
	// and Seq numbers grants in the order they were made; tests check that
	// tickets grow with Seq.
	Ticket uint64
	Seq    uint64
}

// LeaseView is a lease without its secrets.
type LeaseView struct {
	ID           string
	VMID         string
	Pool         string
	Endpoint     string
	Ports        map[string]string
	ExpireTime   time.Time
	TTL          time.Duration
	Holder       string
	AcquireTime  time.Time
	ScreenWidth  int
	ScreenHeight int
	OSType       string
	Renewals     int64
	Labels       map[string]string
}

// VMView is a VM as shown to people.
type VMView struct {
	ID           string
	Pool         string
	Provider     string
	State        State
	Endpoint     string
	LeaseID      string
	Holder       string
	CreateTime   time.Time
	StateTime    time.Time
	LastError    string
	LeasesServed int64
	Resets       int64
	Ref          string
	Ports        map[string]string
}

// Stats are a pool's counts.
type Stats struct {
	ByState     map[State]int
	Waiters     int
	Leased      int
	Utilisation float64
	// BusyTime is the total time VMs spent leased since start (including
	// the leases still running); the benchmark differences it.
	BusyTime time.Duration
}

// Pool is one pool of VMs.
type Pool struct {
	spec    Spec
	prov    Provider
	store   Store
	clk     clock.Clock
	log     *zap.Logger
	metrics *Metrics
	hub     *Hub

	ctx    context.Context // cancelled by Close; owns every background goroutine
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// draining is closed by Drain: waiters give up and new acquires are refused.
	draining  chan struct{}
	drainOnce sync.Once

	mu          sync.Mutex
	vms         map[string]*vm
	leases      map[string]*lease
	waiters     list.List
	nextTicket  uint64
	nextSeq     uint64
	closed      bool
	started     time.Time
	busyDone    time.Duration
	failStreak  int
	lastBootErr string
	healthTimer clock.Timer
}

// Options are a pool's collaborators.
type Options struct {
	Provider Provider
	Store    Store
	Clock    clock.Clock
	Logger   *zap.Logger
	Metrics  *Metrics
	Hub      *Hub
}

// New builds a pool; call Restore (optional) and then Start.
func New(spec Spec, o Options) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		spec: spec, prov: o.Provider, store: o.Store, clk: o.Clock,
		log: o.Logger.With(zap.String("pool", spec.Name)), metrics: o.Metrics, hub: o.Hub,
		ctx: ctx, cancel: cancel, draining: make(chan struct{}),
		vms: map[string]*vm{}, leases: map[string]*lease{},
		started: o.Clock.Now(),
	}
	if p.metrics != nil {
		p.metrics.addPool(p)
	}
	return p
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.spec.Name }

// Spec returns the pool's configuration.
func (p *Pool) Spec() Spec { return p.spec }

// Start provisions VMs up to size + warm_spares and starts health checks.
func (p *Pool) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ensureLocked()
	p.scheduleHealthLocked()
	p.updateGaugesLocked()
}

// vmIDRandBytes is how many random bytes follow the pool's name in a VM's
// id, in hex: "<pool>-<8 hex digits>".
const vmIDRandBytes = 4

// VMIDLen is the length of the ids of a pool's VMs, for providers that put
// them into paths of bounded length (the qemu provider's unix sockets).
func VMIDLen(poolName string) int { return len(poolName) + 1 + 2*vmIDRandBytes }

func newID(prefix string, nbytes int) string {
	b := make([]byte, nbytes)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return prefix + hex.EncodeToString(b)
}

func hashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// AcquireRequest asks for a lease.
type AcquireRequest struct {
	Holder string
	// Labels are shown with the lease (rollout, task, episode, step).
	Labels map[string]string
	TTL    time.Duration
	// Wait bounds the wait for a free VM; 0 means do not wait. ctx bounds it too.
	Wait time.Duration
	Env  EnvOverrides
}

// Acquire leases a ready VM, waiting in FIFO order up to req.Wait.
func (p *Pool) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if !req.Env.IsZero() {
		if _, ok := p.prov.(Preparer); !ok {
			return Grant{}, fmt.Errorf("env_config overrides: %w", ErrUnsupported)
		}
	}
	start := time.Now()
	g, err := p.acquire(ctx, req)
	if p.metrics != nil {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		p.metrics.acquireWait.WithLabelValues(p.spec.Name, outcome).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		return Grant{}, err
	}
	if !req.Env.IsZero() {
		pctx, cancel := context.WithTimeout(ctx, p.spec.ResetTimeout)
		err := p.prov.(Preparer).Prepare(pctx, g.Lease.VMID, p.instanceOf(g.Lease.VMID), req.Env)
		cancel()
		if err != nil {
			// The VM may be half-prepared: reset it before anyone else
			// gets it, unless the provider refused the overrides before
			// touching it.
			p.end(g.Lease.ID, !errors.Is(err, ErrUnsupported), "env overrides failed")
			return Grant{}, fmt.Errorf("apply env_config overrides to vm %s: %w", g.Lease.VMID, err)
		}
		if g, err = p.handOver(g); err != nil {
			return Grant{}, err
		}
	}
	// The caller went away meanwhile: nobody would ever hold the token to
	// release the lease, and the VM would sit leased for the whole TTL.
	if err := ctx.Err(); err != nil {
		p.end(g.Lease.ID, !req.Env.IsZero(), "acquirer gave up")
		return Grant{}, err
	}
	return g, nil
}

// handOver starts the TTL of a lease whose VM was prepared: it was
// granted with ResetTimeout (Prepare's bound) on top, so that it could not
// expire, and its VM be reset, while the provider prepared it; its TTL
// runs from the moment its holder gets it.
func (p *Pool) handOver(g Grant) (Grant, error) {
	p.mu.Lock()
	l := p.leases[g.Lease.ID]
	if l == nil {
		p.mu.Unlock()
		return Grant{}, fmt.Errorf("lease %s ended while vm %s was prepared: %w", g.Lease.ID, g.Lease.VMID, ErrLeaseNotFound)
	}
	prev := l.expire
	l.expire = p.clk.Now().Add(l.ttl)
	err := p.store.SaveLease(p.leaseRecord(l), p.vmRecord(p.vms[l.vmID]))
	if err == nil {
		p.armLocked(l)
		g.Lease = p.leaseViewLocked(l)
		p.mu.Unlock()
		return g, nil
	}
	l.expire = prev
	p.mu.Unlock()
	// The VM holds the task's overrides: reset it.
	p.end(g.Lease.ID, true, "hand-off failed")
	return Grant{}, fmt.Errorf("persist lease %s after preparing vm %s: %w", g.Lease.ID, g.Lease.VMID, err)
}

func (p *Pool) instanceOf(id string) Instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.vms[id]; v != nil {
		return v.inst
	}
	return Instance{}
}

func (p *Pool) acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	p.mu.Lock()
	if p.closed || p.isDraining() {
		p.mu.Unlock()
		return Grant{}, ErrClosed
	}
	if err := p.brokenLocked(); err != nil {
		p.mu.Unlock()
		return Grant{}, err
	}
	// A lease whose VM the provider prepares first cannot expire while
	// that runs (at most ResetTimeout); handOver starts its TTL after.
	var grace time.Duration
	if !req.Env.IsZero() {
		grace = p.spec.ResetTimeout
	}
	// A newcomer may take a ready VM only when nobody is queued ahead of it.
	if p.waiters.Len() == 0 {
		if v := p.pickReadyLocked(); v != nil {
			g, err := p.grantLocked(v, req.Holder, copyMap(req.Labels), req.TTL, grace, 0, nil)
			p.mu.Unlock()
			return g, err
		}
	}
	if req.Wait <= 0 {
		p.mu.Unlock()
		return Grant{}, ErrNoVM
	}
	p.nextTicket++
	w := &waiter{ticket: p.nextTicket, holder: req.Holder, labels: copyMap(req.Labels), ttl: req.TTL, grace: grace, ch: make(chan Grant, 1), enqueued: time.Now()}
	w.elem = p.waiters.PushBack(w)
	p.mu.Unlock()

	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	var waitErr error
	select {
	case g := <-w.ch:
		return g, nil
	case <-timer.C:
		waitErr = ErrNoVM
	case <-ctx.Done():
		waitErr = ctx.Err()
	case <-p.ctx.Done():
		waitErr = ErrClosed
	case <-p.draining:
		waitErr = ErrClosed
	}
	p.mu.Lock()
	if !w.granted {
		if w.elem != nil {
			p.waiters.Remove(w.elem)
			w.elem = nil
		}
		p.mu.Unlock()
		return Grant{}, waitErr
	}
	p.mu.Unlock()
	// Granted at the same moment we gave up: hand the VM straight back,
	// untouched, so the next waiter gets it without a reset.
	g := <-w.ch
	p.end(g.Lease.ID, false, "acquirer gave up")
	return Grant{}, waitErr
}

func (p *Pool) leasedLocked() int { return len(p.leases) }

func (p *Pool) pickReadyLocked() *vm {
	if p.leasedLocked() >= p.spec.Size {
		return nil
	}
	// Oldest-ready first spreads wear and keeps the choice deterministic.
	var best *vm
	for _, v := range p.vms {
		if v.state == StateReady && (best == nil || v.stateTime.Before(best.stateTime) || (v.stateTime.Equal(best.stateTime) && v.id < best.id)) {
			best = v
		}
	}
	return best
}

// ending is a lease being ended whose end is persisted in the same
// transaction as the grant that follows it (Store.HandOff).
type ending struct {
	leaseID string
	vm      store.VM // the released VM's row
	// done does the end's in-memory work once both are persisted, before
	// the grant's, so that watchers see the release before the grant.
	done func()
}

// grantLocked leases v for ttl, plus grace the first time; with end set,
// the end of that lease is persisted in the same transaction.
func (p *Pool) grantLocked(v *vm, holder string, labels map[string]string, ttl, grace time.Duration, ticket uint64, end *ending) (Grant, error) {
	now := p.clk.Now()
	tok := newID("", 24)
	l := &lease{
		id: newID("lease-", 8), tokenHash: hashToken(tok), vmID: v.id, holder: holder,
		ttl: ttl, acquire: now, expire: now.Add(ttl + grace), labels: labels,
	}
	prev := *v
	v.state, v.stateTime, v.leaseID, v.holder = StateLeased, now, l.id, holder
	var err error
	if end == nil {
		err = p.store.SaveLease(p.leaseRecord(l), p.vmRecord(v))
	} else {
		err = p.store.HandOff(end.leaseID, end.vm, p.leaseRecord(l), p.vmRecord(v))
	}
	if err != nil {
		*v = prev
		return Grant{}, fmt.Errorf("persist lease: %w", err)
	}
	if end != nil {
		end.done()
	}
	p.leases[l.id] = l
	p.armLocked(l)
	p.nextSeq++
	p.emitLocked(v, prev.state, "lease acquired")
	p.log.Info("lease granted", zap.String("lease_id", l.id), zap.String("vm_id", v.id), zap.String("holder", holder), zap.Duration("ttl", ttl))
	return Grant{
		Lease: p.leaseViewLocked(l), Token: tok,
		ClientPassword: p.spec.ClientPassword, GuestToken: p.spec.GuestToken,
		Ticket: ticket, Seq: p.nextSeq,
	}, nil
}

// dispatchLocked hands ready VMs to waiters in arrival order. With end
// set, the first grant persists that lease's end with it; it reports
// whether that happened (no grant, or a failed one, leaves the end to the
// caller).
func (p *Pool) dispatchLocked(end *ending) (ended bool) {
	for p.waiters.Len() > 0 {
		v := p.pickReadyLocked()
		if v == nil {
			return ended
		}
		w := p.waiters.Front().Value.(*waiter)
		g, err := p.grantLocked(v, w.holder, w.labels, w.ttl, w.grace, w.ticket, end)
		if err != nil {
			// The store failed: leave the waiter queued; it times out or
			// the next state change tries again.
			p.log.Error("grant failed", zap.String("vm_id", v.id), zap.Error(err))
			return ended
		}
		if end != nil {
			ended, end = true, nil
		}
		p.waiters.Remove(w.elem)
		w.elem = nil
		w.granted = true
		w.ch <- g
	}
	return ended
}

func (p *Pool) armLocked(l *lease) {
	if l.timer != nil {
		l.timer.Stop()
	}
	id := l.id
	l.timer = p.clk.AfterFunc(l.expire.Sub(p.clk.Now()), func() { p.expire(id) })
}

func (p *Pool) expire(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[id]
	if l == nil || p.closed {
		return
	}
	if p.clk.Now().Before(l.expire) {
		p.armLocked(l) // renewed meanwhile
		return
	}
	if p.metrics != nil {
		p.metrics.expirations.WithLabelValues(p.spec.Name).Inc()
	}
	p.log.Warn("lease expired", zap.String("lease_id", l.id), zap.String("vm_id", l.vmID), zap.String("holder", l.holder))
	p.endLocked(l, true, "lease expired")
}

// Renew extends a lease by ttl (0 keeps its TTL).
func (p *Pool) Renew(id, token string, ttl time.Duration) (LeaseView, error) {
	return p.RenewLabels(id, token, ttl, nil)
}

// RenewLabels renews like Renew and sets labels on the lease (an empty
// value removes one).
func (p *Pool) RenewLabels(id, token string, ttl time.Duration, labels map[string]string) (LeaseView, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return LeaseView{}, ErrClosed
	}
	l, err := p.authLocked(id, token)
	if err != nil {
		return LeaseView{}, err
	}
	prev := *l
	if ttl > 0 {
		l.ttl = ttl
	}
	l.expire = p.clk.Now().Add(l.ttl)
	l.renewals++
	if len(labels) > 0 {
		merged := mergeLabels(l.labels, labels)
		if len(merged) > MaxLabels {
			*l = prev
			return LeaseView{}, ErrTooManyLabels
		}
		l.labels = merged
	}
	if err := p.store.SaveLease(p.leaseRecord(l), p.vmRecord(p.vms[l.vmID])); err != nil {
		*l = prev
		return LeaseView{}, fmt.Errorf("persist renewal: %w", err)
	}
	p.armLocked(l)
	return p.leaseViewLocked(l), nil
}

func (p *Pool) authLocked(id, token string) (*lease, error) {
	l := p.leases[id]
	if l == nil {
		return nil, ErrLeaseNotFound
	}
	if subtle.ConstantTimeCompare(hashToken(token), l.tokenHash) != 1 {
		return nil, ErrBadToken
	}
	return l, nil
}

// HasLease reports whether the pool holds lease id.
func (p *Pool) HasLease(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leases[id] != nil
}

// Release ends a lease; with reset the VM is reset in the background.
func (p *Pool) Release(id, token string, reset bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, err := p.authLocked(id, token)
	if err != nil {
		return err
	}
	return p.endLocked(l, reset, "lease released")
}

// ForceRelease ends a lease without its token.
func (p *Pool) ForceRelease(id string, reset bool, reason string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[id]
	if l == nil {
		return ErrLeaseNotFound
	}
	p.log.Warn("lease force-released", zap.String("lease_id", id), zap.String("vm_id", l.vmID), zap.String("reason", reason))
	return p.endLocked(l, reset, "lease force-released")
}

func (p *Pool) end(id string, reset bool, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[id]; l != nil {
		if err := p.endLocked(l, reset, reason); err != nil {
			p.log.Error("end lease failed", zap.String("lease_id", id), zap.Error(err))
		}
	}
}

func (p *Pool) endLocked(l *lease, reset bool, reason string) error {
	if p.closed {
		// Close owns the VMs now: with keep the lease stays for the next
		// start, without it the VM is being destroyed.
		return ErrClosed
	}
	v := p.vms[l.vmID]
	if v == nil {
		delete(p.leases, l.id)
		return ErrLeaseNotFound
	}
	now := p.clk.Now()
	prevState := v.state
	prev := *v
	v.leaseID, v.holder, v.served, v.stateTime = "", "", v.served+1, now
	if reset {
		v.state = StateResetting
	} else {
		v.state = StateReady
	}
	// The event shows the VM as released even when the same VM is granted
	// before done runs.
	released := p.vmViewLocked(v)
	done := func() {
		if l.timer != nil {
			l.timer.Stop()
		}
		hold := now.Sub(l.acquire)
		p.busyDone += hold
		if p.metrics != nil {
			p.metrics.hold.WithLabelValues(p.spec.Name).Observe(hold.Seconds())
		}
		if p.hub != nil {
			p.hub.publish(Event{Time: p.clk.Now(), VM: released, Previous: prevState, Reason: reason})
		}
		p.log.Info("lease ended", zap.String("lease_id", l.id), zap.String("vm_id", v.id), zap.String("reason", reason), zap.Bool("reset", reset))
		if reset {
			p.goReset(v)
		}
	}
	// The lease slot is free again: this VM, when not reset, or a warm
	// spare may go to the next waiter at once. Its grant persists this end
	// with it, one commit where there were two.
	delete(p.leases, l.id)
	end := &ending{leaseID: l.id, vm: p.vmRecord(v), done: done}
	if p.dispatchLocked(end) {
		p.updateGaugesLocked()
		return nil
	}
	if err := p.store.EndLease(end.leaseID, end.vm); err != nil {
		*v = prev
		p.leases[l.id] = l
		return fmt.Errorf("persist release: %w", err)
	}
	done()
	// A grant that failed above is tried once more now that the end is
	// persisted on its own.
	p.dispatchLocked(nil)
	p.updateGaugesLocked()
	return nil
}

func (p *Pool) goReset(v *vm) {
	id, inst := v.id, v.inst
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, p.spec.ResetTimeout)
		defer cancel()
		start := time.Now()
		ni, err := p.prov.Reset(ctx, id, inst)
		if p.metrics != nil {
			p.metrics.resetDur.WithLabelValues(p.spec.Name).Observe(time.Since(start).Seconds())
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		v := p.vms[id]
		if v == nil {
			return
		}
		if err == nil {
			// Recorded even when the pool is closing: a reset that ends
			// while Close waits made a new instance, and Close destroys
			// v.inst, not the old one the reset already removed.
			v.inst = ni
		}
		if p.closed {
			return
		}
		if err != nil {
			p.quarantineLocked(v, "reset", err)
			return
		}
		v.resets++
		v.state, v.stateTime = StateReady, p.clk.Now()
		p.emitLocked(v, StateResetting, "reset done")
		p.dispatchLocked(nil)
		// Persist "ready" only when no waiter took the VM at once: a grant
		// writes the VM as leased in its own transaction, and one write
		// less is a shorter hand-off.
		if v.state == StateReady {
			if err := p.store.SaveVM(p.vmRecord(v)); err != nil {
				p.log.Error("persist vm failed", zap.String("vm_id", v.id), zap.Error(err))
			}
		}
		p.updateGaugesLocked()
	}()
}

// setStateLocked changes a VM's state, persists it and tells watchers.
func (p *Pool) setStateLocked(v *vm, s State, reason string) {
	prev := v.state
	v.state, v.stateTime = s, p.clk.Now()
	if err := p.store.SaveVM(p.vmRecord(v)); err != nil {
		// The in-memory state stays authoritative; a restart re-checks VMs
		// whose stored state is stale.
		p.log.Error("persist vm failed", zap.String("vm_id", v.id), zap.Error(err))
	}
	p.emitLocked(v, prev, reason)
	p.updateGaugesLocked()
}

func (p *Pool) quarantineLocked(v *vm, what string, err error) {
	v.lastErr = what + ": " + err.Error()
	p.log.Warn("vm quarantined", zap.String("vm_id", v.id), zap.String("cause", what), zap.Error(err))
	if p.metrics != nil {
		p.metrics.quarantines.WithLabelValues(p.spec.Name, what).Inc()
	}
	if what == "boot" {
		p.failStreak++
		p.lastBootErr = err.Error()
	}
	p.setStateLocked(v, StateQuarantined, what+" failed")
	id, inst := v.id, v.inst
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), p.spec.ResetTimeout)
		defer cancel()
		if err := p.prov.Destroy(ctx, id, inst); err != nil {
			p.log.Error("destroy failed", zap.String("vm_id", id), zap.Error(err))
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		p.removeLocked(id, "destroyed")
		if !p.closed {
			p.ensureLocked()
		}
	}()
}

func (p *Pool) removeLocked(id, reason string) {
	v := p.vms[id]
	if v == nil {
		return
	}
	if err := p.store.DeleteVM(id); err != nil {
		p.log.Error("delete vm record failed", zap.String("vm_id", id), zap.Error(err))
	}
	delete(p.vms, id)
	prev := v.state
	v.state = StateStopping
	p.emitLocked(v, prev, reason)
	p.updateGaugesLocked()
}

// ensureLocked provisions VMs until the pool has size + warm_spares live ones.
func (p *Pool) ensureLocked() {
	live := 0
	for _, v := range p.vms {
		if v.state != StateQuarantined && v.state != StateStopping {
			live++
		}
	}
	for ; live < p.spec.Size+p.spec.WarmSpares; live++ {
		now := p.clk.Now()
		v := &vm{id: newID(p.spec.Name+"-", vmIDRandBytes), state: StateProvisioning, createTime: now, stateTime: now}
		p.vms[v.id] = v
		if err := p.store.SaveVM(p.vmRecord(v)); err != nil {
			p.log.Error("persist vm failed", zap.String("vm_id", v.id), zap.Error(err))
		}
		p.emitLocked(v, 0, "provisioning")
		p.goProvision(v.id, p.backoffLocked())
	}
	p.updateGaugesLocked()
}

// brokenLocked is ErrPoolBroken, with the last boot error, when the last
// BrokenAfter boots failed and no VM is up.
func (p *Pool) brokenLocked() error {
	if p.failStreak < BrokenAfter {
		return nil
	}
	for _, v := range p.vms {
		if v.state == StateReady || v.state == StateLeased || v.state == StateResetting {
			return nil
		}
	}
	return fmt.Errorf("%w: pool %s: the last %d boots failed, the last with: %s", ErrPoolBroken, p.spec.Name, p.failStreak, p.lastBootErr)
}

// backoffLocked spaces out boots after consecutive boot failures, so a
// broken image does not turn into a hot loop.
func (p *Pool) backoffLocked() time.Duration {
	if p.failStreak == 0 {
		return 0
	}
	d := 500 * time.Millisecond << min(p.failStreak-1, 6)
	return min(d, 30*time.Second)
}

func (p *Pool) goProvision(id string, delay time.Duration) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-p.ctx.Done():
				return
			}
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.spec.BootTimeout)
		defer cancel()
		inst, err := p.prov.Create(ctx, id)
		p.mu.Lock()
		defer p.mu.Unlock()
		v := p.vms[id]
		if v == nil {
			return
		}
		v.inst = inst
		if p.closed {
			// Close is waiting for us; it destroys what we made.
			return
		}
		if err != nil {
			p.quarantineLocked(v, "boot", err)
			return
		}
		p.failStreak = 0
		p.log.Info("vm ready", zap.String("vm_id", id), zap.String("endpoint", inst.Endpoint))
		p.setStateLocked(v, StateReady, "booted")
		p.dispatchLocked(nil)
	}()
}

func (p *Pool) scheduleHealthLocked() {
	if p.spec.HealthInterval <= 0 || p.closed {
		return
	}
	p.healthTimer = p.clk.AfterFunc(p.spec.HealthInterval, p.healthRound)
}

// healthRound checks every ready VM once, quarantining those that fail.
func (p *Pool) healthRound() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	type job struct {
		id   string
		inst Instance
	}
	var jobs []job
	for _, v := range p.vms {
		if v.state == StateReady && !v.checking {
			v.checking = true
			jobs = append(jobs, job{v.id, v.inst})
		}
	}
	p.wg.Add(len(jobs))
	p.mu.Unlock()
	for _, j := range jobs {
		go func() {
			defer p.wg.Done()
			ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
			err := p.prov.Check(ctx, j.inst)
			cancel()
			p.mu.Lock()
			defer p.mu.Unlock()
			v := p.vms[j.id]
			if v == nil {
				return
			}
			v.checking = false
			if err == nil || p.closed {
				return
			}
			if v.state == StateReady && v.inst.Ref == j.inst.Ref {
				p.quarantineLocked(v, "health", err)
			} else {
				// Leased meanwhile: the holder finds out; note it for people.
				v.lastErr = "health: " + err.Error()
			}
		}()
	}
	p.mu.Lock()
	p.scheduleHealthLocked()
	p.mu.Unlock()
}

func (p *Pool) isDraining() bool {
	select {
	case <-p.draining:
		return true
	default:
		return false
	}
}

// Drain refuses new acquires and sends every waiter away (Unavailable), so
// that a graceful stop is not held up by callers waiting for a VM. Leases
// can still be renewed and released until Close.
func (p *Pool) Drain() {
	p.drainOnce.Do(func() { close(p.draining) })
}

// Close stops the pool. Unless keep is set every VM is destroyed and every
// lease dropped; with keep, VMs and leases stay for the next start to adopt.
func (p *Pool) Close(ctx context.Context, keep bool) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	if p.healthTimer != nil {
		p.healthTimer.Stop()
	}
	for _, l := range p.leases {
		if l.timer != nil {
			l.timer.Stop()
		}
	}
	p.mu.Unlock()
	// Cancelling aborts boots and resets in flight and wakes every waiter.
	p.cancel()
	p.wg.Wait()
	if keep {
		return nil
	}
	p.mu.Lock()
	p.leases = map[string]*lease{}
	type job struct {
		id   string
		inst Instance
	}
	var jobs []job
	for _, v := range p.vms {
		prev := v.state
		v.state = StateStopping
		p.emitLocked(v, prev, "shutdown")
		jobs = append(jobs, job{v.id, v.inst})
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.prov.Destroy(ctx, j.id, j.inst); err != nil {
				errs[i] = fmt.Errorf("destroy vm %s: %w", j.id, err)
				return
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if err := p.store.DeleteVM(j.id); err != nil {
				errs[i] = err
			}
			delete(p.vms, j.id)
		}()
	}
	wg.Wait()
	p.mu.Lock()
	p.leases = map[string]*lease{}
	p.updateGaugesLocked()
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Restore takes over the VMs and leases a previous run left in the store:
// live VMs are adopted, leases keep their remaining TTL, leases that expired
// meanwhile are ended with a reset, and VMs caught mid-boot or mid-reset are
// destroyed and replaced. Strays the provider finds are destroyed.
func (p *Pool) Restore(ctx context.Context, vms []store.VM, leases []store.Lease) error {
	byVM := map[string]store.Lease{}
	for _, l := range leases {
		byVM[l.VMID] = l
	}
	known := map[string]bool{}
	type adopted struct {
		rec store.VM
		err error
	}
	res := make([]adopted, len(vms))
	var wg sync.WaitGroup
	for i, r := range vms {
		known[r.ID] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = adopted{rec: r}
			st, _ := ParseState(r.State)
			if st != StateReady && st != StateLeased {
				res[i].err = fmt.Errorf("caught while %s", r.State)
				return
			}
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			res[i].err = p.prov.Adopt(actx, r.ID, instanceFromRecord(r))
		}()
	}
	wg.Wait()
	var toDestroy []store.VM
	p.mu.Lock()
	now := p.clk.Now()
	for _, a := range res {
		r := a.rec
		if a.err != nil {
			p.log.Warn("vm not adopted", zap.String("vm_id", r.ID), zap.Error(a.err))
			toDestroy = append(toDestroy, r)
			if err := p.store.DeleteVM(r.ID); err != nil {
				p.mu.Unlock()
				return err
			}
			continue
		}
		v := &vm{
			id: r.ID, state: StateReady, inst: instanceFromRecord(r), createTime: r.CreateTime,
			stateTime: r.StateTime, lastErr: r.LastError, served: r.LeasesServed, resets: r.Resets,
		}
		p.vms[v.id] = v
		lr, hasLease := byVM[r.ID]
		switch {
		case hasLease && now.Before(lr.ExpireTime):
			l := &lease{id: lr.ID, tokenHash: lr.TokenHash, vmID: r.ID, holder: lr.Holder, ttl: lr.TTL,
				acquire: lr.AcquireTime, expire: lr.ExpireTime, renewals: lr.Renewals, labels: lr.Labels}
			v.state, v.leaseID, v.holder = StateLeased, l.id, l.holder
			p.leases[l.id] = l
			p.armLocked(l)
			p.log.Info("lease restored", zap.String("lease_id", l.id), zap.String("vm_id", v.id), zap.Duration("remaining", l.expire.Sub(now)))
		case hasLease:
			l := &lease{id: lr.ID, vmID: r.ID, holder: lr.Holder, acquire: lr.AcquireTime}
			v.state, v.leaseID = StateLeased, l.id
			p.leases[l.id] = l
			if p.metrics != nil {
				p.metrics.expirations.WithLabelValues(p.spec.Name).Inc()
			}
			p.log.Warn("lease expired", zap.String("lease_id", l.id), zap.String("vm_id", v.id), zap.String("holder", l.holder))
			if err := p.endLocked(l, true, "lease expired while down"); err != nil {
				p.mu.Unlock()
				return err
			}
		case r.State == StateLeased.String():
			// Leased without a lease row: the holder is unknown, reset it.
			v.state = StateLeased
			p.setStateLocked(v, StateResetting, "orphaned lease")
			p.goReset(v)
		default:
			p.setStateLocked(v, StateReady, "adopted")
		}
	}
	p.updateGaugesLocked()
	p.mu.Unlock()
	for _, r := range toDestroy {
		dctx, cancel := context.WithTimeout(ctx, p.spec.ResetTimeout)
		if err := p.prov.Destroy(dctx, r.ID, instanceFromRecord(r)); err != nil {
			p.log.Warn("destroy of unadoptable vm failed", zap.String("vm_id", r.ID), zap.Error(err))
		}
		cancel()
	}
	p.mu.Lock()
	for id := range p.vms {
		known[id] = true
	}
	for _, r := range toDestroy {
		delete(known, r.ID)
	}
	p.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := p.prov.Sweep(sctx, known); err != nil {
		return fmt.Errorf("sweep strays: %w", err)
	}
	return nil
}

func instanceFromRecord(r store.VM) Instance {
	return Instance{Ref: r.Ref, Endpoint: r.Endpoint, Ports: r.Ports, Data: r.Data}
}

func (p *Pool) vmRecord(v *vm) store.VM {
	return store.VM{
		ID: v.id, Pool: p.spec.Name, Provider: p.spec.Provider, State: v.state.String(),
		Ref: v.inst.Ref, Endpoint: v.inst.Endpoint, Ports: v.inst.Ports, Data: v.inst.Data,
		CreateTime: v.createTime, StateTime: v.stateTime, LastError: v.lastErr,
		LeasesServed: v.served, Resets: v.resets,
	}
}

func (p *Pool) leaseRecord(l *lease) store.Lease {
	return store.Lease{
		ID: l.id, Pool: p.spec.Name, VMID: l.vmID, TokenHash: l.tokenHash, Holder: l.holder,
		TTL: l.ttl, AcquireTime: l.acquire, ExpireTime: l.expire, Renewals: l.renewals, Labels: l.labels,
	}
}

func (p *Pool) leaseViewLocked(l *lease) LeaseView {
	v := p.vms[l.vmID]
	return LeaseView{
		ID: l.id, VMID: l.vmID, Pool: p.spec.Name, Endpoint: v.inst.Endpoint, Ports: copyMap(v.inst.Ports),
		ExpireTime: l.expire, TTL: l.ttl, Holder: l.holder, AcquireTime: l.acquire,
		ScreenWidth: p.spec.ScreenWidth, ScreenHeight: p.spec.ScreenHeight, OSType: p.spec.OSType,
		Renewals: l.renewals, Labels: copyMap(l.labels),
	}
}

// mergeLabels returns base with set applied: a new value replaces, an empty
// one removes. base is not modified (views and records share it).
func mergeLabels(base, set map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(set))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range set {
		if v == "" {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (p *Pool) vmViewLocked(v *vm) VMView {
	return VMView{
		ID: v.id, Pool: p.spec.Name, Provider: p.spec.Provider, State: v.state, Endpoint: v.inst.Endpoint,
		LeaseID: v.leaseID, Holder: v.holder, CreateTime: v.createTime, StateTime: v.stateTime,
		LastError: v.lastErr, LeasesServed: v.served, Resets: v.resets, Ref: v.inst.Ref, Ports: copyMap(v.inst.Ports),
	}
}

// Lease returns one lease without its token.
func (p *Pool) Lease(id string) (LeaseView, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[id]
	if l == nil {
		return LeaseView{}, false
	}
	return p.leaseViewLocked(l), true
}

// Leases returns the live leases whose holder starts with prefix, oldest first.
func (p *Pool) Leases(holderPrefix string) []LeaseView {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []LeaseView
	for _, l := range p.leases {
		if strings.HasPrefix(l.holder, holderPrefix) {
			out = append(out, p.leaseViewLocked(l))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].AcquireTime.Equal(out[j].AcquireTime) {
			return out[i].AcquireTime.Before(out[j].AcquireTime)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// VMs returns the pool's VMs ordered by id.
func (p *Pool) VMs() []VMView {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]VMView, 0, len(p.vms))
	for _, v := range p.vms {
		out = append(out, p.vmViewLocked(v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Stats returns the pool's counts and utilisation since start.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

func (p *Pool) statsLocked() Stats {
	s := Stats{ByState: map[State]int{}, Waiters: p.waiters.Len(), Leased: len(p.leases)}
	for _, v := range p.vms {
		s.ByState[v.state]++
	}
	now := p.clk.Now()
	busy := p.busyDone
	for _, l := range p.leases {
		busy += now.Sub(l.acquire)
	}
	s.BusyTime = busy
	if el := now.Sub(p.started); el > 0 {
		s.Utilisation = float64(busy) / (float64(el) * float64(p.spec.Size))
	}
	return s
}

func (p *Pool) emitLocked(v *vm, prev State, reason string) {
	if p.hub != nil {
		p.hub.publish(Event{Time: p.clk.Now(), VM: p.vmViewLocked(v), Previous: prev, Reason: reason})
	}
}

func (p *Pool) updateGaugesLocked() {
	if p.metrics == nil {
		return
	}
	counts := map[State]int{}
	for _, v := range p.vms {
		counts[v.state]++
	}
	for _, s := range States {
		p.metrics.vms.WithLabelValues(p.spec.Name, s.String()).Set(float64(counts[s]))
	}
}
