package scheduler

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

var runnerIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,256}$`)

// queueScan bounds how far into a rollout's queue the dispatcher looks for
// an episode a runner can take (env modes, VM availability).
const queueScan = 256

func (e *Engine) dispatchLoop() {
	defer e.wg.Done()
	for {
		select {
		case <-e.bg.Done():
			return
		case <-e.kick:
		}
		e.dispatch()
	}
}

// dispatch hands queued episodes to runners with free slots, one episode per
// runner per round so that load spreads across runners.
func (e *Engine) dispatch() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.draining || len(e.runnerOrder) == 0 {
		return
	}
	now := e.clock.Now()
	var recs []state.Episode
	n := len(e.runnerOrder)
	for {
		progress := false
		for i := 0; i < n; i++ {
			rn := e.runnerOrder[(e.rr+i)%n]
			if rn.free() <= 0 {
				continue
			}
			ep := e.pickLocked(rn, now)
			if ep == nil {
				continue
			}
			if rec, ok := e.assignLocked(ep, rn, now); ok {
				recs = append(recs, rec)
			}
			progress = true
		}
		e.rr++
		if !progress {
			break
		}
	}
	if len(recs) > 0 {
		e.persist(state.PutEpisodes(recs...))
	}
	e.leaseAheadLocked(now)
}

// leaseAheadLocked leases VMs for the next queued desktop episodes while
// every runner slot is busy: when a slot frees, its episode starts at once
// instead of waiting for a VM to be found and reset.
func (e *Engine) leaseAheadLocked(now time.Time) {
	if e.leases == nil || e.cfg.LeaseAhead <= 0 || e.leasedAhead >= e.cfg.LeaseAhead || now.Before(e.leaseHoldoff) || len(e.runnerOrder) == 0 {
		return
	}
	for _, rn := range e.runnerOrder {
		if rn.free() > 0 {
			return // a free slot with nothing to run: no backlog to get ahead of
		}
	}
	for _, r := range e.order {
		if !r.ready || !r.active() {
			continue
		}
		admit := -1
		for i, ep := range r.queue {
			if e.leasedAhead >= e.cfg.LeaseAhead || i >= queueScan {
				break
			}
			if !ep.needsVM() || ep.ahead {
				continue
			}
			if !ep.g.started {
				if admit < 0 {
					admit = 0
					if e.admitLocked(r) {
						admit = 1
					}
				}
				if admit == 0 {
					break
				}
			}
			ep.ahead = true
			e.leasedAhead++
			e.acquireAheadAsync(ep, ep.attempt)
		}
	}
}

func (e *Engine) acquireAheadAsync(ep *episode, attempt int32) {
	pool := ep.g.r.spec.VmPool
	labels := ep.leaseLabels()
	ec := mergeEnv(ep.g.r.spec.EnvConfig, ep.g.task().EnvConfig)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t0 := time.Now()
		l, err := e.leases.Acquire(e.bg, pool, ep.id, labels, ec)
		e.m.leaseWait.Observe(time.Since(t0).Seconds())
		e.mu.Lock()
		defer e.mu.Unlock()
		if !ep.ahead || ep.attempt != attempt || ep.phase != phaseQueued {
			// Dispatched meanwhile (it then acquired its own) or gone.
			if err == nil {
				e.releaseLease(l)
			}
			return
		}
		if err != nil {
			ep.ahead = false
			e.leasedAhead--
			if status.Code(err) != codes.DeadlineExceeded {
				e.leaseHoldoff = e.clock.Now().Add(e.cfg.LeaseBackoff)
			}
			return
		}
		ep.lease = l
		ep.renewedAt = e.clock.Now()
		e.persist(state.PutEpisodes(ep.record())) // so a restart can release it
	}()
}

// dropAheadLocked ends an episode's lease-ahead state; its lease, if any,
// stays on the episode for the caller to use or release.
func (e *Engine) dropAheadLocked(ep *episode) {
	if ep.ahead {
		ep.ahead = false
		e.leasedAhead--
	}
}

// pickLocked takes the next episode for a runner from the rollout furthest
// behind its fair share (stride scheduling by priority).
func (e *Engine) pickLocked(rn *Runner, now time.Time) *episode {
	var best *rollout
	bestIdx := -1
	for _, r := range e.order {
		if !r.ready || !r.active() || len(r.queue) == 0 {
			continue
		}
		if best != nil && r.pass >= best.pass {
			continue
		}
		if i := e.candidateLocked(r, rn, now); i >= 0 {
			best, bestIdx = r, i
		}
	}
	if best == nil {
		return nil
	}
	ep := best.queue[bestIdx]
	if bestIdx == 0 {
		best.queue[0] = nil
		best.queue = best.queue[1:]
	} else {
		best.queue = append(best.queue[:bestIdx], best.queue[bestIdx+1:]...)
	}
	best.pass += 1 / float64(best.spec.Priority)
	return ep
}

func (e *Engine) candidateLocked(r *rollout, rn *Runner, now time.Time) int {
	admit := -1 // admission decided once per call
	for i, ep := range r.queue {
		if i >= queueScan {
			break
		}
		if !rn.accepts(ep.envMode()) {
			continue
		}
		if ep.needsVM() && (e.leases == nil || now.Before(e.leaseHoldoff)) {
			// Without vmmanager (restored by a coordinator restarted
			// without --vmmanager) a VM episode waits for one.
			continue
		}
		if !ep.g.started {
			if admit < 0 {
				admit = 0
				if e.admitLocked(r) {
					admit = 1
				}
			}
			if admit == 0 {
				continue
			}
		}
		return i
	}
	return -1
}

// admitLocked says whether r may start another group. Sync: at most one
// batch of groups beyond those consumed. Async: AReaL's bound, started ≤
// (max_staleness + versions since start + 1) × batch groups, so that no
// episode starts more than max_staleness versions behind the consumer.
func (e *Engine) admitLocked(r *rollout) bool {
	bg := r.batchGroups()
	switch r.spec.Mode {
	case pb.RolloutMode_ROLLOUT_MODE_ASYNC:
		lag := int(e.modelVersion - r.startVersion)
		return r.startedGroups-r.retired < (int(r.spec.MaxStaleness)+lag+1)*bg
	default:
		return r.startedGroups < r.consumed+r.retired+bg
	}
}

func (e *Engine) minPass() float64 {
	first, min := true, 0.0
	for _, r := range e.order {
		if r.active() && len(r.queue) > 0 && (first || r.pass < min) {
			first, min = false, r.pass
		}
	}
	return min
}

// assignLocked puts an episode on a runner: directly when it needs no VM,
// after a lease otherwise. It returns the record to persist when the
// episode is now RUNNING.
func (e *Engine) assignLocked(ep *episode, rn *Runner, now time.Time) (state.Episode, bool) {
	r := ep.g.r
	if !ep.g.started {
		ep.g.started = true
		r.startedGroups++
	}
	r.queued--
	r.running++
	ep.runner = rn
	ep.runnerID = rn.id
	rn.running[ep.id] = ep
	rn.credit--
	ep.startTime = now
	ep.deadline = now.Add(r.spec.EpisodeTimeout.AsDuration())
	ep.modelVersion = e.modelVersion
	e.m.dispatchLatency.Observe(now.Sub(ep.queuedAt).Seconds())
	e.dropAheadLocked(ep)
	if ep.needsVM() && ep.lease == nil {
		ep.phase = phaseLeasing
		e.acquireAsync(ep, rn, ep.attempt)
		return state.Episode{}, false
	}
	ep.phase = phaseRunning
	ep.status = pb.EpisodeStatus_EPISODE_STATUS_RUNNING
	rn.send(e.assignment(ep))
	return ep.record(), true
}

func (e *Engine) assignment(ep *episode) *pb.WorkResponse {
	r := ep.g.r
	task := ep.g.task()
	if task.EnvMode == "" || (task.EnvConfig == nil && r.spec.EnvConfig != nil) {
		// The runner reads the task alone: give it the rollout's defaults.
		task = proto.Clone(task).(*pb.Task)
		task.EnvMode = ep.envMode()
		task.EnvConfig = mergeEnv(r.spec.EnvConfig, task.EnvConfig)
	}
	a := &pb.Assignment{
		Episode:      ep.proto(),
		Task:         task,
		Agent:        r.spec.Agent,
		Deadline:     timestamppb.New(ep.deadline),
		ModelVersion: ep.modelVersion,
	}
	a.Episode.Status = pb.EpisodeStatus_EPISODE_STATUS_RUNNING
	if ep.lease != nil {
		l := proto.Clone(ep.lease).(*pb.Lease)
		l.Token = "" // the coordinator renews and releases; runners never need it
		a.Lease = l
	}
	return &pb.WorkResponse{Msg: &pb.WorkResponse_Assignment{Assignment: a}}
}

func mergeEnv(base, over *pb.EnvConfig) *pb.EnvConfig {
	if base == nil {
		return over
	}
	out := proto.Clone(base).(*pb.EnvConfig)
	if over == nil {
		return out
	}
	if over.Snapshot != "" {
		out.Snapshot = over.Snapshot
	}
	out.Proxy = out.Proxy || over.Proxy
	out.FixedIp = out.FixedIp || over.FixedIp
	for k, v := range over.Extra {
		if out.Extra == nil {
			out.Extra = map[string]string{}
		}
		out.Extra[k] = v
	}
	return out
}

// acquireAsync leases a VM for an episode whose runner slot is reserved.
func (e *Engine) acquireAsync(ep *episode, rn *Runner, attempt int32) {
	pool := ep.g.r.spec.VmPool
	labels := ep.leaseLabels()
	ec := mergeEnv(ep.g.r.spec.EnvConfig, ep.g.task().EnvConfig)
	id := ep.id
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t0 := time.Now()
		l, err := e.leases.Acquire(e.bg, pool, id, labels, ec)
		e.m.leaseWait.Observe(time.Since(t0).Seconds())
		e.mu.Lock()
		defer e.mu.Unlock()
		if ep.phase != phaseLeasing || ep.runner != rn || ep.attempt != attempt {
			// The episode moved on while we waited (runner gone, rollout
			// cancelled): give the VM straight back.
			if err == nil {
				e.releaseLease(l)
			}
			return
		}
		if err != nil {
			e.log.Warn("lease acquire failed", zap.String("episode_id", id), zap.String("pool", pool), zap.Error(err))
			e.detachLocked(ep)
			ep.runner = nil
			switch status.Code(err) {
			case codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.PermissionDenied, codes.Unimplemented:
				// The pool will never take this request (unknown pool, an
				// override the provider lacks): waiting cannot help.
				// Retrying or regenerating cannot help either: the group
				// fails now, with this as its reason.
				e.failForGoodLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_FAILED, &pb.Episode{FailureReason: "lease_refused", Error: status.Convert(err).Message()}, true)
			case codes.DeadlineExceeded:
				// No VM free in time: queue again and wait again, without
				// spending an attempt.
				e.requeueLocked(ep, false)
			default:
				// vmmanager down or failing: back off VM episodes a little.
				e.leaseHoldoff = e.clock.Now().Add(e.cfg.LeaseBackoff)
				e.requeueLocked(ep, false)
			}
			return
		}
		ep.lease = l
		ep.renewedAt = e.clock.Now()
		ep.phase = phaseRunning
		ep.status = pb.EpisodeStatus_EPISODE_STATUS_RUNNING
		e.persist(state.PutEpisodes(ep.record()))
		rn.send(e.assignment(ep))
	}()
}

// detachLocked takes a leasing or running episode off its runner and
// releases its lease.
func (e *Engine) detachLocked(ep *episode) {
	if ep.phase != phaseLeasing && ep.phase != phaseRunning {
		return
	}
	ep.g.r.running--
	if ep.runner != nil {
		delete(ep.runner.running, ep.id)
		if ep.phase == phaseLeasing {
			// The runner never saw this assignment: its slot is free
			// again without a new credit.
			ep.runner.credit++
		}
	}
	e.unorphanLocked(ep)
	e.releaseLocked(ep)
}

func (e *Engine) unorphanLocked(ep *episode) {
	if !ep.orphaned.IsZero() {
		delete(e.orphans, ep.id)
		ep.orphaned = time.Time{}
	}
}

func (e *Engine) releaseLocked(ep *episode) {
	if ep.lease != nil {
		e.releaseLease(ep.lease)
		ep.lease = nil
	}
}

func (e *Engine) releaseLease(l *pb.Lease) {
	if e.leases == nil || l == nil {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		// A vmmanager that is restarting cannot take the release: retry
		// until it can, or until the lease has run out its TTL and the
		// vmmanager reclaims the VM itself. Without the retry the VM stays
		// held for a whole TTL after a vmmanager restart.
		giveUp := time.Now().Add(e.leases.TTL())
		for wait := releaseRetryMin; ; wait = min(2*wait, releaseRetryMax) {
			// Not tied to e.bg: a release should still go out while shutting
			// down; the manager bounds it with its own timeout.
			err := e.leases.Release(context.WithoutCancel(e.bg), l.LeaseId, l.Token)
			if err == nil {
				return
			}
			if !retryableRelease(err) || time.Now().Add(wait).After(giveUp) || e.bg.Err() != nil {
				e.log.Warn("lease release failed", zap.String("lease_id", l.LeaseId), zap.String("vm_id", l.VmId), zap.Error(err))
				return
			}
			e.log.Info("lease release failed, retrying", zap.String("lease_id", l.LeaseId), zap.String("vm_id", l.VmId), zap.Duration("wait", wait), zap.Error(err))
			select {
			case <-e.bg.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// Backoff between attempts to release a lease.
const (
	releaseRetryMin = 250 * time.Millisecond
	releaseRetryMax = 5 * time.Second
)

// retryableRelease reports release errors a later attempt can fix: the
// vmmanager being down or slow.
func retryableRelease(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Unknown:
		return true
	}
	return false
}

// requeueLocked puts a detached episode back at the front of its rollout's
// queue; nextAttempt counts the attempt as spent.
func (e *Engine) requeueLocked(ep *episode, nextAttempt bool) {
	r := ep.g.r
	e.dropAheadLocked(ep)
	ep.runner = nil
	ep.runnerID = ""
	ep.lease = nil
	ep.phase = phaseQueued
	ep.status = pb.EpisodeStatus_EPISODE_STATUS_QUEUED
	ep.queuedAt = e.clock.Now()
	ep.deadline = time.Time{}
	if nextAttempt {
		ep.attempt++
		r.requeued++
	}
	r.queued++
	r.queue = append([]*episode{ep}, r.queue...)
	e.persist(state.PutEpisodes(ep.record()))
	e.poke()
}

// failAttemptLocked handles a detached episode whose attempt ended badly:
// requeued while attempts remain, failed for good after max_attempts.
func (e *Engine) failAttemptLocked(ep *episode, st pb.EpisodeStatus, res *pb.Episode) {
	r := ep.g.r
	if !r.active() {
		ep.phase = phaseTerminal
		ep.status = pb.EpisodeStatus_EPISODE_STATUS_ABORTED
		ep.result = res
		r.aborted++
		e.persist(state.PutEpisodes(ep.record()))
		return
	}
	if ep.attempt < r.spec.MaxAttempts {
		e.requeueLocked(ep, true)
		return
	}
	e.failForGoodLocked(ep, st, res, false)
}

// failForGoodLocked ends an episode as failed. hopeless marks a failure no
// rerun can fix (UNSUPPORTED, a refused lease): its group is not
// regenerated.
func (e *Engine) failForGoodLocked(ep *episode, st pb.EpisodeStatus, res *pb.Episode, hopeless bool) {
	r := ep.g.r
	ep.g.hopeless = ep.g.hopeless || hopeless
	ep.phase = phaseTerminal
	ep.status = st
	ep.result = res
	r.failed++
	r.outcomes.failed(res)
	e.persist(state.PutEpisodes(ep.record()))
	e.log.Info("episode failed", zap.String("rollout_id", r.id), zap.String("episode_id", ep.id), zap.Int32("attempt", ep.attempt), zap.String("status", st.String()),
		zap.String("failure_reason", res.GetFailureReason()), zap.String("error", res.GetError()))
	e.groupProgressLocked(ep.g)
}

// groupProgressLocked settles a group after one of its episodes ended:
// complete once group_size episodes are DONE (extra ones cancelled), or
// regenerated / failed when it can no longer become whole.
func (e *Engine) groupProgressLocked(g *group) {
	if g.state != groupPending {
		return
	}
	r := g.r
	done := len(g.doneEpisodes())
	if done >= r.groupSize() {
		g.state = groupComplete
		e.doneSeq++
		g.doneSeq = e.doneSeq
		r.complete = append(r.complete, g)
		var recs []state.Episode
		for _, ep := range g.episodes {
			if ep.phase == phaseQueued || ep.phase == phaseLeasing || ep.phase == phaseRunning {
				e.removeFromQueueLocked(ep)
				e.abortLocked(ep, "redundant")
				recs = append(recs, ep.record())
			}
		}
		ops := []state.Op{state.PutGroups(g.record())}
		if len(recs) > 0 {
			ops = append(ops, state.PutEpisodes(recs...))
		}
		e.persist(ops...)
		e.notify()
		e.maybeFinishLocked(r)
		return
	}
	live := 0
	for _, ep := range g.episodes {
		if ep.phase != phaseTerminal {
			live++
		}
	}
	if done+live >= r.groupSize() {
		return
	}
	if r.active() && r.spec.OnGroupFailure == pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REGENERATE &&
		!g.hopeless && g.failedAttempts() < r.groupSize()*int(r.spec.MaxAttempts) {
		// A fresh episode (new id, attempt 1) keeps the group whole. The
		// cap, max_attempts per episode the group needs counted over all its
		// episodes, stops a task that always fails from running again and
		// again: with group_size 1 nothing is regenerated, as the episode's
		// own attempts already spent the budget.
		g.regens++
		ep := r.newEpisode(g, e.clock.Now())
		e.episodes[ep.id] = ep
		r.queue = append([]*episode{ep}, r.queue...)
		e.persist(state.PutRollout(r.record()), state.PutGroups(g.record()), state.PutEpisodes(ep.record()))
		e.poke()
		return
	}
	g.state = groupFailed
	r.retired++
	var recs []state.Episode
	for _, ep := range g.episodes {
		if ep.phase == phaseQueued || ep.phase == phaseLeasing || ep.phase == phaseRunning {
			e.removeFromQueueLocked(ep)
			e.abortLocked(ep, "group failed")
			recs = append(recs, ep.record())
		}
	}
	ops := []state.Op{state.PutGroups(g.record())}
	if len(recs) > 0 {
		ops = append(ops, state.PutEpisodes(recs...))
	}
	e.persist(ops...)
	e.log.Info("group failed", zap.String("rollout_id", r.id), zap.String("group_id", g.id), zap.String("reason", g.lastFailure()))
	e.notify()
	e.poke() // a failed group frees admission room
	e.maybeFinishLocked(r)
}

func (e *Engine) removeFromQueueLocked(ep *episode) {
	if ep.phase != phaseQueued {
		return
	}
	q := ep.g.r.queue
	for i, x := range q {
		if x == ep {
			ep.g.r.queue = append(q[:i], q[i+1:]...)
			return
		}
	}
}

// Connect registers a runner from its hello. A runner reconnecting under the
// same id replaces its old stream, whose episodes are requeued; episodes the
// runner says it still runs are not re-adopted and are listed for it to
// stop.
func (e *Engine) Connect(h *pb.RunnerHello) (*Runner, *pb.Welcome, error) {
	switch {
	case h == nil:
		return nil, nil, fieldErr("hello", "the first message must be a hello")
	case !runnerIDPattern.MatchString(h.RunnerId):
		return nil, nil, fieldErr("hello.runner_id", "must be 1-256 characters of [A-Za-z0-9._:@-]")
	case h.Slots < 1 || h.Slots > 4096:
		return nil, nil, fieldErr("hello.slots", "must be between 1 and 4096")
	case len(h.RunningEpisodeIds) > 4096:
		return nil, nil, fieldErr("hello.running_episode_ids", "at most 4096")
	case len(h.EnvModes) > 16:
		return nil, nil, fieldErr("hello.env_modes", "at most 16")
	case len(h.Address) > 256:
		return nil, nil, fieldErr("hello.address", "must be at most 256 bytes")
	case len(h.Version) > 256:
		return nil, nil, fieldErr("hello.version", "must be at most 256 bytes")
	}
	for i, m := range h.EnvModes {
		if m == "" || !tasksource.ValidEnvMode(m) {
			return nil, nil, fieldErr(fmt.Sprintf("hello.env_modes[%d]", i), "must be one of desktop, osworld, math, py, rag, web")
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.draining {
		return nil, nil, fmt.Errorf("coordinator draining: %w", ErrUnavailable)
	}
	if old, ok := e.runners[h.RunnerId]; ok {
		e.disconnectLocked(old, "runner reconnected", true)
	}
	rn := newRunner(h.RunnerId, int(h.Slots), h.EnvModes, e.clock.Now())
	e.runners[rn.id] = rn
	e.runnerOrder = append(e.runnerOrder, rn)
	w := &pb.Welcome{RunnerId: rn.id, HeartbeatInterval: durationpb.New(e.cfg.HeartbeatInterval)}
	adopted := 0
	for _, id := range h.RunningEpisodeIds {
		ep, ok := e.orphans[id]
		if !ok || ep.runnerID != rn.id || ep.phase != phaseRunning {
			// Requeued, finished or never ours: the runner stops it.
			w.CancelEpisodeIds = append(w.CancelEpisodeIds, id)
			continue
		}
		e.unorphanLocked(ep)
		ep.runner = rn
		rn.running[ep.id] = ep
		adopted++
	}
	e.log.Info("runner connected", zap.String("runner_id", rn.id), zap.Int32("slots", h.Slots), zap.Int("adopted", adopted))
	return rn, w, nil
}

// Credit records a runner's free slots (absolute).
func (e *Engine) Credit(rn *Runner, free int32) {
	e.mu.Lock()
	rn.lastSeen = e.clock.Now()
	rn.credit = max(0, min(int(free), rn.slots))
	e.mu.Unlock()
	e.poke()
}

// Heartbeat records that a runner is alive, and the progress of its
// episodes, which the next lease renewal shows on their VMs' leases.
func (e *Engine) Heartbeat(rn *Runner, hb *pb.Heartbeat) {
	e.mu.Lock()
	rn.lastSeen = e.clock.Now()
	for _, p := range hb.GetEpisodes() {
		if ep := rn.running[p.GetEpisodeId()]; ep != nil {
			ep.steps, ep.stepPhase = p.GetSteps(), truncate(p.GetPhase(), maxPhaseBytes)
		}
	}
	e.mu.Unlock()
}

// Result takes a runner's report of an episode's end. Reports for episodes
// the runner no longer holds (cancelled, requeued, a past attempt) are
// ignored, which is what makes each result count once.
func (e *Engine) Result(rn *Runner, res *pb.Episode) error {
	if res == nil {
		return fieldErr("result.episode", "is required")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rn.lastSeen = e.clock.Now()
	ep, ok := e.episodes[res.EpisodeId]
	if ok && ep.runner == nil && !ep.orphaned.IsZero() && ep.runnerID == rn.id && ep.phase == phaseRunning {
		// Finished while its runner was disconnected (or the coordinator
		// restarting): the result arrives on the runner's new stream.
		e.unorphanLocked(ep)
		ep.runner = rn
		rn.running[ep.id] = ep
	}
	if !ok || ep.runner != rn || ep.phase != phaseRunning || (res.Attempt != 0 && res.Attempt != ep.attempt) {
		e.m.staleResults.Inc()
		return nil
	}
	res = proto.Clone(res).(*pb.Episode)
	if field, msg := checkResult(res); msg != "" {
		// A failed attempt, not a broken stream: the runner keeps its other
		// episodes, and a runner that always reports this runs out of
		// attempts instead of reconnecting for ever.
		e.log.Warn("bad episode result", zap.String("episode_id", ep.id), zap.String("runner_id", rn.id), zap.String("field", field), zap.String("problem", msg))
		res = &pb.Episode{EpisodeId: res.EpisodeId, Status: pb.EpisodeStatus_EPISODE_STATUS_FAILED,
			FailureReason: "bad_result", Error: "result." + field + ": " + msg}
	}
	res.RunnerId = rn.id
	if res.VmId == "" && ep.lease != nil {
		res.VmId = ep.lease.VmId
	}
	e.detachLocked(ep)
	if res.EndTime == nil {
		res.EndTime = timestamppb.New(e.clock.Now())
	}
	if res.StartTime == nil {
		res.StartTime = timestamppb.New(ep.startTime)
	}
	switch res.Status {
	case pb.EpisodeStatus_EPISODE_STATUS_DONE:
		ep.phase = phaseFinishing
		ep.status = pb.EpisodeStatus_EPISODE_STATUS_DONE
		ep.result = res
		// The result counts only once it is committed: a crash before the
		// commit reruns the episode instead of losing a handed-out result.
		e.store.Submit(func(err error) { e.resultCommitted(ep, err) }, state.PutEpisodes(ep.record()))
	case pb.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED:
		ep.runner = nil
		e.failForGoodLocked(ep, res.Status, res, true)
	case pb.EpisodeStatus_EPISODE_STATUS_FAILED, pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT, pb.EpisodeStatus_EPISODE_STATUS_ABORTED:
		ep.result = res
		ep.runner = nil
		e.failAttemptLocked(ep, res.Status, res)
	default:
		res.FailureReason = "bad_result_status"
		ep.runner = nil
		e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_FAILED, res)
	}
	e.poke()
	return nil
}

func (e *Engine) resultCommitted(ep *episode, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ep.phase != phaseFinishing {
		return
	}
	r := ep.g.r
	if err != nil {
		e.log.Error("store episode result", zap.String("episode_id", ep.id), zap.Error(err))
		e.requeueLocked(ep, true)
		return
	}
	ep.phase = phaseTerminal
	ep.doneAt = e.clock.Now()
	r.done++
	if ep.result.Score >= 0.5 {
		r.successes++
	}
	r.outcomes.done(ep.result)
	r.finishTimes = append(r.finishTimes, ep.doneAt)
	if len(r.finishTimes) > maxThroughputPoint {
		r.finishTimes = append(r.finishTimes[:0], r.finishTimes[len(r.finishTimes)/2:]...)
	}
	e.m.episodesDone.Inc()
	e.groupProgressLocked(ep.g)
	e.notify()
}

// HandBack takes back an unfinished assignment (runner draining); the
// attempt is not counted against the episode.
func (e *Engine) HandBack(rn *Runner, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rn.lastSeen = e.clock.Now()
	ep, ok := e.episodes[id]
	if !ok || ep.runner != rn || (ep.phase != phaseRunning && ep.phase != phaseLeasing) {
		return
	}
	e.detachLocked(ep)
	if !ep.g.r.active() {
		e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_ABORTED, nil)
		return
	}
	e.requeueLocked(ep, false)
}

// Disconnect is called when a runner's stream ends.
func (e *Engine) Disconnect(rn *Runner, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.disconnectLocked(rn, why, true)
}

// disconnectLocked drops a runner. With adopt, its running episodes wait
// AdoptGrace for it to reconnect (a broken stream); otherwise (a silent
// runner) they are requeued at once.
func (e *Engine) disconnectLocked(rn *Runner, why string, adopt bool) {
	rn.kill()
	if e.runners[rn.id] != rn {
		return
	}
	delete(e.runners, rn.id)
	for i, x := range e.runnerOrder {
		if x == rn {
			e.runnerOrder = append(e.runnerOrder[:i], e.runnerOrder[i+1:]...)
			break
		}
	}
	requeued, orphaned := 0, 0
	now := e.clock.Now()
	for _, ep := range rn.running {
		if ep.phase == phaseRunning && adopt && e.cfg.AdoptGrace > 0 {
			// The runner may only have lost its stream: keep the episode
			// (and its lease) for it until the grace ends.
			delete(rn.running, ep.id)
			ep.runner = nil
			ep.orphaned = now
			e.orphans[ep.id] = ep
			orphaned++
			continue
		}
		wasRunning := ep.phase == phaseRunning
		e.detachLocked(ep)
		if wasRunning {
			e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_FAILED, &pb.Episode{FailureReason: "runner_lost", Error: why})
		} else {
			e.requeueLocked(ep, false)
		}
		requeued++
	}
	e.log.Info("runner disconnected", zap.String("runner_id", rn.id), zap.String("reason", why), zap.Int("requeued", requeued), zap.Int("orphaned", orphaned))
	e.notify()
	e.poke()
}

// Sweep does the periodic work: drops silent runners, times out episodes
// past their deadline, renews leases of episodes whose runner heartbeats,
// returns expired batches and pokes the dispatcher.
func (e *Engine) Sweep() {
	type renewal struct {
		ep     *episode
		lease  *pb.Lease
		labels map[string]string
	}
	var renew []renewal
	e.mu.Lock()
	now := e.clock.Now()
	for _, rn := range append([]*Runner(nil), e.runnerOrder...) {
		if now.Sub(rn.lastSeen) > e.cfg.HeartbeatTimeout {
			e.disconnectLocked(rn, "heartbeat timeout", false)
			continue
		}
		for _, ep := range rn.running {
			if ep.phase != phaseRunning {
				continue
			}
			if now.After(ep.deadline) {
				rn.send(&pb.WorkResponse{Msg: &pb.WorkResponse_Cancel{Cancel: &pb.CancelAssignment{EpisodeId: ep.id, Reason: "deadline"}}})
				e.detachLocked(ep)
				ep.runner = nil
				e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT, &pb.Episode{FailureReason: "deadline", Error: "episode attempt passed its deadline"})
				continue
			}
			if ep.lease != nil && e.leases != nil && now.Sub(ep.renewedAt) >= e.leases.TTL()/3 {
				ep.renewedAt = now
				renew = append(renew, renewal{ep, ep.lease, ep.progressLabels()})
			}
		}
	}
	for _, ep := range e.orphans {
		switch {
		case now.After(ep.deadline):
			e.detachLocked(ep)
			e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT, &pb.Episode{FailureReason: "deadline", Error: "episode attempt passed its deadline"})
		case now.Sub(ep.orphaned) > e.cfg.AdoptGrace:
			e.detachLocked(ep)
			e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_FAILED, &pb.Episode{FailureReason: "runner_lost", Error: "runner did not come back"})
		case ep.lease != nil && e.leases != nil && now.Sub(ep.renewedAt) >= e.leases.TTL()/3:
			ep.renewedAt = now
			renew = append(renew, renewal{ep, ep.lease, ep.progressLabels()})
		}
	}
	for _, r := range e.order {
		e.expireBatchesLocked(r, now)
		if e.leasedAhead == 0 || e.leases == nil {
			continue
		}
		for _, ep := range r.queue {
			if ep.lease != nil && now.Sub(ep.renewedAt) >= e.leases.TTL()/3 {
				ep.renewedAt = now
				renew = append(renew, renewal{ep, ep.lease, nil})
			}
		}
	}
	e.mu.Unlock()
	for _, x := range renew {
		e.renewAsync(x.ep, x.lease, x.labels)
	}
	e.poke()
}

func (e *Engine) renewAsync(ep *episode, l *pb.Lease, labels map[string]string) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		err := e.leases.Renew(e.bg, l.LeaseId, l.Token, labels)
		if err == nil {
			return
		}
		code := status.Code(err)
		if code != codes.NotFound && code != codes.PermissionDenied {
			// Transient: the next sweep tries again well within the TTL.
			e.log.Warn("lease renew failed", zap.String("episode_id", ep.id), zap.String("lease_id", l.LeaseId), zap.Error(err))
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if ep.lease != l {
			return
		}
		if ep.phase == phaseQueued { // leased ahead: just forget it
			ep.lease = nil
			e.dropAheadLocked(ep)
			return
		}
		if ep.phase != phaseRunning {
			return
		}
		// The VM is gone from under the episode: stop it and run it again.
		e.log.Warn("lease lost", zap.String("episode_id", ep.id), zap.String("lease_id", l.LeaseId), zap.Error(err))
		ep.lease = nil
		rn := ep.runner
		if rn != nil {
			rn.send(&pb.WorkResponse{Msg: &pb.WorkResponse_Cancel{Cancel: &pb.CancelAssignment{EpisodeId: ep.id, Reason: "lease lost"}}})
		}
		e.detachLocked(ep)
		ep.runner = nil
		e.failAttemptLocked(ep, pb.EpisodeStatus_EPISODE_STATUS_FAILED, &pb.Episode{FailureReason: "lease_lost"})
	}()
}
