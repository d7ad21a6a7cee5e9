// Package scheduler is the coordinator's core: it holds the live rollouts,
// their GRPO groups and episodes, the runner registry and the batches, and
// decides what runs next.
//
//   - Fair share: rollouts are picked by stride scheduling weighted by
//     priority, so a rollout of priority 4 gets four times the slots of a
//     rollout of priority 1 while both have work.
//   - Groups start together: episodes are queued group by group and a group
//     is admitted as a whole decision, never half.
//   - Admission: sync rollouts admit at most one batch of groups beyond what
//     has been consumed; async rollouts admit within AReaL's staleness bound
//     (started ≤ (max_staleness + versions since start + 1) × batch groups),
//     which throttles instead of throwing work away.
//   - Redundancy: group_size + r episodes start; the first group_size that
//     finish are kept, the rest cancelled (ROLL's straggler hedge).
//   - Failures: an attempt that fails is requeued with attempt+1; after
//     max_attempts the group is regenerated with a fresh episode or reported
//     failed, never handed out partial.
//
// All state sits behind one mutex with short critical sections; nothing
// blocking (RPCs, database commits) happens under it. Durable changes go to
// the state store's group-commit writer in the same order as in memory, and a
// finished episode only counts towards its group once its result is
// committed, so a batch never contains a result a crash could lose.
package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// Sentinel errors, mapped to gRPC codes at the service boundary.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrFailedPrecond = errors.New("failed precondition")
	ErrUnavailable   = errors.New("unavailable")
)

// FieldError is a request problem naming the bad field. Precondition marks
// a field the request may not have in the mesh as configured (a pool that
// does not exist, an override its provider refuses) rather than one that is
// wrong anywhere: FailedPrecondition instead of InvalidArgument.
type FieldError struct {
	Field        string
	Msg          string
	Precondition bool
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, msg string) error { return &FieldError{Field: field, Msg: msg} }

// Clock tells the time; tests inject a clock they move by hand.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// RealClock is the wall clock.
var RealClock Clock = realClock{}

// leaser is what the scheduler needs from vmmanager (implemented by
// leasing.Manager).
type leaser interface {
	Acquire(ctx context.Context, pool, holder string, labels map[string]string, ec *pb.EnvConfig) (*pb.Lease, error)
	Renew(ctx context.Context, leaseID, token string, labels map[string]string) error
	Release(ctx context.Context, leaseID, token string) error
	TTL() time.Duration
	// Pools lists the pools, for StartRollout's check that VM episodes can
	// ever be leased.
	Pools(ctx context.Context) ([]*pb.Pool, error)
}

// Config tunes the scheduler.
type Config struct {
	// HeartbeatInterval is what runners are told to heartbeat at.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout: a runner silent this long is dropped and its
	// episodes requeued.
	HeartbeatTimeout time.Duration
	// LeaseBackoff is how long VM episodes wait after a failed acquire.
	LeaseBackoff time.Duration
	// DefaultAckTimeout applies when GetBatch has none.
	DefaultAckTimeout time.Duration
	// LeaseAhead is how many VMs may be leased ahead for queued desktop
	// episodes while every runner slot is busy, so that the next episode
	// starts without waiting for a VM when a slot frees.
	LeaseAhead int
	// AdoptGrace is how long the episodes of a runner whose stream broke
	// stay its own: a runner reconnecting within it re-adopts the episodes it
	// still runs (hello.running_episode_ids). After it they are requeued.
	// Negative: requeue at once.
	AdoptGrace time.Duration
	// TaskRoots confine RolloutSpec.task_source; nil refuses every task
	// source (inline tasks still work).
	TaskRoots *tasksource.Roots
	// MaxBatchBytes bounds a GetBatch answer (the server's send limit): a
	// batch past it is refused before it is reserved. 0: no bound.
	MaxBatchBytes int
}

// Engine is the scheduler.
type Engine struct {
	cfg    Config
	clock  Clock
	log    *zap.Logger
	store  *state.Store
	leases leaser // nil when no vmmanager is configured
	m      *Metrics

	// bg is the context of background work (lease calls, pollers); cancelled
	// by Close.
	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	kick chan struct{}

	mu           sync.Mutex
	modelVersion int64
	// versionUnsaved: modelVersion is not committed yet (its commit may
	// have failed); versionPrev is the version it replaced.
	versionUnsaved bool
	versionPrev    int64
	rollouts       map[string]*rollout
	order          []*rollout // creation order
	episodes       map[string]*episode
	runners        map[string]*Runner
	runnerOrder    []*Runner
	orphans        map[string]*episode // running episodes whose runner's stream broke
	rr             int                 // round-robin start among runners
	changed        chan struct{}
	doneSeq        int64
	draining       bool
	leaseHoldoff   time.Time
	leasedAhead    int // queued episodes holding or acquiring a lease
}

// New builds an engine over a store and restores what the store holds:
// episodes that were running when the coordinator died are requeued with
// attempt+1 and their leases released. leases may be nil.
func New(ctx context.Context, cfg Config, clock Clock, log *zap.Logger, store *state.Store, leases leaser, m *Metrics) (*Engine, error) {
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = 4 * cfg.HeartbeatInterval
	}
	if cfg.LeaseBackoff <= 0 {
		cfg.LeaseBackoff = time.Second
	}
	if cfg.AdoptGrace == 0 {
		cfg.AdoptGrace = cfg.HeartbeatTimeout
	}
	if cfg.DefaultAckTimeout <= 0 {
		cfg.DefaultAckTimeout = 5 * time.Minute
	}
	if clock == nil {
		clock = RealClock
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	bg, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg: cfg, clock: clock, log: log, store: store, leases: leases, m: m,
		bg: bg, cancel: cancel,
		kick:     make(chan struct{}, 1),
		rollouts: map[string]*rollout{},
		episodes: map[string]*episode{},
		runners:  map[string]*Runner{},
		orphans:  map[string]*episode{},
		changed:  make(chan struct{}),
	}
	m.attach(e)
	if err := e.restore(ctx); err != nil {
		cancel()
		return nil, err
	}
	e.wg.Add(1)
	go e.dispatchLoop()
	return e, nil
}

// Run drives the periodic work (deadlines, silent runners, lease renewals,
// expired batches, service-mode polling) until ctx ends.
func (e *Engine) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.bg.Done():
			return
		case <-t.C:
			e.Sweep()
		}
	}
}

// Close stops background work. Running episodes stay RUNNING in the store
// and are requeued by the next start.
func (e *Engine) Close() {
	e.mu.Lock()
	for _, r := range e.runners {
		r.kill()
	}
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
}

// Drain stops dispatching new episodes and waits until running episodes
// finished or ctx ends; then it closes every Work stream.
func (e *Engine) Drain(ctx context.Context) error {
	e.mu.Lock()
	e.draining = true
	e.mu.Unlock()
	for {
		e.mu.Lock()
		busy := 0
		for _, r := range e.runners {
			busy += len(r.running)
		}
		ch := e.changed
		e.mu.Unlock()
		if busy == 0 {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			e.closeRunners()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	e.closeRunners()
	return nil
}

func (e *Engine) closeRunners() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.runners {
		r.kill()
	}
}

// ModelVersion is the version in force.
func (e *Engine) ModelVersion() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.modelVersion
}

// notify wakes GetBatch waiters and Drain. Call with mu held.
func (e *Engine) notify() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// poke asks the dispatcher to look for work.
func (e *Engine) poke() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// commitLogged submits ops whose failure can only be logged (the in-memory
// state stays right and the next write of the record carries it).
// storeErr is what a caller hears of a commit that failed: Unavailable,
// since a retry stores the change again, without the database's details,
// which are logged.
func storeErr(log *zap.Logger, what string, err error) error {
	if errors.Is(err, state.ErrClosed) {
		return fmt.Errorf("%s: coordinator closing: %w", what, ErrUnavailable)
	}
	log.Error("state commit failed", zap.String("what", what), zap.Error(err))
	return fmt.Errorf("%s: state not stored, retry: %w", what, ErrUnavailable)
}

func (e *Engine) persist(ops ...state.Op) {
	e.store.Submit(func(err error) {
		if err != nil && !errors.Is(err, state.ErrClosed) {
			e.log.Error("persist state", zap.Error(err))
		}
	}, ops...)
}
