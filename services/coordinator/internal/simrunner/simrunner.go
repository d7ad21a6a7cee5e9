// Package simrunner is a runner that speaks the real Work stream to a real
// coordinator but finishes episodes without running them: each assignment
// is answered with a scripted reward after an optional delay. The
// coordinator's tests and its benchmark use it where a full runner (model,
// environment, storage) would only add noise; it is a client of the real
// server, not a stand-in for it.
package simrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Options script a simulated runner.
type Options struct {
	ID    string
	Slots int
	// Modes are the env modes announced; empty: all.
	Modes []string
	// Score gives the reward of an episode; nil scores 1.
	Score func(a *pb.Assignment) float64
	// Status gives the terminal status; nil is DONE.
	Status func(a *pb.Assignment) pb.EpisodeStatus
	// Delay is how long an episode "runs".
	Delay func(a *pb.Assignment) time.Duration
	// Finish, when set, changes each result before it is sent.
	Finish func(a *pb.Assignment, ep *pb.Episode)
	// Hold keeps assignments running forever (a runner that will die).
	Hold bool
	// Running is reported in the hello, as after a reconnect.
	Running []string
	// Heartbeat overrides the interval the coordinator asks for.
	Heartbeat time.Duration
}

// Runner is a connected simulated runner.
type Runner struct {
	opts   Options
	stream pb.Coordinator_WorkClient
	cancel context.CancelFunc
	sendMu sync.Mutex
	done   chan struct{}

	mu       sync.Mutex
	inflight map[string]bool
	assigned []*pb.Assignment
	results  []*pb.Episode
	cancels  []*pb.CancelAssignment
	welcome  *pb.Welcome
	err      error
	changed  chan struct{}
}

// Start connects a simulated runner over cc and runs it until Stop or the
// stream ends.
func Start(cc grpc.ClientConnInterface, opts Options) (*Runner, error) {
	if opts.Slots <= 0 {
		opts.Slots = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := pb.NewCoordinatorClient(cc).Work(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &Runner{opts: opts, stream: stream, cancel: cancel, done: make(chan struct{}),
		inflight: map[string]bool{}, changed: make(chan struct{})}
	if err := r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_Hello{Hello: &pb.RunnerHello{
		RunnerId: opts.ID, Slots: int32(opts.Slots), EnvModes: opts.Modes, RunningEpisodeIds: opts.Running}}}); err != nil {
		cancel()
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, err
	}
	r.welcome = resp.GetWelcome()
	if r.welcome == nil {
		cancel()
		return nil, errors.New("first answer is not a welcome")
	}
	if err := r.credit(); err != nil {
		cancel()
		return nil, err
	}
	go r.loop()
	go r.heartbeat(ctx)
	return r, nil
}

// Welcome is the coordinator's answer to the hello.
func (r *Runner) Welcome() *pb.Welcome { return r.welcome }

func (r *Runner) send(m *pb.WorkRequest) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.stream.Send(m)
}

func (r *Runner) credit() error {
	r.mu.Lock()
	free := r.opts.Slots - len(r.inflight)
	r.mu.Unlock()
	return r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_Credit{Credit: &pb.Credit{FreeSlots: int32(max(free, 0))}}})
}

func (r *Runner) heartbeat(ctx context.Context) {
	every := r.opts.Heartbeat
	if every <= 0 {
		every = r.welcome.GetHeartbeatInterval().AsDuration()
	}
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	beats := int32(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Like a real runner, say how far each running episode is: one
			// step per heartbeat.
			beats++
			hb := &pb.Heartbeat{}
			r.mu.Lock()
			for id := range r.inflight {
				hb.Episodes = append(hb.Episodes, &pb.EpisodeProgress{EpisodeId: id, Steps: beats, Phase: "acting"})
			}
			r.mu.Unlock()
			if r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_Heartbeat{Heartbeat: hb}}) != nil {
				return
			}
		}
	}
}

func (r *Runner) loop() {
	defer close(r.done)
	for {
		resp, err := r.stream.Recv()
		if err != nil {
			r.mu.Lock()
			if !errors.Is(err, io.EOF) {
				r.err = err
			}
			r.notifyLocked()
			r.mu.Unlock()
			return
		}
		switch m := resp.Msg.(type) {
		case *pb.WorkResponse_Assignment:
			a := m.Assignment
			r.mu.Lock()
			r.assigned = append(r.assigned, a)
			r.inflight[a.Episode.EpisodeId] = true
			r.notifyLocked()
			r.mu.Unlock()
			if !r.opts.Hold {
				go r.finish(a)
			}
		case *pb.WorkResponse_Cancel:
			r.mu.Lock()
			r.cancels = append(r.cancels, m.Cancel)
			wasRunning := r.inflight[m.Cancel.EpisodeId]
			delete(r.inflight, m.Cancel.EpisodeId)
			r.notifyLocked()
			r.mu.Unlock()
			if wasRunning {
				_ = r.credit()
			}
		}
	}
}

func (r *Runner) finish(a *pb.Assignment) {
	if r.opts.Delay != nil {
		if d := r.opts.Delay(a); d > 0 {
			time.Sleep(d)
		}
	}
	r.mu.Lock()
	if !r.inflight[a.Episode.EpisodeId] { // cancelled meanwhile
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	ep := &pb.Episode{
		EpisodeId: a.Episode.EpisodeId, RolloutId: a.Episode.RolloutId, GroupId: a.Episode.GroupId,
		TaskId: a.Episode.TaskId, Attempt: a.Episode.Attempt, Status: pb.EpisodeStatus_EPISODE_STATUS_DONE,
		Score: 1, ModelVersions: []int64{a.ModelVersion}, NumSteps: 5, EndTime: timestamppb.Now(),
	}
	if r.opts.Score != nil {
		ep.Score = r.opts.Score(a)
	}
	if r.opts.Status != nil {
		ep.Status = r.opts.Status(a)
	}
	if ep.Status != pb.EpisodeStatus_EPISODE_STATUS_DONE {
		ep.FailureReason = "simulated"
		ep.Error = fmt.Sprintf("%s attempt %d", ep.EpisodeId, ep.Attempt)
	}
	if r.opts.Finish != nil {
		r.opts.Finish(a, ep)
	}
	if r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_Result{Result: &pb.EpisodeResult{Episode: ep}}}) != nil {
		return // still ours, as for a real runner that lost its stream
	}
	r.mu.Lock()
	delete(r.inflight, a.Episode.EpisodeId)
	r.results = append(r.results, ep)
	r.notifyLocked()
	r.mu.Unlock()
	_ = r.credit()
}

// Complete finishes a held assignment (or an episode re-adopted after a
// reconnect) now with the given status and score.
func (r *Runner) Complete(episodeID string, st pb.EpisodeStatus, score float64) error {
	r.mu.Lock()
	var a *pb.Assignment
	for _, x := range r.assigned {
		if x.Episode.EpisodeId == episodeID {
			a = x
		}
	}
	delete(r.inflight, episodeID)
	r.mu.Unlock()
	var attempt int32 // unknown for an episode re-adopted after a reconnect
	if a != nil {
		attempt = a.Episode.Attempt
	}
	ep := &pb.Episode{EpisodeId: episodeID, Attempt: attempt, Status: st, Score: score, EndTime: timestamppb.Now()}
	if err := r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_Result{Result: &pb.EpisodeResult{Episode: ep}}}); err != nil {
		return err
	}
	return r.credit()
}

// HandBack gives an assignment back unfinished.
func (r *Runner) HandBack(episodeID string) error {
	r.mu.Lock()
	delete(r.inflight, episodeID)
	r.mu.Unlock()
	if err := r.send(&pb.WorkRequest{Msg: &pb.WorkRequest_HandBack{HandBack: &pb.HandBack{EpisodeId: episodeID, Reason: "test"}}}); err != nil {
		return err
	}
	return r.credit()
}

func (r *Runner) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// Assigned returns the assignments received so far.
func (r *Runner) Assigned() []*pb.Assignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*pb.Assignment(nil), r.assigned...)
}

// Inflight returns the episodes the runner holds and has not reported.
func (r *Runner) Inflight() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id := range r.inflight {
		out = append(out, id)
	}
	return out
}

// Results returns the results reported so far.
func (r *Runner) Results() []*pb.Episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*pb.Episode(nil), r.results...)
}

// Cancels returns the cancellations received so far.
func (r *Runner) Cancels() []*pb.CancelAssignment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*pb.CancelAssignment(nil), r.cancels...)
}

// Err is the error that ended the stream, if any.
func (r *Runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// WaitFor waits until cond (called with the runner's view) holds or ctx ends.
func (r *Runner) WaitFor(ctx context.Context, cond func(assigned []*pb.Assignment, results []*pb.Episode, cancels []*pb.CancelAssignment) bool) error {
	for {
		r.mu.Lock()
		ok := cond(r.assigned, r.results, r.cancels)
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Done is closed when the stream has ended.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Stop closes the stream as a dying runner would (no goodbye).
func (r *Runner) Stop() {
	r.cancel()
	<-r.done
}
