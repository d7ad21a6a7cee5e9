// Package work is the runner's side of Coordinator.Work: it keeps the
// stream open (reconnecting with backoff), says hello, announces free
// slots, runs up to K assignments at once, heartbeats their progress,
// reports each result, obeys cancellations, and on drain stops taking work
// and finishes or hands back what it runs. Episodes outlive a broken
// stream: they keep running and are reported after the reconnect.
package work

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
)

// coordinatorClient is the coordinator client's Work;
// rolloutmeshv1.CoordinatorClient implements it.
type coordinatorClient interface {
	Work(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[rmv1.WorkRequest, rmv1.WorkResponse], error)
}

// Executor runs one assignment to its end within ctx and returns the
// episode in a terminal state. progress reports phase and steps.
type Executor func(ctx context.Context, a *rmv1.Assignment, progress func(phase string, steps int)) *rmv1.Episode

// Config configures the loop.
type Config struct {
	RunnerID string
	Slots    int
	EnvModes []string
	Address  string
	Version  string
	// Heartbeat is the interval until the coordinator's Welcome says
	// otherwise.
	Heartbeat time.Duration
	// BackoffMin and BackoffMax bound the reconnect backoff.
	BackoffMin, BackoffMax time.Duration
	// WelcomeTimeout bounds the wait for the coordinator's answer to hello.
	WelcomeTimeout time.Duration
	// HandBackMargin is how long before the drain deadline the loop stops
	// waiting for episodes and hands the rest back.
	HandBackMargin time.Duration
}

// Errors of Cancel.
var ErrNotRunning = errors.New("episode not running here")

// Loop is the Work stream client of one runner replica.
type Loop struct {
	client coordinatorClient
	cfg    Config
	exec   Executor
	clk    clock.Clock
	log    *zap.Logger

	root   context.Context // episodes live under it, not under a stream
	stop   context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup // episode goroutines
	wakeCh chan struct{}
	kickCh chan struct{} // pending grew while connected

	mu         sync.Mutex
	running    map[string]*slot
	pending    []*rmv1.WorkRequest // results and hand-backs not sent yet
	out        chan *rmv1.WorkRequest
	draining   bool
	connected  bool
	reconnects int64
	finished   int64
	failed     int64
	heartbeat  time.Duration
	startTime  time.Time
}

type slot struct {
	a        *rmv1.Assignment
	cancel   context.CancelCauseFunc
	phase    string
	steps    int32
	start    time.Time
	handBack bool
	reason   string
}

// New builds the loop; Start runs it.
func New(c coordinatorClient, cfg Config, exec Executor, clk clock.Clock, log *zap.Logger) *Loop {
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.BackoffMin <= 0 {
		cfg.BackoffMin = 500 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.WelcomeTimeout <= 0 {
		cfg.WelcomeTimeout = 30 * time.Second
	}
	if cfg.HandBackMargin <= 0 {
		cfg.HandBackMargin = 2 * time.Second
	}
	return &Loop{client: c, cfg: cfg, exec: exec, clk: clk, log: log,
		running: map[string]*slot{}, heartbeat: cfg.Heartbeat, wakeCh: make(chan struct{}, 1), kickCh: make(chan struct{}, 1), done: make(chan struct{})}
}

// Start runs the loop until Stop. ctx's values are kept, its cancellation
// is not: a SIGTERM drains through Drain instead of killing episodes.
func (l *Loop) Start(ctx context.Context) {
	l.root, l.stop = context.WithCancel(context.WithoutCancel(ctx))
	l.startTime = l.clk.Now()
	go l.connectLoop()
}

// connectLoop keeps a stream open until stopped.
func (l *Loop) connectLoop() {
	defer close(l.done)
	backoff := l.cfg.BackoffMin
	first := true
	for l.root.Err() == nil {
		if !first {
			l.mu.Lock()
			l.reconnects++
			l.mu.Unlock()
		}
		first = false
		welcomed, err := l.session(l.root)
		if l.root.Err() != nil {
			return
		}
		if welcomed {
			backoff = l.cfg.BackoffMin
		}
		l.log.Warn("work stream ended", zap.Error(err), zap.Duration("retry_in", backoff))
		// Jitter keeps a fleet of runners from reconnecting in lockstep.
		wait := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)+1))
		if clock.Sleep(l.root, l.clk, wait) != nil {
			return
		}
		backoff = min(backoff*2, l.cfg.BackoffMax)
	}
}

// session runs one stream until it breaks.
func (l *Loop) session(ctx context.Context) (welcomed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := l.client.Work(ctx)
	if err != nil {
		return false, fmt.Errorf("open work stream: %w", err)
	}
	l.mu.Lock()
	hello := &rmv1.RunnerHello{RunnerId: l.cfg.RunnerID, Slots: int32(l.cfg.Slots), EnvModes: l.cfg.EnvModes,
		Address: l.cfg.Address, Version: l.cfg.Version, RunningEpisodeIds: l.runningIDsLocked()}
	l.mu.Unlock()
	if err := stream.Send(&rmv1.WorkRequest{Msg: &rmv1.WorkRequest_Hello{Hello: hello}}); err != nil {
		return false, fmt.Errorf("send hello: %w", err)
	}
	welcome, err := l.recvWelcome(ctx, stream)
	if err != nil {
		return false, err
	}
	l.log.Info("connected to coordinator", zap.String("runner_id", welcome.GetRunnerId()))
	if hb := welcome.GetHeartbeatInterval().AsDuration(); hb > 0 {
		l.mu.Lock()
		l.heartbeat = hb
		l.mu.Unlock()
	}
	for _, id := range welcome.GetCancelEpisodeIds() {
		_ = l.Cancel(id, "coordinator no longer wants it")
	}

	out := make(chan *rmv1.WorkRequest, 4*l.cfg.Slots+16)
	l.mu.Lock()
	l.out = out
	l.connected = true
	backlog := l.pending
	l.pending = nil
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.connected = false
		l.out = nil
		// Whatever was queued but not sent is kept for the next stream.
		for {
			select {
			case m := <-out:
				if m.GetResult() != nil || m.GetHandBack() != nil {
					l.pending = append(l.pending, m)
				}
				continue
			default:
			}
			break
		}
		l.mu.Unlock()
	}()

	recvErr := make(chan error, 1)
	go func() { recvErr <- l.receive(ctx, stream) }()

	send := func(m *rmv1.WorkRequest) error {
		if err := stream.Send(m); err != nil {
			if m.GetResult() != nil || m.GetHandBack() != nil {
				l.mu.Lock()
				l.pending = append(l.pending, m)
				l.mu.Unlock()
			}
			return fmt.Errorf("send: %w", err)
		}
		return nil
	}
	for i, m := range backlog {
		if err := send(m); err != nil {
			l.mu.Lock()
			l.pending = append(l.pending, backlog[i+1:]...)
			l.mu.Unlock()
			return true, err
		}
	}
	if err := send(l.credit()); err != nil {
		return true, err
	}
	// Heartbeats keep their own schedule: a busy stream must not starve
	// them, or the coordinator would take the runner for dead.
	l.mu.Lock()
	nextBeat := l.clk.Now().Add(l.heartbeat)
	l.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case err := <-recvErr:
			return true, err
		case m := <-out:
			if err := send(m); err != nil {
				return true, err
			}
		case <-l.kickCh:
			// Results that did not fit the queue wait in pending.
			l.mu.Lock()
			backlog := l.pending
			l.pending = nil
			l.mu.Unlock()
			for i, m := range backlog {
				if err := send(m); err != nil {
					l.mu.Lock()
					l.pending = append(l.pending, backlog[i+1:]...)
					l.mu.Unlock()
					return true, err
				}
			}
		case <-l.clk.After(nextBeat.Sub(l.clk.Now())):
			if err := send(l.heartbeatMsg()); err != nil {
				return true, err
			}
			l.mu.Lock()
			nextBeat = l.clk.Now().Add(l.heartbeat)
			l.mu.Unlock()
		}
	}
}

func (l *Loop) recvWelcome(ctx context.Context, stream grpc.BidiStreamingClient[rmv1.WorkRequest, rmv1.WorkResponse]) (*rmv1.Welcome, error) {
	type res struct {
		m   *rmv1.WorkResponse
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := stream.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("wait for welcome: %w", r.err)
		}
		w := r.m.GetWelcome()
		if w == nil {
			return nil, fmt.Errorf("coordinator answered hello with %T, not a welcome", r.m.GetMsg())
		}
		return w, nil
	case <-l.clk.After(l.cfg.WelcomeTimeout):
		return nil, fmt.Errorf("no welcome within %s", l.cfg.WelcomeTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// receive handles the coordinator's messages until the stream breaks.
func (l *Loop) receive(ctx context.Context, stream grpc.BidiStreamingClient[rmv1.WorkRequest, rmv1.WorkResponse]) error {
	for {
		m, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("recv: %w", err)
		}
		switch msg := m.GetMsg().(type) {
		case *rmv1.WorkResponse_Assignment:
			l.assign(msg.Assignment)
		case *rmv1.WorkResponse_Cancel:
			if err := l.Cancel(msg.Cancel.GetEpisodeId(), msg.Cancel.GetReason()); err != nil {
				l.log.Info("cancel for an episode not running here", zap.String("episode_id", msg.Cancel.GetEpisodeId()))
			}
		case *rmv1.WorkResponse_Welcome:
			// A second welcome changes nothing.
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// assign starts an assignment in a free slot, or hands it back.
func (l *Loop) assign(a *rmv1.Assignment) {
	id := a.GetEpisode().GetEpisodeId()
	l.mu.Lock()
	switch {
	case id == "":
		l.mu.Unlock()
		l.log.Warn("assignment without episode id ignored")
		return
	case l.running[id] != nil:
		l.mu.Unlock()
		return // a duplicate: already running
	case l.draining || len(l.running) >= l.cfg.Slots:
		reason := "no free slot"
		if l.draining {
			reason = "runner draining"
		}
		l.enqueueLocked(&rmv1.WorkRequest{Msg: &rmv1.WorkRequest_HandBack{HandBack: &rmv1.HandBack{EpisodeId: id, Reason: reason}}})
		l.mu.Unlock()
		return
	}
	ctx := l.root
	var cancelDeadline context.CancelFunc = func() {}
	if dl := a.GetDeadline(); dl != nil && dl.IsValid() {
		ctx, cancelDeadline = context.WithDeadline(ctx, dl.AsTime())
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s := &slot{a: a, cancel: cancel, phase: "setup", start: l.clk.Now()}
	l.running[id] = s
	l.wg.Add(1)
	l.mu.Unlock()
	l.log.Info("episode assigned", zap.String("episode_id", id), zap.String("rollout_id", a.GetEpisode().GetRolloutId()))
	go func() {
		defer l.wg.Done()
		defer cancelDeadline()
		defer cancel(nil)
		ep := l.exec(ctx, a, func(phase string, steps int) {
			l.mu.Lock()
			s.phase, s.steps = phase, int32(steps)
			l.mu.Unlock()
		})
		l.complete(id, s, ep)
	}()
}

// complete reports a finished episode (or hands it back when draining cut
// it short) and announces the freed slot.
func (l *Loop) complete(id string, s *slot, ep *rmv1.Episode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running, id)
	if s.handBack {
		l.enqueueLocked(&rmv1.WorkRequest{Msg: &rmv1.WorkRequest_HandBack{HandBack: &rmv1.HandBack{EpisodeId: id, Reason: s.reason}}})
	} else {
		if ep == nil {
			ep = proto.Clone(s.a.GetEpisode()).(*rmv1.Episode)
			ep.Status = rmv1.EpisodeStatus_EPISODE_STATUS_FAILED
			ep.FailureReason = "runner_error"
		}
		if s.reason != "" && ep.GetStatus() == rmv1.EpisodeStatus_EPISODE_STATUS_ABORTED && ep.GetError() == "" {
			ep.Error = s.reason
		}
		ep.Recording = nil // the bytes went to storage; the result stays small
		l.finished++
		if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE {
			l.failed++
		}
		l.enqueueLocked(&rmv1.WorkRequest{Msg: &rmv1.WorkRequest_Result{Result: &rmv1.EpisodeResult{Episode: ep}}})
	}
	l.enqueueLocked(l.creditLocked())
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// enqueueLocked sends m on the live stream, or keeps results and
// hand-backs for the next one (credits and heartbeats are re-derived).
func (l *Loop) enqueueLocked(m *rmv1.WorkRequest) {
	keep := m.GetResult() != nil || m.GetHandBack() != nil
	if l.out != nil {
		select {
		case l.out <- m:
			return
		default:
		}
	}
	if keep {
		l.pending = append(l.pending, m)
		if l.out != nil {
			select {
			case l.kickCh <- struct{}{}:
			default:
			}
		}
	}
}

func (l *Loop) credit() *rmv1.WorkRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.creditLocked()
}

func (l *Loop) creditLocked() *rmv1.WorkRequest {
	free := l.cfg.Slots - len(l.running)
	if l.draining || free < 0 {
		free = 0
	}
	return &rmv1.WorkRequest{Msg: &rmv1.WorkRequest_Credit{Credit: &rmv1.Credit{FreeSlots: int32(free)}}}
}

func (l *Loop) heartbeatMsg() *rmv1.WorkRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	hb := &rmv1.Heartbeat{}
	for _, id := range l.runningIDsLocked() {
		s := l.running[id]
		hb.Episodes = append(hb.Episodes, &rmv1.EpisodeProgress{EpisodeId: id, Steps: s.steps, Phase: s.phase})
	}
	return &rmv1.WorkRequest{Msg: &rmv1.WorkRequest_Heartbeat{Heartbeat: hb}}
}

func (l *Loop) runningIDsLocked() []string {
	ids := make([]string, 0, len(l.running))
	for id := range l.running {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Cancel stops a running episode; it is reported ABORTED.
func (l *Loop) Cancel(id, reason string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.running[id]
	if s == nil {
		return ErrNotRunning
	}
	if reason == "" {
		reason = "cancelled"
	}
	s.reason = reason
	s.cancel(errors.New(reason))
	return nil
}

// Drain stops taking work, waits for running episodes until shortly
// before ctx's deadline, hands the rest back, and stops the loop once the
// results and hand-backs are sent (or ctx ends).
func (l *Loop) Drain(ctx context.Context) error {
	l.mu.Lock()
	l.draining = true
	l.enqueueLocked(l.creditLocked())
	l.mu.Unlock()

	wait := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, dl.Add(-l.cfg.HandBackMargin))
		defer cancel()
	}
	for {
		l.mu.Lock()
		n := len(l.running)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-l.wakeCh:
			continue
		case <-wait.Done():
		}
		// Out of time: hand back what still runs.
		l.mu.Lock()
		for _, s := range l.running {
			s.handBack, s.reason = true, "runner draining"
			s.cancel(errors.New("runner draining"))
		}
		l.mu.Unlock()
		break
	}
	waited := make(chan struct{})
	go func() { l.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
	}
	// Give the sender a moment to flush results and hand-backs.
	for {
		l.mu.Lock()
		flushed := (l.out == nil || len(l.out) == 0) && (len(l.pending) == 0 || !l.connected)
		l.mu.Unlock()
		if flushed {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.clk.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Stop ends the loop and every episode, and waits for them.
func (l *Loop) Stop() {
	if l.stop == nil {
		return
	}
	l.stop()
	<-l.done
	l.wg.Wait()
}

// Status is a snapshot of the replica.
type Status struct {
	RunnerID         string
	Slots, Busy      int
	Connected        bool
	Draining         bool
	StartTime        time.Time
	Finished, Failed int64
	Reconnects       int64
	Version          string
}

// Status returns the replica's state.
func (l *Loop) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Status{RunnerID: l.cfg.RunnerID, Slots: l.cfg.Slots, Busy: len(l.running), Connected: l.connected,
		Draining: l.draining, StartTime: l.startTime, Finished: l.finished, Failed: l.failed, Reconnects: l.reconnects, Version: l.cfg.Version}
}

// Episodes lists the running episodes, oldest first.
func (l *Loop) Episodes() []*rmv1.RunningEpisode {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*rmv1.RunningEpisode
	for id, s := range l.running {
		e := s.a.GetEpisode()
		out = append(out, &rmv1.RunningEpisode{
			EpisodeId: id, RolloutId: e.GetRolloutId(), TaskId: e.GetTaskId(), EnvMode: s.a.GetTask().GetEnvMode(),
			Phase: s.phase, Steps: s.steps, StartTime: timestamppb.New(s.start), VmId: s.a.GetLease().GetVmId(),
			Endpoint: s.a.GetLease().GetEndpoint(), Deadline: s.a.GetDeadline(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetStartTime().AsTime().Before(out[j].GetStartTime().AsTime()) })
	return out
}
