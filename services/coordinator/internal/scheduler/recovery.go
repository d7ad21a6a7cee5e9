package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// restore rebuilds the live state from the store after a start or a crash.
// Committed DONE results stand (never rerun); episodes that were running wait
// AdoptGrace for their runner to reconnect and claim them, and are then
// requeued with attempt+1 and their leases released; handed-out batches stay
// reserved until their ack timeout; acked groups never come back.
func (e *Engine) restore(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.modelVersion = snap.ModelVersion
	for _, rec := range snap.Rollouts {
		spec := &pb.RolloutSpec{}
		if err := proto.Unmarshal(rec.Spec, spec); err != nil {
			return fmt.Errorf("restore rollout %s: %w", rec.ID, err)
		}
		r := &rollout{
			id: rec.ID, spec: spec, state: pb.RolloutState(rec.State), ready: true,
			createTime: time.Unix(0, rec.CreateTime), errMsg: rec.Error, startVersion: rec.StartVersion,
			numEpisodes: rec.NumEpisodes, taskIDs: map[string]bool{}, byID: map[string]*group{}, batches: map[string]*batch{},
		}
		if rec.EndTime != 0 {
			r.endTime = time.Unix(0, rec.EndTime)
		}
		e.rollouts[r.id] = r
		e.order = append(e.order, r)
	}
	for _, rec := range snap.Tasks {
		r := e.rollouts[rec.RolloutID]
		if r == nil {
			continue
		}
		t := &pb.Task{}
		if err := proto.Unmarshal(rec.Task, t); err != nil {
			return fmt.Errorf("restore task %s/%d: %w", rec.RolloutID, rec.Idx, err)
		}
		r.tasks = append(r.tasks, t)
		r.taskIDs[t.Id] = true
	}
	for _, rec := range snap.Groups {
		r := e.rollouts[rec.RolloutID]
		if r == nil || int(rec.TaskIdx) >= len(r.tasks) {
			continue
		}
		g := &group{id: rec.ID, r: r, idx: int(rec.Idx), taskIdx: int(rec.TaskIdx), seed: rec.Seed,
			state: groupState(rec.State), batchID: rec.BatchID, regens: int(rec.Regens), doneSeq: rec.DoneSeq}
		r.groups = append(r.groups, g)
		r.byID[g.id] = g
		e.doneSeq = max(e.doneSeq, g.doneSeq)
	}
	var changed []state.Episode
	var front = map[*rollout][]*episode{}
	for _, rec := range snap.Episodes {
		r := e.rollouts[rec.RolloutID]
		if r == nil {
			continue
		}
		g := r.byID[rec.GroupID]
		if g == nil {
			continue
		}
		ep := &episode{id: rec.ID, g: g, seq: rec.Seq, attempt: rec.Attempt, status: pb.EpisodeStatus(rec.Status),
			modelVersion: rec.ModelVersion, queuedAt: now}
		if len(rec.Result) > 0 {
			ep.result = &pb.Episode{}
			if err := proto.Unmarshal(rec.Result, ep.result); err != nil {
				return fmt.Errorf("restore episode %s: %w", rec.ID, err)
			}
		}
		g.episodes = append(g.episodes, ep)
		e.episodes[ep.id] = ep
		if ep.status != pb.EpisodeStatus_EPISODE_STATUS_QUEUED || ep.attempt > 1 {
			g.started = true
		}
		switch ep.status {
		case pb.EpisodeStatus_EPISODE_STATUS_QUEUED:
			if rec.LeaseID != "" { // leased ahead by the previous run
				e.releaseLease(&pb.Lease{LeaseId: rec.LeaseID, Token: rec.LeaseToken})
			}
			ep.phase = phaseQueued
			r.queued++
			r.queue = append(r.queue, ep)
		case pb.EpisodeStatus_EPISODE_STATUS_RUNNING:
			if r.active() && e.cfg.AdoptGrace > 0 && rec.RunnerID != "" {
				// Its runner may still be going: it has AdoptGrace to
				// reconnect and claim it (keeping its lease), after which
				// the attempt is requeued like any lost one.
				ep.phase = phaseRunning
				ep.runnerID = rec.RunnerID
				ep.orphaned = now
				ep.startTime = now
				ep.deadline = now.Add(r.spec.EpisodeTimeout.AsDuration())
				if rec.LeaseID != "" {
					ep.lease = &pb.Lease{LeaseId: rec.LeaseID, Token: rec.LeaseToken}
				}
				e.orphans[ep.id] = ep
				r.running++
				break
			}
			// The coordinator that held it is gone and so is the rollout:
			// release the lease (the VM is reset) and run the attempt again.
			if rec.LeaseID != "" {
				e.releaseLease(&pb.Lease{LeaseId: rec.LeaseID, Token: rec.LeaseToken})
			}
			if r.active() {
				ep.phase = phaseQueued
				ep.status = pb.EpisodeStatus_EPISODE_STATUS_QUEUED
				ep.attempt++
				r.requeued++
				r.queued++
				front[r] = append(front[r], ep)
			} else {
				ep.phase = phaseTerminal
				ep.status = pb.EpisodeStatus_EPISODE_STATUS_ABORTED
				r.aborted++
			}
			changed = append(changed, ep.record())
		case pb.EpisodeStatus_EPISODE_STATUS_DONE:
			ep.phase = phaseTerminal
			if ep.result == nil {
				ep.result = &pb.Episode{}
			}
			r.done++
			if ep.result.Score >= 0.5 {
				r.successes++
			}
			r.outcomes.done(ep.result)
		case pb.EpisodeStatus_EPISODE_STATUS_ABORTED:
			ep.phase = phaseTerminal
			r.aborted++
		default:
			ep.phase = phaseTerminal
			r.failed++
			r.outcomes.failed(ep.result)
		}
	}
	for r, eps := range front {
		r.queue = append(eps, r.queue...)
	}
	for _, r := range e.order {
		sort.SliceStable(r.queue, func(i, j int) bool {
			// Requeued episodes of started groups first, then by group.
			si, sj := r.queue[i].g.started, r.queue[j].g.started
			if si != sj {
				return si
			}
			return r.queue[i].g.idx < r.queue[j].g.idx
		})
		for _, g := range r.groups {
			if g.started {
				r.startedGroups++
			}
			switch g.state {
			case groupComplete:
				r.complete = append(r.complete, g)
			case groupConsumed:
				r.consumed++
			case groupFailed, groupDropped:
				r.retired++
			}
		}
	}
	for _, rec := range snap.Batches {
		r := e.rollouts[rec.RolloutID]
		if r == nil {
			continue
		}
		b := &batch{id: rec.ID, expire: time.Unix(0, rec.ExpireTime), acked: rec.Acked, dropped: rec.Dropped}
		for _, id := range rec.GroupIDs {
			if g := r.byID[id]; g != nil {
				b.groups = append(b.groups, g)
			}
		}
		if !b.acked {
			// A batch whose groups were since handed out again or returned
			// has expired.
			for _, g := range b.groups {
				if g.batchID != b.id || g.state != groupHandedOut {
					b.expired = true
				}
			}
		}
		r.batches[b.id] = b
	}
	for _, r := range e.order {
		sort.Slice(r.complete, func(i, j int) bool { return r.complete[i].doneSeq < r.complete[j].doneSeq })
		e.expireBatchesLocked(r, now)
		// Settle groups whose last result committed just before the crash
		// but whose new state did not.
		for _, g := range r.groups {
			e.groupProgressLocked(g)
		}
		e.maybeFinishLocked(r)
		if r.active() && r.spec.Service {
			e.startPoller(r)
		}
	}
	if len(changed) > 0 {
		e.persist(state.PutEpisodes(changed...))
	}
	if len(snap.Rollouts) > 0 {
		e.log.Info("state restored", zap.Int("rollouts", len(snap.Rollouts)), zap.Int("episodes", len(snap.Episodes)),
			zap.Int("requeued", len(changed)), zap.Int("awaiting_runner", len(e.orphans)))
	}
	return nil
}

// startPoller starts service mode's task-source polling (seed 004's
// TaskLoader loop): new task ids become new groups.
func (e *Engine) startPoller(r *rollout) {
	stop := make(chan struct{})
	r.stopPoll = stop
	every := r.spec.PollInterval.AsDuration()
	src, idx := r.spec.TaskSource, r.spec.TaskIndex
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		failures := 0
		for {
			select {
			case <-stop:
				return
			case <-e.bg.Done():
				return
			case <-t.C:
			}
			lctx, cancel := context.WithTimeout(e.bg, loadTimeout)
			tasks, err := tasksource.Load(lctx, e.cfg.TaskRoots, src, idx)
			cancel()
			e.mu.Lock()
			if !r.active() {
				e.mu.Unlock()
				return
			}
			if err != nil {
				failures++
				e.log.Warn("task source poll failed", zap.String("rollout_id", r.id), zap.Int("failures", failures), zap.Error(err))
				if failures >= 5 {
					r.state = pb.RolloutState_ROLLOUT_STATE_FAILED
					r.errMsg = storableText("task source unreadable: " + err.Error())
					r.endTime = e.clock.Now()
					r.stopPoll = nil
					recs := e.abortAllLocked(r, "task source unreadable")
					e.persist(state.PutRollout(r.record()), state.PutEpisodes(recs...))
					e.notify()
					e.mu.Unlock()
					return
				}
				e.mu.Unlock()
				continue
			}
			failures = 0
			var fresh []*pb.Task
			skipped, firstField, firstProblem := 0, "", ""
			for _, task := range tasks {
				if r.taskIDs[task.Id] {
					continue
				}
				// Checked as StartRollout checks its tasks: a task that can
				// never run is left out (and looked at again next poll).
				if f, msg := checkRunnable(r.spec, task, e.leases != nil); msg != "" {
					if skipped == 0 {
						firstField, firstProblem = task.Id+"."+f, msg
					}
					skipped++
					continue
				}
				fresh = append(fresh, task)
			}
			if skipped > 0 {
				e.log.Warn("task source tasks skipped", zap.String("rollout_id", r.id), zap.Int("tasks", skipped),
					zap.String("first_field", firstField), zap.String("first_problem", firstProblem))
			}
			if len(fresh) > 0 && (len(r.groups)+len(fresh))*r.perGroup() <= MaxEpisodes {
				gs, eps := e.appendTasksLocked(r, fresh)
				e.persist(e.appendOps(r, fresh, gs, eps)...)
				e.log.Info("tasks added from source", zap.String("rollout_id", r.id), zap.Int("tasks", len(fresh)))
				e.poke()
			}
			e.mu.Unlock()
		}
	}()
}
