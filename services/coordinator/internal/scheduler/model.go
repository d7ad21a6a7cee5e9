package scheduler

import (
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// groupState is a group's life: pending → complete → handedOut → consumed,
// or pending → failed, or complete → dropped (zero variance, stale).
type groupState int32

const (
	groupPending groupState = iota
	groupComplete
	groupHandedOut
	groupConsumed
	groupFailed
	groupDropped
)

var groupStateNames = map[groupState]string{
	groupPending: "pending", groupComplete: "complete", groupHandedOut: "handed_out",
	groupConsumed: "consumed", groupFailed: "failed", groupDropped: "dropped",
}

// phase is where a live episode is in the coordinator.
type phase int

const (
	phaseQueued    phase = iota
	phaseLeasing         // slot reserved on a runner, waiting for a VM
	phaseRunning         // assignment sent
	phaseFinishing       // DONE reported, waiting for the commit
	phaseTerminal
)

type rollout struct {
	id           string
	spec         *pb.RolloutSpec // without inline tasks
	state        pb.RolloutState
	ready        bool // creation committed; dispatch may start
	createTime   time.Time
	endTime      time.Time
	errMsg       string
	startVersion int64

	tasks   []*pb.Task
	taskIDs map[string]bool
	groups  []*group
	byID    map[string]*group
	// queue holds queued episodes in dispatch order: group by group.
	queue []*episode

	numEpisodes int64
	pass        float64 // stride-scheduling virtual time

	startedGroups int // groups with a dispatched episode
	retired       int // groups failed or dropped (produce no batch)
	consumed      int // groups acked

	queued, running, done, failed, aborted, requeued int64
	successes                                        int64
	outcomes                                         outcomes
	finishTimes                                      []time.Time // recent DONE times, for throughput

	complete []*group // complete groups waiting for a batch, in completion order
	batches  map[string]*batch

	stopPoll chan struct{}
	// cancelUnsaved: the cancellation is in memory, its commit has not
	// succeeded yet; a retried CancelRollout stores cancelRecs (the
	// aborted episodes' records) again.
	cancelUnsaved bool
	cancelRecs    []state.Episode
}

func (r *rollout) groupSize() int { return int(r.spec.GroupSize) }
func (r *rollout) perGroup() int  { return int(r.spec.GroupSize + r.spec.GroupRedundancy) }
func (r *rollout) batchGroups() int {
	n := int(r.spec.BatchSize) / r.groupSize()
	if n < 1 {
		n = 1
	}
	return n
}
func (r *rollout) active() bool { return r.state == pb.RolloutState_ROLLOUT_STATE_RUNNING }

func (r *rollout) record() state.Rollout {
	spec, _ := proto.Marshal(r.spec)
	var end int64
	if !r.endTime.IsZero() {
		end = r.endTime.UnixNano()
	}
	return state.Rollout{
		ID: r.id, Spec: spec, State: int32(r.state), CreateTime: r.createTime.UnixNano(), EndTime: end,
		Error: r.errMsg, StartVersion: r.startVersion, NumGroups: int64(len(r.groups)), NumEpisodes: r.numEpisodes,
	}
}

type group struct {
	id      string
	r       *rollout
	idx     int
	taskIdx int
	seed    int64
	state   groupState
	started bool
	regens  int
	batchID string
	doneSeq int64
	// hopeless: an episode failed in a way no rerun can fix, so the group
	// is not regenerated. Not stored: the group is settled when it is set.
	hopeless bool

	episodes []*episode
}

func (g *group) task() *pb.Task { return g.r.tasks[g.taskIdx] }

func (g *group) record() state.Group {
	return state.Group{ID: g.id, RolloutID: g.r.id, Idx: int64(g.idx), TaskIdx: int64(g.taskIdx), Seed: g.seed,
		State: int32(g.state), BatchID: g.batchID, Regens: int32(g.regens), DoneSeq: g.doneSeq}
}

// failedAttempts counts the attempts the group's episodes spent without a
// result: every attempt of an episode that failed for good, the earlier
// attempts of the others.
func (g *group) failedAttempts() int {
	n := 0
	for _, ep := range g.episodes {
		switch {
		case ep.phase == phaseTerminal && failedStatus(ep.status):
			n += int(ep.attempt)
		case ep.attempt > 1:
			n += int(ep.attempt) - 1
		}
	}
	return n
}

func failedStatus(s pb.EpisodeStatus) bool {
	return s == pb.EpisodeStatus_EPISODE_STATUS_FAILED || s == pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT ||
		s == pb.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED
}

// lastFailure is why the group's most recent failed episode failed
// ("reason: error"), for a failed group's report.
func (g *group) lastFailure() string {
	for i := len(g.episodes) - 1; i >= 0; i-- {
		ep := g.episodes[i]
		if ep.phase != phaseTerminal || !failedStatus(ep.status) || ep.result == nil {
			continue
		}
		msg := ep.result.FailureReason
		if ep.result.Error != "" {
			if msg != "" {
				msg += ": "
			}
			msg += ep.result.Error
		}
		if msg == "" {
			msg = ep.status.String()
		}
		return msg
	}
	return ""
}

// doneEpisodes are the group's durable DONE episodes, in completion order.
func (g *group) doneEpisodes() []*episode {
	var out []*episode
	for _, ep := range g.episodes {
		if ep.status == pb.EpisodeStatus_EPISODE_STATUS_DONE && ep.phase == phaseTerminal {
			out = append(out, ep)
		}
	}
	return out
}

type episode struct {
	id      string
	g       *group
	seq     int64
	attempt int32
	status  pb.EpisodeStatus
	phase   phase

	runner    *Runner
	runnerID  string    // runner of the current attempt, kept while orphaned
	orphaned  time.Time // when its runner's stream broke; zero otherwise
	lease     *pb.Lease
	ahead     bool // a lease is being acquired or held while still queued
	deadline  time.Time
	startTime time.Time
	queuedAt  time.Time
	doneAt    time.Time
	renewedAt time.Time

	modelVersion int64
	result       *pb.Episode

	// steps and stepPhase are the runner's last heartbeat about the
	// episode, shown on its VM's lease.
	steps     int32
	stepPhase string
}

// maxPhaseBytes bounds the phase a runner reports; lease label values are
// bounded too.
const maxPhaseBytes = 32

// maxLabelValue is vmmanager's bound on a lease label's value.
const maxLabelValue = 256

// leaseLabels are the labels of the episode's VM lease: what a person
// looking at `rollout leases` wants to know (the holder is the episode).
func (ep *episode) leaseLabels() map[string]string {
	l := map[string]string{"rollout": ep.g.r.id, "attempt": strconv.Itoa(int(ep.attempt))}
	if id := ep.g.task().GetId(); id != "" {
		l["task"] = truncate(id, maxLabelValue)
	}
	return l
}

// progressLabels are set at lease renewal: the step the episode is at.
func (ep *episode) progressLabels() map[string]string {
	if ep.stepPhase == "" && ep.steps == 0 {
		return nil
	}
	return map[string]string{"step": strconv.Itoa(int(ep.steps)), "phase": ep.stepPhase}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (ep *episode) envMode() string {
	if m := ep.g.task().EnvMode; m != "" {
		return m
	}
	return ep.g.r.spec.EnvMode
}

func (ep *episode) needsVM() bool { return tasksource.NeedsVM(ep.envMode()) }

func (ep *episode) record() state.Episode {
	rec := state.Episode{ID: ep.id, RolloutID: ep.g.r.id, GroupID: ep.g.id, Seq: ep.seq, Status: int32(ep.status),
		Attempt: ep.attempt, ModelVersion: ep.modelVersion}
	rec.RunnerID = ep.runnerID
	if ep.lease != nil {
		rec.LeaseID, rec.LeaseToken = ep.lease.LeaseId, ep.lease.Token
	}
	if ep.result != nil {
		rec.Result, _ = proto.Marshal(ep.result)
	}
	return rec
}

// proto renders the episode as the API shows it.
func (ep *episode) proto() *pb.Episode {
	if ep.result != nil && ep.phase == phaseTerminal {
		out := proto.Clone(ep.result).(*pb.Episode)
		out.EpisodeId, out.RolloutId, out.GroupId, out.Attempt = ep.id, ep.g.r.id, ep.g.id, ep.attempt
		out.Status = ep.status
		if len(out.ModelVersions) == 0 {
			out.ModelVersions = []int64{ep.modelVersion}
		}
		return out
	}
	t := ep.g.task()
	out := &pb.Episode{
		EpisodeId: ep.id, RolloutId: ep.g.r.id, GroupId: ep.g.id, TaskId: t.Id, Domain: t.Domain,
		Seed: ep.g.seed, Attempt: ep.attempt, Status: ep.status, Instruction: t.Instruction,
		EnvMode: ep.envMode(), Labels: ep.g.r.spec.Labels,
	}
	if ep.runner != nil {
		out.RunnerId = ep.runner.id
	}
	if ep.lease != nil {
		out.VmId = ep.lease.VmId
	}
	if ep.phase != phaseQueued {
		out.ModelVersions = []int64{ep.modelVersion}
	}
	return out
}

func episodeID(rolloutID string, seq int64) string {
	return rolloutID + "-e" + strconv.FormatInt(seq, 10)
}

func groupID(rolloutID string, idx int) string {
	return rolloutID + "-g" + strconv.Itoa(idx)
}

// Runner is a connected runner: its slots, its running episodes and its
// outbox of messages for the Work stream.
type Runner struct {
	id       string
	slots    int
	modes    map[string]bool // empty: all
	credit   int             // free slots as last announced, minus assignments since
	running  map[string]*episode
	lastSeen time.Time

	mu     sync.Mutex
	out    []*pb.WorkResponse
	wake   chan struct{}
	gone   chan struct{}
	closed bool
}

func newRunner(id string, slots int, modes []string, now time.Time) *Runner {
	r := &Runner{id: id, slots: slots, running: map[string]*episode{}, lastSeen: now,
		wake: make(chan struct{}, 1), gone: make(chan struct{})}
	if len(modes) > 0 {
		r.modes = map[string]bool{}
		for _, m := range modes {
			r.modes[m] = true
			if m == "desktop" {
				r.modes["osworld"] = true
			}
			if m == "osworld" {
				r.modes["desktop"] = true
			}
		}
	}
	return r
}

// ID is the runner id.
func (r *Runner) ID() string { return r.id }

// free is how many more episodes the runner may get now.
func (r *Runner) free() int {
	n := r.slots - len(r.running)
	if r.credit < n {
		n = r.credit
	}
	return n
}

func (r *Runner) accepts(mode string) bool { return r.modes == nil || r.modes[mode] }

func (r *Runner) send(m *pb.WorkResponse) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.out = append(r.out, m)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Take returns the queued outgoing messages, waiting until there are some
// or the runner is dropped (ok false).
func (r *Runner) Take(done <-chan struct{}) (msgs []*pb.WorkResponse, ok bool) {
	for {
		r.mu.Lock()
		msgs, r.out = r.out, nil
		closed := r.closed
		r.mu.Unlock()
		if len(msgs) > 0 {
			return msgs, true
		}
		if closed {
			return nil, false
		}
		select {
		case <-r.wake:
		case <-r.gone:
		case <-done:
			return nil, false
		}
	}
}

// Gone is closed when the coordinator drops the runner (silent, replaced by
// a reconnect, or shutting down).
func (r *Runner) Gone() <-chan struct{} { return r.gone }

func (r *Runner) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.gone)
	}
}
