package scheduler

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// Bounds on what one rollout may ask for.
const (
	MaxGroupSize       = 1024
	MaxEpisodes        = 2_000_000
	MaxGroups          = 1_000_000
	MaxListedGroups    = 10_000 // GetRollout include_groups: within gRPC clients' default 4 MiB answer
	maxThroughputPoint = 4096
	// loadTimeout bounds reading a task source (StartRollout, each
	// service-mode poll); the size caps bound it too.
	loadTimeout = 2 * time.Minute
)

var rolloutIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// normalizeSpec checks a spec and fills its defaults. It returns the tasks
// the rollout starts with (inline, or loaded from task_source).
func normalizeSpec(ctx context.Context, spec *pb.RolloutSpec, haveVMs bool, roots *tasksource.Roots) ([]*pb.Task, error) {
	if spec == nil {
		return nil, fieldErr("spec", "is required")
	}
	if len(spec.Name) > 256 {
		return nil, fieldErr("spec.name", "must be at most 256 bytes")
	}
	if spec.EnvMode == "" {
		spec.EnvMode = "desktop"
	}
	if !tasksource.ValidEnvMode(spec.EnvMode) {
		return nil, fieldErr("spec.env_mode", "must be one of desktop, osworld, math, py, rag, web")
	}
	// The agent's action space depends on the tasks' env modes: checked
	// below, once the tasks are known. Its other fields are checked first.
	if err := checkAgent(spec.Agent, false); err != nil {
		return nil, err
	}
	// Token ids and logprobs are what a trainer needs from a rollout: on
	// unless the caller turned them off.
	if spec.Agent == nil {
		spec.Agent = &pb.AgentConfig{}
	}
	if spec.Agent.Logprobs == nil {
		spec.Agent.Logprobs = proto.Bool(true)
	}
	if spec.Agent.ReturnTokenIds == nil {
		spec.Agent.ReturnTokenIds = proto.Bool(true)
	}
	if f, msg := tasksource.CheckEnvConfig(spec.EnvConfig); msg != "" {
		return nil, fieldErr("spec.env_config."+f, msg)
	}
	if spec.GroupSize == 0 {
		spec.GroupSize = 1
	}
	if spec.GroupSize < 1 || spec.GroupSize > MaxGroupSize {
		return nil, fieldErr("spec.group_size", fmt.Sprintf("must be between 1 and %d", MaxGroupSize))
	}
	if spec.GroupRedundancy < 0 || spec.GroupRedundancy > spec.GroupSize {
		return nil, fieldErr("spec.group_redundancy", "must be between 0 and group_size")
	}
	if spec.MaxAttempts == 0 {
		spec.MaxAttempts = 3
	}
	if spec.MaxAttempts < 1 || spec.MaxAttempts > 100 {
		return nil, fieldErr("spec.max_attempts", "must be between 1 and 100")
	}
	if spec.OnGroupFailure == pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_UNSPECIFIED {
		spec.OnGroupFailure = pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REGENERATE
	}
	if _, ok := pb.GroupFailurePolicy_name[int32(spec.OnGroupFailure)]; !ok {
		return nil, fieldErr("spec.on_group_failure", "unknown policy")
	}
	if spec.Priority == 0 {
		spec.Priority = 1
	}
	if spec.Priority < 1 || spec.Priority > 100 {
		return nil, fieldErr("spec.priority", "must be between 1 and 100")
	}
	if spec.Mode == pb.RolloutMode_ROLLOUT_MODE_UNSPECIFIED {
		spec.Mode = pb.RolloutMode_ROLLOUT_MODE_SYNC
	}
	if _, ok := pb.RolloutMode_name[int32(spec.Mode)]; !ok {
		return nil, fieldErr("spec.mode", "must be SYNC or ASYNC")
	}
	if spec.MaxStaleness < 0 || spec.MaxStaleness > 1000 {
		return nil, fieldErr("spec.max_staleness", "must be between 0 and 1000")
	}
	if spec.NumEnvGroups < 0 || spec.NumEnvGroups > MaxGroups {
		return nil, fieldErr("spec.num_env_groups", fmt.Sprintf("must be between 0 and %d", MaxGroups))
	}
	partition := 0
	for i, p := range spec.NumGroupsPartition {
		// Checked here, before planGroups allocates a slot per group.
		if p < 0 || p > MaxGroups {
			return nil, fieldErr(fmt.Sprintf("spec.num_groups_partition[%d]", i), fmt.Sprintf("must be between 0 and %d", MaxGroups))
		}
		if partition += int(p); partition > MaxGroups {
			return nil, fieldErr("spec.num_groups_partition", fmt.Sprintf("sums to more than %d groups", MaxGroups))
		}
	}
	for i, tag := range spec.Tags {
		if len(tag) == 0 || len(tag) > 256 {
			return nil, fieldErr(fmt.Sprintf("spec.tags[%d]", i), "must be 1-256 bytes")
		}
	}
	if len(spec.Tags) > 64 {
		return nil, fieldErr("spec.tags", "at most 64 tags")
	}
	if len(spec.NumGroupsPartition) > 0 && len(spec.NumGroupsPartition) != len(spec.Tags) {
		return nil, fieldErr("spec.num_groups_partition", "must have one entry per tag")
	}
	if spec.PollInterval == nil {
		spec.PollInterval = durationpb.New(10 * time.Second)
	}
	if d := spec.PollInterval.AsDuration(); spec.PollInterval.CheckValid() != nil || d < time.Second || d > time.Hour {
		return nil, fieldErr("spec.poll_interval", "must be between 1s and 1h")
	}
	if spec.EpisodeTimeout == nil {
		spec.EpisodeTimeout = durationpb.New(time.Hour)
	}
	if d := spec.EpisodeTimeout.AsDuration(); spec.EpisodeTimeout.CheckValid() != nil || d < time.Second || d > 24*time.Hour {
		return nil, fieldErr("spec.episode_timeout", "must be between 1s and 24h")
	}
	if spec.VmPool == "" {
		spec.VmPool = "default"
	}
	if len(spec.VmPool) > 128 {
		return nil, fieldErr("spec.vm_pool", "must be at most 128 bytes")
	}
	if len(spec.Labels) > 64 {
		return nil, fieldErr("spec.labels", "at most 64 labels")
	}
	for k, v := range spec.Labels {
		if len(k) == 0 || len(k) > 128 || len(v) > 1024 {
			return nil, fieldErr("spec.labels", "keys 1-128 bytes, values at most 1024 bytes")
		}
	}
	if spec.Service && spec.TaskSource == "" {
		return nil, fieldErr("spec.task_source", "is required in service mode")
	}
	// Bounded even when inline tasks leave them unread: they are stored and
	// returned with the spec.
	if len(spec.TaskSource) > tasksource.MaxPathBytes {
		return nil, fieldErr("spec.task_source", fmt.Sprintf("must be at most %d bytes", tasksource.MaxPathBytes))
	}
	if len(spec.TaskIndex) > tasksource.MaxPathBytes {
		return nil, fieldErr("spec.task_index", fmt.Sprintf("must be at most %d bytes", tasksource.MaxPathBytes))
	}

	var tasks []*pb.Task
	switch {
	case len(spec.Tasks) > 0:
		if len(spec.Tasks) > tasksource.MaxTasks {
			return nil, fieldErr("spec.tasks", fmt.Sprintf("at most %d tasks", tasksource.MaxTasks))
		}
		seen := map[string]bool{}
		for i, t := range spec.Tasks {
			if f, msg := tasksource.CheckTask(t); msg != "" {
				return nil, fieldErr(fmt.Sprintf("spec.tasks[%d].%s", i, f), msg)
			}
			if seen[t.Id] {
				return nil, fieldErr(fmt.Sprintf("spec.tasks[%d].id", i), "duplicate task id "+t.Id)
			}
			seen[t.Id] = true
		}
		tasks = spec.Tasks
	case spec.TaskSource != "":
		var err error
		lctx, cancel := context.WithTimeout(ctx, loadTimeout)
		tasks, err = tasksource.Load(lctx, roots, spec.TaskSource, spec.TaskIndex)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fieldErr("spec.task_source", err.Error())
		}
		if len(tasks) == 0 && !spec.Service {
			return nil, fieldErr("spec.task_source", "holds no tasks")
		}
	default:
		return nil, fieldErr("spec.tasks", "give tasks inline or a spec.task_source")
	}
	desktop := false
	for _, t := range tasks {
		desktop = desktop || tasksource.NeedsVM(taskMode(spec, t))
	}
	if err := checkAgent(spec.Agent, desktop); err != nil {
		return nil, err
	}
	for i, t := range tasks {
		if f, msg := checkRunnable(spec, t, haveVMs); msg != "" {
			return nil, fieldErr(fmt.Sprintf("spec.tasks[%d].%s", i, f), msg)
		}
	}
	return tasks, nil
}

// taskMode is the env mode a task runs in: its own, or its rollout's.
func taskMode(spec *pb.RolloutSpec, t *pb.Task) string {
	if t.GetEnvMode() != "" {
		return t.GetEnvMode()
	}
	return spec.EnvMode
}

// checkRunnable checks what a valid task needs from its rollout and from
// the mesh, alike for StartRollout, AddTasks and service-mode polls: a
// desktop task needs a VM and a desktop action space, and its overrides
// merged with the rollout's must stay within what vmmanager takes. field is
// relative to the task.
func checkRunnable(spec *pb.RolloutSpec, t *pb.Task, haveVMs bool) (field, msg string) {
	if mode := taskMode(spec, t); tasksource.NeedsVM(mode) {
		if !haveVMs {
			return "env_mode", mode + " needs a VM but the coordinator has no --vmmanager"
		}
		if spec.GetAgent().GetActionSpace() == "tool_calls" {
			return "env_mode", mode + " needs a desktop action space but the rollout's agent uses tool_calls"
		}
	}
	if f, msg := tasksource.CheckMergedEnv(spec.GetEnvConfig(), t.GetEnvConfig()); msg != "" {
		return "env_config." + f, msg
	}
	return "", ""
}

// planGroups maps groups to task indexes following seed 003: one group per
// task by default; num_env_groups groups cycling through the tasks; or, with
// tags, num_groups_partition[i] groups (an even split when not given) drawn
// from the tasks carrying tags[i] (a task's tags or its domain).
func planGroups(spec *pb.RolloutSpec, tasks []*pb.Task) ([]int, error) {
	if len(spec.Tags) == 0 {
		n := int(spec.NumEnvGroups)
		if n == 0 {
			n = len(tasks)
		}
		out := make([]int, n)
		for i := range out {
			if len(tasks) > 0 {
				out[i] = i % len(tasks)
			}
		}
		return out, nil
	}
	parts := make([]int, len(spec.Tags))
	if len(spec.NumGroupsPartition) > 0 {
		sum := 0
		for i, p := range spec.NumGroupsPartition {
			if p < 0 {
				return nil, fieldErr(fmt.Sprintf("spec.num_groups_partition[%d]", i), "must be >= 0")
			}
			parts[i] = int(p)
			sum += int(p)
		}
		if spec.NumEnvGroups > 0 && sum != int(spec.NumEnvGroups) {
			return nil, fieldErr("spec.num_groups_partition", fmt.Sprintf("sums to %d but num_env_groups is %d", sum, spec.NumEnvGroups))
		}
	} else {
		total := int(spec.NumEnvGroups)
		per := map[string]int{}
		for _, t := range tasks {
			for _, tag := range taskTags(t) {
				per[tag]++
			}
		}
		sum := 0
		for i := range parts {
			if total == 0 {
				parts[i] = per[spec.Tags[i]]
				sum += parts[i]
				continue
			}
			parts[i] = total / len(parts)
			if i < total%len(parts) {
				parts[i]++
			}
		}
		// One group per tagged task, counted per tag: up to 64 tags times
		// every task. Checked before a slot is allocated per group.
		if sum > MaxGroups {
			return nil, fieldErr("spec.tags", fmt.Sprintf("select more than %d groups (a group per task carrying each tag); set num_env_groups", MaxGroups))
		}
	}
	var out []int
	for i, tag := range spec.Tags {
		var idx []int
		for j, t := range tasks {
			for _, tt := range taskTags(t) {
				if tt == tag {
					idx = append(idx, j)
					break
				}
			}
		}
		if len(idx) == 0 {
			return nil, fieldErr(fmt.Sprintf("spec.tags[%d]", i), "no task has tag or domain "+fmt.Sprintf("%q", tag))
		}
		for k := 0; k < parts[i]; k++ {
			out = append(out, idx[k%len(idx)])
		}
	}
	return out, nil
}

func taskTags(t *pb.Task) []string {
	if t.Domain == "" {
		return t.Tags
	}
	return append(append([]string(nil), t.Tags...), t.Domain)
}

// StartRollout validates, stores and starts a rollout. With a rollout id
// already known the existing rollout is returned.
func (e *Engine) StartRollout(ctx context.Context, id string, spec *pb.RolloutSpec) (*pb.Rollout, error) {
	// The id names export directories (results/<rollout id>), so it is held
	// to the task names' rule: no "." or "..".
	if id != "" && (!rolloutIDPattern.MatchString(id) || !tasksource.SafeName(id)) {
		return nil, fieldErr("rollout_id", `must be 1-64 characters of [A-Za-z0-9._:-], not "." and without ".."`)
	}
	spec = proto.Clone(spec).(*pb.RolloutSpec)
	tasks, err := normalizeSpec(ctx, spec, e.leases != nil, e.cfg.TaskRoots)
	if err != nil {
		return nil, err
	}
	plan, err := planGroups(spec, tasks)
	if err != nil {
		return nil, err
	}
	if err := e.checkPool(ctx, spec, tasks, "spec.tasks"); err != nil {
		return nil, err
	}
	perGroup := int(spec.GroupSize + spec.GroupRedundancy)
	if len(plan) > MaxGroups || len(plan)*perGroup > MaxEpisodes {
		return nil, fieldErr("spec.num_env_groups", fmt.Sprintf("the rollout would have more than %d episodes", MaxEpisodes))
	}
	if spec.BatchSize == 0 {
		spec.BatchSize = spec.GroupSize * int32(max(len(plan), 1))
	}
	if spec.BatchSize < 0 || spec.BatchSize%spec.GroupSize != 0 || spec.BatchSize > MaxEpisodes {
		return nil, fieldErr("spec.batch_size", "must be a positive multiple of group_size")
	}
	if id == "" {
		id = newID("r-")
	}
	spec.Tasks = nil

	e.mu.Lock()
	if r, ok := e.rollouts[id]; ok {
		out := e.rolloutProto(r, false)
		e.mu.Unlock()
		return out, nil
	}
	now := e.clock.Now()
	r := &rollout{
		id: id, spec: spec, state: pb.RolloutState_ROLLOUT_STATE_RUNNING, createTime: now,
		startVersion: e.modelVersion, taskIDs: map[string]bool{}, byID: map[string]*group{},
		batches: map[string]*batch{}, pass: e.minPass(),
	}
	e.mu.Unlock()

	taskRecs := r.addTasks(tasks)
	groups, eps := r.addGroups(plan, now)
	ops := []state.Op{state.PutRollout(r.record()), state.PutTasks(taskRecs)}
	ops = append(ops, groupOps(groups)...)
	ops = append(ops, episodeOps(eps)...)

	e.mu.Lock()
	if existing, ok := e.rollouts[id]; ok { // lost a race with the same id
		out := e.rolloutProto(existing, false)
		e.mu.Unlock()
		return out, nil
	}
	e.rollouts[id] = r
	e.order = append(e.order, r)
	for _, ep := range eps {
		e.episodes[ep.id] = ep
	}
	done := make(chan error, 1)
	// Submitted under the lock so that any later change of these records is
	// committed after them.
	e.store.Submit(func(err error) { done <- err }, ops...)
	e.mu.Unlock()

	if err := <-done; err != nil {
		e.mu.Lock()
		e.dropRollout(r)
		e.mu.Unlock()
		return nil, fmt.Errorf("store rollout: %w", err)
	}
	e.mu.Lock()
	r.ready = true
	if spec.Service {
		e.startPoller(r)
	}
	out := e.rolloutProto(r, false)
	e.mu.Unlock()
	e.log.Info("rollout started", zap.String("rollout_id", id), zap.Int("groups", len(groups)), zap.Int("episodes", len(eps)))
	e.poke()
	return out, nil
}

// dropRollout forgets a rollout whose creation failed to commit. Nothing of
// it was dispatched (dispatch skips rollouts that are not ready), so only
// memory needs cleaning.
func (e *Engine) dropRollout(r *rollout) {
	delete(e.rollouts, r.id)
	for i, x := range e.order {
		if x == r {
			e.order = append(e.order[:i], e.order[i+1:]...)
			break
		}
	}
	for _, g := range r.groups {
		for _, ep := range g.episodes {
			delete(e.episodes, ep.id)
		}
	}
	r.state = pb.RolloutState_ROLLOUT_STATE_FAILED
}

func groupOps(gs []*group) []state.Op {
	recs := make([]state.Group, len(gs))
	for i, g := range gs {
		recs[i] = g.record()
	}
	return []state.Op{state.PutGroups(recs...)}
}

func episodeOps(eps []*episode) []state.Op {
	recs := make([]state.Episode, len(eps))
	for i, ep := range eps {
		recs[i] = ep.record()
	}
	return []state.Op{state.PutEpisodes(recs...)}
}

// addTasks appends tasks to the rollout and returns their records.
func (r *rollout) addTasks(tasks []*pb.Task) []state.Task {
	recs := make([]state.Task, 0, len(tasks))
	for _, t := range tasks {
		b, _ := proto.Marshal(t)
		recs = append(recs, state.Task{RolloutID: r.id, Idx: int64(len(r.tasks)), Task: b})
		r.tasks = append(r.tasks, t)
		r.taskIDs[t.Id] = true
	}
	return recs
}

// addGroups creates groups for task indexes (relative to the whole task
// list) and queues their episodes.
func (r *rollout) addGroups(taskIdx []int, now time.Time) ([]*group, []*episode) {
	var gs []*group
	var eps []*episode
	for _, ti := range taskIdx {
		idx := len(r.groups)
		g := &group{id: groupID(r.id, idx), r: r, idx: idx, taskIdx: ti, seed: r.spec.Seed + int64(idx)}
		r.groups = append(r.groups, g)
		r.byID[g.id] = g
		gs = append(gs, g)
		for k := 0; k < r.perGroup(); k++ {
			ep := r.newEpisode(g, now)
			r.queue = append(r.queue, ep)
			eps = append(eps, ep)
		}
	}
	return gs, eps
}

func (r *rollout) newEpisode(g *group, now time.Time) *episode {
	ep := &episode{id: episodeID(r.id, r.numEpisodes), g: g, seq: r.numEpisodes, attempt: 1,
		status: pb.EpisodeStatus_EPISODE_STATUS_QUEUED, queuedAt: now}
	r.numEpisodes++
	g.episodes = append(g.episodes, ep)
	r.queued++
	return ep
}

// AddTasks appends tasks to a running rollout, one group each.
func (e *Engine) AddTasks(ctx context.Context, id string, tasks []*pb.Task) (groups, episodes int, err error) {
	if len(tasks) == 0 {
		return 0, 0, fieldErr("tasks", "at least one task")
	}
	if len(tasks) > tasksource.MaxTasks {
		return 0, 0, fieldErr("tasks", fmt.Sprintf("at most %d tasks", tasksource.MaxTasks))
	}
	e.mu.Lock()
	r, ok := e.rollouts[id]
	var spec *pb.RolloutSpec
	if ok {
		spec = r.spec
	}
	e.mu.Unlock()
	if !ok {
		return 0, 0, fmt.Errorf("rollout %s: %w", id, ErrNotFound)
	}
	// Outside the lock: it may ask vmmanager. The spec never changes.
	if err := e.checkPool(ctx, spec, tasks, "tasks"); err != nil {
		return 0, 0, err
	}
	e.mu.Lock()
	if !r.active() {
		e.mu.Unlock()
		return 0, 0, fmt.Errorf("rollout %s is %s: %w", id, r.state, ErrFailedPrecond)
	}
	seen := map[string]bool{}
	for i, t := range tasks {
		if f, msg := tasksource.CheckTask(t); msg != "" {
			e.mu.Unlock()
			return 0, 0, fieldErr(fmt.Sprintf("tasks[%d].%s", i, f), msg)
		}
		if r.taskIDs[t.Id] || seen[t.Id] {
			e.mu.Unlock()
			return 0, 0, fieldErr(fmt.Sprintf("tasks[%d].id", i), "task "+t.Id+" is already in the rollout")
		}
		if f, msg := checkRunnable(r.spec, t, e.leases != nil); msg != "" {
			e.mu.Unlock()
			return 0, 0, fieldErr(fmt.Sprintf("tasks[%d].%s", i, f), msg)
		}
		seen[t.Id] = true
	}
	if (len(r.groups)+len(tasks))*r.perGroup() > MaxEpisodes {
		e.mu.Unlock()
		return 0, 0, fieldErr("tasks", fmt.Sprintf("the rollout would have more than %d episodes", MaxEpisodes))
	}
	gs, eps := e.appendTasksLocked(r, tasks)
	done := make(chan error, 1)
	e.store.Submit(func(err error) { done <- err }, e.appendOps(r, tasks, gs, eps)...)
	e.mu.Unlock()
	if err := <-done; err != nil {
		return 0, 0, fmt.Errorf("store tasks: %w", err)
	}
	e.poke()
	return len(gs), len(eps), nil
}

func (e *Engine) appendTasksLocked(r *rollout, tasks []*pb.Task) ([]*group, []*episode) {
	first := len(r.tasks)
	r.addTasks(tasks)
	idx := make([]int, len(tasks))
	for i := range idx {
		idx[i] = first + i
	}
	gs, eps := r.addGroups(idx, e.clock.Now())
	for _, ep := range eps {
		e.episodes[ep.id] = ep
	}
	return gs, eps
}

func (e *Engine) appendOps(r *rollout, tasks []*pb.Task, gs []*group, eps []*episode) []state.Op {
	recs := make([]state.Task, len(tasks))
	for i, t := range tasks {
		b, _ := proto.Marshal(t)
		recs[i] = state.Task{RolloutID: r.id, Idx: int64(len(r.tasks) - len(tasks) + i), Task: b}
	}
	ops := []state.Op{state.PutRollout(r.record()), state.PutTasks(recs)}
	ops = append(ops, groupOps(gs)...)
	return append(ops, episodeOps(eps)...)
}

// CancelRollout stops admission, cancels running episodes and releases
// their leases.
func (e *Engine) CancelRollout(ctx context.Context, id, reason string) (*pb.Rollout, error) {
	if len(reason) > 1024 {
		return nil, fieldErr("reason", "must be at most 1024 bytes")
	}
	// PostgreSQL cannot store a NUL in a text column: the failed write would
	// fail the whole group commit it joined.
	if strings.ContainsRune(reason, 0) {
		return nil, fieldErr("reason", "must not contain NUL bytes")
	}
	e.mu.Lock()
	r, ok := e.rollouts[id]
	if !ok {
		e.mu.Unlock()
		return nil, fmt.Errorf("rollout %s: %w", id, ErrNotFound)
	}
	cancelled := r.active()
	if cancelled {
		r.state = pb.RolloutState_ROLLOUT_STATE_CANCELLED
		r.endTime = e.clock.Now()
		if reason != "" {
			r.errMsg = reason
		}
		if r.stopPoll != nil {
			close(r.stopPoll)
			r.stopPoll = nil
		}
		r.cancelUnsaved, r.cancelRecs = true, e.abortAllLocked(r, "rollout cancelled")
		e.notify()
	}
	// Memory changed before the commit (runners were told, leases
	// released): until the commit succeeds, every call, this one or a
	// retry after its error, stores the cancellation again.
	if r.cancelUnsaved {
		done := make(chan error, 1)
		e.store.Submit(func(err error) {
			if err == nil {
				e.mu.Lock()
				r.cancelUnsaved, r.cancelRecs = false, nil
				e.mu.Unlock()
			}
			done <- err
		}, state.PutRollout(r.record()), state.PutEpisodes(r.cancelRecs...))
		e.mu.Unlock()
		if err := <-done; err != nil {
			return nil, storeErr(e.log, "store cancellation", err)
		}
		if cancelled {
			e.log.Info("rollout cancelled", zap.String("rollout_id", id))
		}
		e.mu.Lock()
	}
	out := e.rolloutProto(r, false)
	e.mu.Unlock()
	return out, nil
}

// abortAllLocked aborts every live episode of a rollout that has ended
// (cancelled, or failed by its task source), so that none keeps a runner
// slot or a VM lease, and returns their records to persist.
func (e *Engine) abortAllLocked(r *rollout, reason string) []state.Episode {
	var recs []state.Episode
	for _, g := range r.groups {
		for _, ep := range g.episodes {
			if ep.phase == phaseTerminal || ep.phase == phaseFinishing {
				continue
			}
			e.abortLocked(ep, reason)
			recs = append(recs, ep.record())
		}
	}
	r.queue = nil
	return recs
}

// abortLocked ends a live episode as ABORTED: a running one is cancelled on
// its runner and its lease released.
func (e *Engine) abortLocked(ep *episode, reason string) {
	r := ep.g.r
	switch ep.phase {
	case phaseQueued:
		r.queued--
		e.dropAheadLocked(ep)
		e.releaseLocked(ep)
	case phaseLeasing, phaseRunning:
		r.running--
		e.unorphanLocked(ep)
		if ep.runner != nil {
			delete(ep.runner.running, ep.id)
			if ep.phase == phaseLeasing {
				ep.runner.credit++ // never sent: the slot is free again
			}
			if ep.phase == phaseRunning {
				ep.runner.send(&pb.WorkResponse{Msg: &pb.WorkResponse_Cancel{Cancel: &pb.CancelAssignment{EpisodeId: ep.id, Reason: reason}}})
			}
		}
		e.releaseLocked(ep)
	}
	ep.phase = phaseTerminal
	ep.status = pb.EpisodeStatus_EPISODE_STATUS_ABORTED
	ep.result = &pb.Episode{FailureReason: "aborted", Error: reason}
	r.aborted++
}

// GetRollout shows one rollout.
func (e *Engine) GetRollout(id string, withGroups bool) (*pb.Rollout, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.rollouts[id]
	if !ok {
		return nil, fmt.Errorf("rollout %s: %w", id, ErrNotFound)
	}
	if withGroups && len(r.groups) > MaxListedGroups {
		// A million groups would make an answer over the message size
		// limit, rendered under the engine's lock.
		return nil, &FieldError{Field: "include_groups", Precondition: true,
			Msg: fmt.Sprintf("the rollout has %d groups, more than the %d a GetRollout lists; use progress counts", len(r.groups), MaxListedGroups)}
	}
	return e.rolloutProto(r, withGroups), nil
}

// MaxPageBytes bounds one page of a list answer, so that it fits gRPC
// clients' default 4 MiB limit whatever the items hold (a spec's system
// prompt, a task's instruction may be 1 MiB each). A page always holds at
// least one item.
const MaxPageBytes = 3 << 20

// ListRollouts lists rollouts newest first, optionally by state: at most
// limit of them (and MaxPageBytes) from position offset on. next is the
// position the next page starts at, 0 when none follows.
func (e *Engine) ListRollouts(st pb.RolloutState, offset, limit int) (out []*pb.Rollout, next int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, size := 0, 0 // matching rollouts seen, bytes in the page
	for i := len(e.order) - 1; i >= 0; i-- {
		r := e.order[i]
		if st != pb.RolloutState_ROLLOUT_STATE_UNSPECIFIED && r.state != st {
			continue
		}
		if n >= offset {
			if len(out) == limit {
				return out, n
			}
			p := e.rolloutProto(r, false)
			if size += proto.Size(p); size > MaxPageBytes && len(out) > 0 {
				return out, n
			}
			out = append(out, p)
		}
		n++
	}
	return out, 0
}

func (e *Engine) rolloutProto(r *rollout, withGroups bool) *pb.Rollout {
	now := e.clock.Now()
	p := &pb.RolloutProgress{
		Queued: r.queued, Running: r.running, Done: r.done, Failed: r.failed, Aborted: r.aborted,
		GroupsTotal: int64(len(r.groups)), Requeued: r.requeued, GroupsConsumed: int64(r.consumed),
	}
	for _, g := range r.groups {
		switch g.state {
		case groupComplete, groupHandedOut, groupConsumed, groupDropped:
			p.GroupsComplete++
		case groupFailed:
			p.GroupsFailed++
		}
	}
	if r.done > 0 {
		p.SuccessRate = float64(r.successes) / float64(r.done)
	}
	// Throughput over the last five minutes (or since start if shorter).
	window := 5 * time.Minute
	since := now.Add(-window)
	n := 0
	for _, t := range r.finishTimes {
		if t.After(since) {
			n++
		}
	}
	span := now.Sub(r.createTime)
	if span > window {
		span = window
	}
	if span > 0 && n > 0 {
		p.EpisodesPerMinute = float64(n) / span.Minutes()
		remaining := r.queued + r.running
		if p.EpisodesPerMinute > 0 && r.active() {
			p.Eta = durationpb.New(time.Duration(float64(remaining) / p.EpisodesPerMinute * float64(time.Minute)))
		}
	}
	out := &pb.Rollout{
		RolloutId: r.id, Spec: r.spec, State: r.state, Progress: p, CreateTime: timestamppb.New(r.createTime),
		ModelVersion: e.modelVersion, NumTasks: int64(len(r.tasks)), Error: r.errMsg,
	}
	if !r.endTime.IsZero() {
		out.EndTime = timestamppb.New(r.endTime)
	}
	if withGroups {
		for _, g := range r.groups {
			gp := &pb.GroupProgress{GroupId: g.id, TaskId: g.task().Id, State: groupStateNames[g.state]}
			if g.state == groupFailed {
				gp.Error = g.lastFailure()
			}
			for _, ep := range g.episodes {
				switch {
				case ep.phase == phaseQueued:
					gp.Queued++
				case ep.phase == phaseLeasing || ep.phase == phaseRunning || ep.phase == phaseFinishing:
					gp.Running++
				case ep.status == pb.EpisodeStatus_EPISODE_STATUS_DONE:
					gp.Done++
				case ep.status != pb.EpisodeStatus_EPISODE_STATUS_ABORTED:
					gp.Failed++
				}
			}
			out.Groups = append(out.Groups, gp)
		}
	}
	return out
}

// ListQueued shows live episodes, running first (by id), then queued in
// rollout and group order: at most limit of them (and MaxPageBytes) from
// position offset on. next is the position the next page starts at, 0 when
// none follows. A rollout id that names no rollout is
// ErrNotFound, not an empty list. Only the page is rendered: a rollout may
// hold two million episodes.
func (e *Engine) ListQueued(rolloutID string, offset, limit int) (out []*pb.QueuedEpisode, next int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.rollouts[rolloutID]; rolloutID != "" && !ok {
		return nil, 0, fmt.Errorf("rollout %s: %w", rolloutID, ErrNotFound)
	}
	var running, queued []*episode
	for _, r := range e.order {
		if rolloutID != "" && r.id != rolloutID {
			continue
		}
		for _, g := range r.groups {
			for _, ep := range g.episodes {
				switch ep.phase {
				case phaseTerminal, phaseFinishing:
				case phaseQueued:
					queued = append(queued, ep)
				default:
					running = append(running, ep)
				}
			}
		}
	}
	sort.SliceStable(running, func(i, j int) bool { return running[i].id < running[j].id })
	all := append(running, queued...)
	if offset >= len(all) {
		return nil, 0, nil
	}
	size := 0 // bytes in the page
	for i, ep := range all[offset:] {
		if i == limit {
			return out, offset + i, nil
		}
		q := &pb.QueuedEpisode{Episode: ep.proto()}
		if ep.runner != nil {
			q.RunnerId = ep.runner.id
		}
		if ep.lease != nil {
			q.LeaseId = ep.lease.LeaseId
		}
		if !ep.deadline.IsZero() {
			q.Deadline = timestamppb.New(ep.deadline)
		}
		if size += proto.Size(q); size > MaxPageBytes && len(out) > 0 {
			return out, offset + i, nil
		}
		out = append(out, q)
	}
	return out, 0, nil
}

// maybeFinish marks a non-service rollout FINISHED once every group is
// settled.
func (e *Engine) maybeFinishLocked(r *rollout) {
	if !r.active() || r.spec.Service {
		return
	}
	for _, g := range r.groups {
		if g.state == groupPending {
			return
		}
	}
	r.state = pb.RolloutState_ROLLOUT_STATE_FINISHED
	r.endTime = e.clock.Now()
	e.persist(state.PutRollout(r.record()))
	e.log.Info("rollout finished", zap.String("rollout_id", r.id), zap.Int64("done", r.done), zap.Int64("failed", r.failed))
	e.notify()
}
