package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
)

// batch is a set of whole groups handed out together, reserved for the
// caller until acked or until it expires and its groups are handed out again.
type batch struct {
	id      string
	groups  []*group
	expire  time.Time
	acked   bool
	unsaved bool // acked in memory, the ack not yet committed
	expired bool
	dropped int32
}

func (b *batch) record(r *rollout) state.Batch {
	ids := make([]string, len(b.groups))
	for i, g := range b.groups {
		ids[i] = g.id
	}
	return state.Batch{ID: b.id, RolloutID: r.id, GroupIDs: ids, ExpireTime: b.expire.UnixNano(), Acked: b.acked, Dropped: b.dropped}
}

// BatchRequest is a validated GetBatch.
type BatchRequest struct {
	RolloutID        string
	BatchSize        int
	Timeout          time.Duration
	AckTimeout       time.Duration
	DropZeroVariance bool
	DropStale        bool
}

// GetBatch blocks until req.BatchSize episodes in whole finished groups are
// ready (fewer at the very end of a rollout), the timeout passes (an empty
// answer), or ctx ends.
func (e *Engine) GetBatch(ctx context.Context, req BatchRequest) (*pb.GetBatchResponse, error) {
	if req.Timeout <= 0 {
		req.Timeout = 60 * time.Second
	}
	if req.AckTimeout <= 0 {
		req.AckTimeout = e.cfg.DefaultAckTimeout
	}
	start := time.Now()
	var dropped int32 // across waits: drops are final even if no batch follows
	timer := time.NewTimer(req.Timeout)
	defer timer.Stop()
	for {
		e.mu.Lock()
		r, ok := e.rollouts[req.RolloutID]
		if !ok || !r.ready {
			e.mu.Unlock()
			return nil, fmt.Errorf("rollout %s: %w", req.RolloutID, ErrNotFound)
		}
		want := req.BatchSize
		if want == 0 {
			want = r.groupSize()
		}
		if want%r.groupSize() != 0 {
			e.mu.Unlock()
			return nil, fieldErr("batch_size", fmt.Sprintf("must be a multiple of the group size %d", r.groupSize()))
		}
		now := e.clock.Now()
		e.expireBatchesLocked(r, now)
		resp, done, n, err := e.buildBatchLocked(r, want/r.groupSize(), req, now)
		dropped += n
		if err != nil {
			e.mu.Unlock()
			return nil, err
		}
		if resp != nil {
			resp.DroppedGroups = dropped
			b := r.batches[resp.BatchId]
			ops := []state.Op{state.PutBatch(b.record(r))}
			recs := make([]state.Group, 0, len(b.groups))
			for _, g := range b.groups {
				recs = append(recs, g.record())
			}
			ops = append(ops, state.PutGroups(recs...))
			ch := make(chan error, 1)
			e.store.Submit(func(err error) { ch <- err }, ops...)
			e.mu.Unlock()
			// The hand-out is durable before the caller sees it, so an ack
			// after a coordinator restart still finds its batch.
			if err := <-ch; err != nil {
				return nil, fmt.Errorf("store batch: %w", err)
			}
			e.m.batchWait.Observe(time.Since(start).Seconds())
			return resp, nil
		}
		if done {
			v := e.modelVersion
			e.mu.Unlock()
			return &pb.GetBatchResponse{RolloutDone: true, ModelVersion: v, DroppedGroups: dropped}, nil
		}
		ch := e.changed
		v := e.modelVersion
		e.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return &pb.GetBatchResponse{ModelVersion: v, DroppedGroups: dropped}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// buildBatchLocked takes up to want complete groups (dropping the filtered
// ones for good, counted in ndropped). It hands out a batch when it has want
// groups, or fewer when the rollout will produce no more and no handed-out
// batch can come back; done says nothing will ever come.
//
// A batch whose answer would pass MaxBatchBytes is refused, its groups left
// waiting: handed out, it could not be sent, and it would come back after
// its ack timeout to fail again. Before that, it sheds the episode fields
// storage also keeps (omitFields); most such batches then fit.
func (e *Engine) buildBatchLocked(r *rollout, want int, req BatchRequest, now time.Time) (resp *pb.GetBatchResponse, done bool, ndropped int32, err error) {
	var picked, dropped []*group
	rest := r.complete[:0:0]
	for _, g := range r.complete {
		if len(picked) == want {
			rest = append(rest, g)
			continue
		}
		eps := chosen(g)
		switch {
		case req.DropZeroVariance && zeroVariance(eps):
			dropped = append(dropped, g)
		case req.DropStale && e.stale(r, eps):
			dropped = append(dropped, g)
		default:
			picked = append(picked, g)
		}
	}
	if len(dropped) > 0 {
		recs := make([]state.Group, len(dropped))
		for i, g := range dropped {
			g.state = groupDropped
			r.retired++
			recs[i] = g.record()
		}
		e.persist(state.PutGroups(recs...))
		e.log.Info("groups dropped", zap.String("rollout_id", r.id), zap.Int("groups", len(dropped)))
		e.poke() // dropped groups free admission room
	}
	ndropped = int32(len(dropped))
	// More groups may still come from running episodes or from an
	// outstanding batch that expires unacked.
	more := r.active()
	for _, b := range r.batches {
		if !b.acked && !b.expired {
			more = true
		}
	}
	if len(picked) < want && (more || len(picked) == 0) {
		// Not enough yet: keep the picked groups waiting, in order.
		r.complete = append(picked, rest...)
		return nil, !more && len(r.complete) == 0, ndropped, nil
	}
	groups := make([]*pb.EpisodeGroup, len(picked))
	eps := make([][]*episode, len(picked))
	size := batchHeaderBytes
	for i, g := range picked {
		eg := &pb.EpisodeGroup{GroupId: g.id, TaskId: g.task().Id}
		var sum float64
		eps[i] = chosen(g)
		for _, ep := range eps[i] {
			p := ep.proto()
			eg.Episodes = append(eg.Episodes, p)
			sum += p.Score
		}
		eg.MeanReward = sum / float64(len(eg.Episodes))
		groups[i] = eg
		size += protowire.SizeBytes(proto.Size(eg)) + 1
	}
	if max := e.cfg.MaxBatchBytes; max > 0 && size > max {
		// Refused, the groups would wait at the head of the queue and fail
		// every GetBatch of this size: first they shed the fields storage
		// also keeps.
		if size = omitFields(groups, max); size <= max {
			e.m.groupsTrimmed.Add(float64(len(groups)))
			e.log.Warn("batch handed out without some episode fields",
				zap.String("rollout_id", r.id), zap.Int("groups", len(groups)),
				zap.Strings("omitted_fields", groups[0].OmittedFields), zap.Int("bytes", size))
		} else {
			r.complete = append(picked, rest...)
			msg := fmt.Sprintf("the batch's %d groups take %d MiB even without the episode fields %v, more than the %d MiB an answer carries; ask for a smaller batch_size",
				len(picked), size>>20, groups[0].OmittedFields, max>>20)
			if len(picked) == 1 {
				msg = fmt.Sprintf("group %s takes %d MiB even without the episode fields %v, more than the %d MiB an answer carries; read its episodes from storage",
					picked[0].id, size>>20, groups[0].OmittedFields, max>>20)
			}
			return nil, false, ndropped, &FieldError{Field: "batch_size", Precondition: true, Msg: msg}
		}
	}
	r.complete = rest
	b := &batch{id: newID("b-"), groups: picked, expire: now.Add(req.AckTimeout), dropped: ndropped}
	r.batches[b.id] = b
	resp = &pb.GetBatchResponse{BatchId: b.id, ModelVersion: e.modelVersion, Groups: groups}
	for i, g := range picked {
		g.state = groupHandedOut
		g.batchID = b.id
		for _, ep := range eps[i] {
			e.m.staleness.Observe(float64(e.modelVersion - ep.modelVersion))
		}
	}
	return resp, false, ndropped, nil
}

// batchHeaderBytes bounds a GetBatch answer's fields besides its groups.
const batchHeaderBytes = 256

// omissible are the episode fields a group too large for one answer goes
// out without, in this order: those the trainer already has (the agent's
// system prompt, the task's instruction) first, then the largest a runner
// reports. Storage keeps every one of them.
var omissible = []struct {
	name  string
	clear func(*pb.Episode)
}{
	{"system_prompt", func(ep *pb.Episode) { ep.SystemPrompt = "" }},
	{"instruction", func(ep *pb.Episode) { ep.Instruction = "" }},
	{"evaluator_details_json", func(ep *pb.Episode) { ep.EvaluatorDetailsJson = "" }},
	{"final_answer", func(ep *pb.Episode) { ep.FinalAnswer = "" }},
	{"error", func(ep *pb.Episode) { ep.Error = "" }},
	{"labels", func(ep *pb.Episode) { ep.Labels = nil }},
}

// omitFields clears fields of every episode of groups, in omissible's
// order, until a batch of them takes at most max bytes, names them in each
// group's OmittedFields and returns the batch's size.
func omitFields(groups []*pb.EpisodeGroup, max int) int {
	size := func() int {
		n := batchHeaderBytes
		for _, g := range groups {
			n += protowire.SizeBytes(proto.Size(g)) + 1
		}
		return n
	}
	n := size()
	for _, f := range omissible {
		if n <= max {
			break
		}
		for _, g := range groups {
			for _, ep := range g.Episodes {
				f.clear(ep)
			}
			g.OmittedFields = append(g.OmittedFields, f.name)
		}
		n = size()
	}
	return n
}

// chosen are the group_size DONE episodes a group is handed out with: the
// first to finish.
func chosen(g *group) []*episode {
	eps := g.doneEpisodes()
	sort.SliceStable(eps, func(i, j int) bool {
		ti, tj := eps[i].result.GetEndTime().AsTime(), eps[j].result.GetEndTime().AsTime()
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return eps[i].seq < eps[j].seq
	})
	if n := g.r.groupSize(); len(eps) > n {
		eps = eps[:n]
	}
	return eps
}

func zeroVariance(eps []*episode) bool {
	for _, ep := range eps[1:] {
		if ep.result.Score != eps[0].result.Score {
			return false
		}
	}
	return len(eps) > 1
}

// stale reports whether an episode of the group started more than
// max_staleness versions behind the current version.
func (e *Engine) stale(r *rollout, eps []*episode) bool {
	for _, ep := range eps {
		if e.modelVersion-ep.modelVersion > int64(r.spec.MaxStaleness) {
			return true
		}
	}
	return false
}

// expireBatchesLocked returns the groups of unacked batches past their ack
// timeout to the front of the complete queue.
func (e *Engine) expireBatchesLocked(r *rollout, now time.Time) {
	var back []*group
	for _, b := range r.batches {
		if b.acked || b.expired || !now.After(b.expire) {
			continue
		}
		b.expired = true
		for _, g := range b.groups {
			if g.state == groupHandedOut && g.batchID == b.id {
				g.state = groupComplete
				g.batchID = ""
				back = append(back, g)
			}
		}
		e.log.Info("batch expired", zap.String("rollout_id", r.id), zap.String("batch_id", b.id))
	}
	if len(back) == 0 {
		return
	}
	sort.Slice(back, func(i, j int) bool { return back[i].doneSeq < back[j].doneSeq })
	recs := make([]state.Group, len(back))
	for i, g := range back {
		recs[i] = g.record()
	}
	e.persist(state.PutGroups(recs...))
	r.complete = append(back, r.complete...)
	e.notify()
}

// ReturnBatch gives a batch's groups back to the queue at once, as its
// expiry would: for a batch the server could not complete (its
// trajectories), which the caller never saw and so cannot ack. Returning
// an acked, expired or unknown batch does nothing.
func (e *Engine) ReturnBatch(rolloutID, batchID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.rollouts[rolloutID]
	if !ok {
		return
	}
	b, ok := r.batches[batchID]
	if !ok || b.acked || b.expired {
		return
	}
	now := e.clock.Now()
	b.expire = now
	e.expireBatchesLocked(r, now.Add(time.Nanosecond))
}

// AckBatch consumes a batch for good. Acking twice is fine; acking a batch
// whose groups were handed out again after it expired is not.
func (e *Engine) AckBatch(ctx context.Context, rolloutID, batchID string) error {
	e.mu.Lock()
	r, ok := e.rollouts[rolloutID]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("rollout %s: %w", rolloutID, ErrNotFound)
	}
	b, ok := r.batches[batchID]
	if !ok {
		e.mu.Unlock()
		return fmt.Errorf("batch %s: %w", batchID, ErrNotFound)
	}
	if b.acked && !b.unsaved {
		e.mu.Unlock()
		return nil
	}
	if !b.acked {
		if err := e.ackLocked(r, b); err != nil {
			e.mu.Unlock()
			return err
		}
	}
	// Memory changed before the commit: until the commit succeeds, every
	// ack, this one or a retry after its error, stores the batch again.
	b.unsaved = true
	recs := make([]state.Group, len(b.groups))
	for i, g := range b.groups {
		recs[i] = g.record()
	}
	ch := make(chan error, 1)
	e.store.Submit(func(err error) {
		if err == nil {
			e.mu.Lock()
			b.unsaved = false
			e.mu.Unlock()
		}
		ch <- err
	}, state.PutBatch(b.record(r)), state.PutGroups(recs...))
	e.notify()
	e.mu.Unlock()
	e.poke() // sync admission may open
	select {
	case err := <-ch:
		if err != nil {
			return storeErr(e.log, "store ack", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ackLocked consumes batch b of rollout r in memory.
func (e *Engine) ackLocked(r *rollout, b *batch) error {
	if b.expired {
		for _, g := range b.groups {
			if g.state != groupComplete {
				return fmt.Errorf("batch %s expired and its groups were handed out again: %w", b.id, ErrFailedPrecond)
			}
		}
		in := map[*group]bool{}
		for _, g := range b.groups {
			in[g] = true
		}
		rest := r.complete[:0]
		for _, g := range r.complete {
			if !in[g] {
				rest = append(rest, g)
			}
		}
		r.complete = rest
	}
	b.acked = true
	for _, g := range b.groups {
		g.state = groupConsumed
		g.batchID = b.id
	}
	r.consumed += len(b.groups)
	return nil
}

// SetModelVersion records a new model version: greater than the current
// one and at most MaxVersionStep above it, or, with reset, any version in
// range. A reset moves the start version of every running rollout by the
// same amount, so that async admission keeps each rollout's version lag.
//
// Memory changes before the commit: while it has not succeeded, the same
// version again (the caller's retry after the error) stores it again.
func (e *Engine) SetModelVersion(ctx context.Context, v int64, reset bool) (prev int64, err error) {
	e.mu.Lock()
	prev = e.modelVersion
	retry := e.versionUnsaved && v == e.modelVersion
	if retry {
		prev = e.versionPrev
	} else {
		if err := checkVersion(v, prev, reset); err != nil {
			e.mu.Unlock()
			return prev, err
		}
		e.modelVersion = v
		e.versionPrev = prev
	}
	e.versionUnsaved = true
	ops := []state.Op{state.PutModelVersion(v)}
	if reset || retry {
		// A retry does not know whether the failed commit was a reset's:
		// it stores the running rollouts again, unmoved.
		shift := int64(0)
		if !retry {
			shift = v - prev
		}
		for _, r := range e.order {
			if r.active() {
				r.startVersion += shift
				ops = append(ops, state.PutRollout(r.record()))
			}
		}
	}
	ch := make(chan error, 1)
	e.store.Submit(func(err error) {
		if err == nil {
			e.mu.Lock()
			e.versionUnsaved = false
			e.mu.Unlock()
		}
		ch <- err
	}, ops...)
	e.notify()
	e.mu.Unlock()
	e.poke() // async admission may open
	if err := <-ch; err != nil {
		return prev, storeErr(e.log, "store model version", err)
	}
	e.log.Info("model version updated", zap.Int64("version", v), zap.Int64("previous", prev), zap.Bool("reset", reset))
	return prev, nil
}

// CheckModelVersion checks that v would be accepted, before the gateway is
// asked to load it. retry says v is the version of an update whose commit
// has not succeeded: the gateway already serves it.
func (e *Engine) CheckModelVersion(v int64, reset bool) (retry bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.versionUnsaved && v == e.modelVersion {
		return true, nil
	}
	return false, checkVersion(v, e.modelVersion, reset)
}
