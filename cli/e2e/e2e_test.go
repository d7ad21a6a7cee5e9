//go:build e2e

// Package e2e is the end-to-end and chaos test of the compose deployment
// (`make e2e`). TestChaos runs a rollout of examples/tasks/e2e on
// deploy/compose.yaml while each of the five services is killed with SIGKILL
// and restarted once and the runners are scaled down and up; afterwards every
// episode must be stored exactly once and the VM pool must be clean. Then, on
// the same deployment (readme_test.go), the README's remote rollout of the
// bundled tasks must score 1 in every episode, py tasks must run in the
// runner image under the Kubernetes runner pod's security context, and once
// the model backend is killed a new run must exit non-zero saying why.
//
// The tests share one deployment: the first that needs it starts it, and
// TestMain removes it after the last. It needs Docker, docker-compose, the
// images (make images guest-image) and the host ports of deploy/compose.yaml.
// Environment:
//
//	E2E_COMPOSE  compose command and project (default "docker-compose -p rolloutmesh")
//	E2E_KEEP=1   leave the mesh running afterwards (for debugging)
//	E2E_LOG_DIR  write every container's log to E2E_LOG_DIR/compose.log
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

const (
	// taskSource is examples/tasks/e2e as the coordinator container sees it.
	taskSource = "/examples/tasks/e2e"
	groupSize  = 4
	// guestLabel is put on every guest container by the docker provider.
	guestLabel = "rolloutmesh.vm"

	coordinatorAddr = "localhost:50052"
	storageAddr     = "localhost:50055"
	vmmanagerAddr   = "localhost:50051"
)

// chaosOrder is the order services are killed in.
var chaosOrder = []string{"storage", "modelgateway", "vmmanager", "coordinator", "runner"}

type env struct {
	t       *testing.T
	root    string
	compose []string // command, project flags and -f file

	// preGuests are guest containers that existed before the test (other
	// users'); they are never touched.
	preGuests map[string]bool

	coord   pb.CoordinatorClient
	storage pb.StorageClient
	vmm     pb.VMManagerClient
}

func TestChaos(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	e, poolSize := deployment(t)

	ro, err := e.coord.StartRollout(ctx, &pb.StartRolloutRequest{Spec: rolloutSpec()})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	id, numTasks := ro.GetRolloutId(), ro.GetNumTasks()
	want := numTasks * groupSize
	t.Logf("rollout %s: %d tasks × group size %d = %d episodes", id, numTasks, groupSize, want)

	w := e.watch(ctx, id)
	defer w.stop()
	// Kill only once the mesh is busy, so that every kill hits work in flight.
	w.waitDone(t, 8, 3*time.Minute)

	for _, svc := range chaosOrder {
		e.killAndRestart(ctx, w, svc)
		w.requireRunning(t, "after the "+svc+" kill")
	}

	// Scale down: compose stops (SIGTERM) and removes the newest runner.
	e.composeRun("up", "-d", "--no-recreate", "--scale", "runner=1")
	if n := len(e.serviceContainers("runner")); n != 1 {
		t.Fatalf("after --scale runner=1: %d runner containers, want 1", n)
	}
	w.waitProgress(t, "after scaling runners down to 1", 2*time.Minute)
	w.requireRunning(t, "after scaling runners down")

	// Scale up: the new replicas must get work at once.
	before := setOf(e.serviceContainers("runner"))
	e.composeRun("up", "-d", "--no-recreate", "--scale", "runner=3")
	var added []string
	for _, c := range e.serviceContainers("runner") {
		if !before[c] {
			added = append(added, c)
		}
	}
	if len(added) != 2 {
		t.Fatalf("after --scale runner=3: %d new runner containers, want 2", len(added))
	}
	for _, c := range added {
		e.waitHealthy(c, 2*time.Minute)
	}
	e.waitRunnersGetWork(ctx, id, added, 90*time.Second)
	w.requireRunning(t, "after scaling runners up")

	final := w.waitFinished(t, 15*time.Minute)
	e.checkRollout(ctx, final, numTasks)
	e.checkEpisodes(ctx, id, numTasks, added)
	e.checkPool(ctx, poolSize)
}

// shared is the compose deployment the tests share: deployment starts it
// for the first test that needs it, TestMain removes it after the last.
var shared struct {
	mu       sync.Mutex
	base     *env // its t is that of the test that started it
	ready    bool
	broken   bool // starting it failed: later tests fail at once
	poolSize int
	conns    []*grpc.ClientConn
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.base != nil {
		if err := shared.base.down(code != 0); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// deployment returns the running compose deployment, bound to t, and the
// size of its VM pool, starting it (with 2 runners) when no test has.
func deployment(t *testing.T) (*env, int) {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.broken {
		t.Fatal("the compose deployment failed to start (see the first test)")
	}
	if !shared.ready {
		ok := false
		defer func() { shared.broken = !ok }()
		e := newEnv(t)
		shared.base = e
		e.composeRun("up", "-d", "--scale", "runner=2")
		e.waitProjectHealthy(3 * time.Minute)
		e.dialAll()
		shared.poolSize = e.waitPoolReady(context.Background(), 3*time.Minute)
		t.Logf("mesh up: pool of %d VMs, 2 runners", shared.poolSize)
		shared.ready, ok = true, true
	}
	e := *shared.base
	e.t = t
	return &e, shared.poolSize
}

// newEnv checks that the compose project is not running yet and notes the
// guest containers that exist before it starts.
func newEnv(t *testing.T) *env {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	composeCmd := strings.Fields(os.Getenv("E2E_COMPOSE"))
	if len(composeCmd) == 0 {
		composeCmd = []string{"docker-compose", "-p", "rolloutmesh"}
	}
	e := &env{t: t, root: root, compose: append(composeCmd, "-f", filepath.Join(root, "deploy", "compose.yaml"))}
	if _, err := exec.LookPath(e.compose[0]); err != nil {
		t.Fatalf("%s not found: the e2e test drives the compose deployment", e.compose[0])
	}
	if ids := e.composeOut("ps", "-q"); strings.TrimSpace(ids) != "" {
		t.Fatalf("the compose project is already running (%s); run `make down` first", strings.Join(e.compose, " "))
	}
	e.preGuests = e.guestContainers()
	return e
}

// down shows the logs when a test failed and removes the mesh (keeping its
// volumes) and any guest container it left behind, which is an error.
func (e *env) down(failed bool) error {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	for _, c := range shared.conns {
		c.Close()
	}
	if dir := os.Getenv("E2E_LOG_DIR"); dir != "" {
		out, _ := e.exec(e.compose[0], append(e.compose[1:], "logs", "--no-color", "--timestamps")...)
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "compose.log"), []byte(out), 0o644)
		}
		if err != nil {
			logf("writing compose logs: %v", err)
		}
	}
	if failed {
		out, _ := e.exec(e.compose[0], append(e.compose[1:], "ps")...)
		logf("compose ps:\n%s", out)
		out, _ = e.exec(e.compose[0], append(e.compose[1:], "logs", "--no-color", "--tail", "60")...)
		logf("compose logs (last 60 lines per container):\n%s", out)
	}
	if os.Getenv("E2E_KEEP") == "1" {
		logf("E2E_KEEP=1: leaving the mesh running")
		return nil
	}
	if out, err := e.exec(e.compose[0], append(e.compose[1:], "down", "--remove-orphans", "-t", "20")...); err != nil {
		return fmt.Errorf("compose down: %v\n%s", err, out)
	}
	out, err := e.exec("docker", "ps", "-aq", "--no-trunc", "--filter", "label="+guestLabel)
	if err != nil {
		return fmt.Errorf("docker ps: %v\n%s", err, out)
	}
	var left []string
	for _, id := range strings.Fields(out) {
		if !e.preGuests[id] {
			left = append(left, id)
		}
	}
	if len(left) > 0 {
		// vmmanager stops its VMs on SIGTERM; what is left was leaked.
		e.exec("docker", append([]string{"rm", "-f"}, left...)...)
		return fmt.Errorf("%d guest containers left after compose down (removed them): %v", len(left), left)
	}
	return nil
}

func rolloutSpec() *pb.RolloutSpec {
	// As `rollout run --remote --group-size 4` sends, with more attempts:
	// an episode may be hit by several of the kills.
	return &pb.RolloutSpec{
		Name:       "e2e-chaos",
		TaskSource: taskSource,
		EnvMode:    "desktop",
		Agent: &pb.AgentConfig{
			ActionSpace:      "pyautogui",
			ObservationType:  "screenshot",
			MaxTurns:         15,
			MaxRetries:       3,
			EvaluationMetric: "exact_match",
			ScreenWidth:      1280,
			ScreenHeight:     720,
		},
		GroupSize:      groupSize,
		MaxAttempts:    6,
		Mode:           pb.RolloutMode_ROLLOUT_MODE_ASYNC,
		EpisodeTimeout: durationpb.New(5 * time.Minute),
	}
}

// --- chaos -------------------------------------------------------------------

// killAndRestart SIGKILLs one container of svc, starts it again, waits until
// it is healthy and the rollout moves on.
func (e *env) killAndRestart(ctx context.Context, w *watcher, svc string) {
	t := e.t
	cs := e.serviceContainers(svc)
	if len(cs) == 0 {
		t.Fatalf("no container of %s", svc)
	}
	c := cs[0]
	p := w.last()
	t.Logf("chaos: SIGKILL %s (%s) at %s", svc, short(c), progressLine(p))
	start := time.Now()
	e.mustExec("docker", "kill", "-s", "KILL", c)
	e.waitState(c, "exited", 30*time.Second)
	t.Logf("chaos: %s exited %s after the kill", svc, time.Since(start).Truncate(100*time.Millisecond))
	time.Sleep(2 * time.Second)
	start = time.Now()
	e.mustExec("docker", "start", c)
	e.waitHealthy(c, 2*time.Minute)
	t.Logf("chaos: %s healthy again after %s", svc, time.Since(start).Truncate(100*time.Millisecond))
	w.waitProgress(t, "after restarting "+svc, 3*time.Minute)
	time.Sleep(5 * time.Second)
}

// waitRunnersGetWork waits until each of the new runner containers runs an
// episode (runner ids are <hostname>-<pid>, the hostname the container id).
func (e *env) waitRunnersGetWork(ctx context.Context, rolloutID string, containers []string, timeout time.Duration) {
	t := e.t
	pending := map[string]bool{}
	for _, c := range containers {
		pending[short(c)] = true
	}
	start := time.Now()
	for time.Since(start) < timeout {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := e.coord.ListQueuedEpisodes(cctx, &pb.ListQueuedEpisodesRequest{RolloutId: rolloutID})
		cancel()
		if err == nil {
			for _, q := range resp.GetEpisodes() {
				for h := range pending {
					if strings.HasPrefix(q.GetRunnerId(), h+"-") {
						t.Logf("scale up: new runner %s got episode %s after %s", q.GetRunnerId(), q.GetEpisode().GetEpisodeId(), time.Since(start).Truncate(100*time.Millisecond))
						delete(pending, h)
					}
				}
			}
		}
		if len(pending) == 0 {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("new runners %v got no work within %s", keys(pending), timeout)
}

// --- checks --------------------------------------------------------------------

func (e *env) checkRollout(ctx context.Context, ro *pb.Rollout, numTasks int64) {
	t := e.t
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ro, err := e.coord.GetRollout(cctx, &pb.GetRolloutRequest{RolloutId: ro.GetRolloutId(), IncludeGroups: true})
	if err != nil {
		t.Fatalf("GetRollout: %v", err)
	}
	p := ro.GetProgress()
	t.Logf("coordinator: %s; %d requeued", progressLine(p), p.GetRequeued())
	if ro.GetState() != pb.RolloutState_ROLLOUT_STATE_FINISHED {
		t.Errorf("rollout state %s (%s), want FINISHED", ro.GetState(), ro.GetError())
	}
	want := numTasks * groupSize
	if p.GetDone() != want || p.GetFailed() != 0 || p.GetAborted() != 0 || p.GetQueued() != 0 || p.GetRunning() != 0 {
		t.Errorf("progress %s, want %d done and nothing else", progressLine(p), want)
	}
	if p.GetGroupsTotal() != numTasks || p.GetGroupsComplete() != numTasks || p.GetGroupsFailed() != 0 {
		t.Errorf("groups: %d total, %d complete, %d failed; want %d complete", p.GetGroupsTotal(), p.GetGroupsComplete(), p.GetGroupsFailed(), numTasks)
	}
	if int64(len(ro.GetGroups())) != numTasks {
		t.Errorf("GetRollout lists %d groups, want %d", len(ro.GetGroups()), numTasks)
	}
	for _, g := range ro.GetGroups() {
		if g.GetDone() != groupSize || g.GetRunning()+g.GetQueued()+g.GetFailed() != 0 {
			t.Errorf("group %s (task %s): %d done, %d running, %d queued, %d failed; want %d done",
				g.GetGroupId(), g.GetTaskId(), g.GetDone(), g.GetRunning(), g.GetQueued(), g.GetFailed(), groupSize)
		}
	}
}

func (e *env) checkEpisodes(ctx context.Context, rolloutID string, numTasks int64, newRunners []string) {
	t := e.t
	var eps []*pb.Episode
	token := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := e.storage.ListEpisodes(cctx, &pb.ListEpisodesRequest{RolloutId: rolloutID, PageSize: 1000, PageToken: token})
		cancel()
		if err != nil {
			t.Fatalf("ListEpisodes: %v", err)
		}
		eps = append(eps, resp.GetEpisodes()...)
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	ids := map[string]bool{}
	type key struct{ task, group string }
	done := map[key]int{}
	groupsOfTask := map[string]map[string]bool{}
	attempts := map[int32]int{}
	runners := map[string]int{}
	scores := map[string][]float64{} // by domain
	for _, ep := range eps {
		if ids[ep.GetEpisodeId()] {
			t.Errorf("episode %s stored twice", ep.GetEpisodeId())
		}
		ids[ep.GetEpisodeId()] = true
		if ep.GetStatus() != pb.EpisodeStatus_EPISODE_STATUS_DONE {
			t.Errorf("episode %s (task %s, attempt %d): status %s, reason %q, error %q; want DONE",
				ep.GetEpisodeId(), ep.GetTaskId(), ep.GetAttempt(), ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
			continue
		}
		done[key{ep.GetTaskId(), ep.GetGroupId()}]++
		scores[ep.GetDomain()] = append(scores[ep.GetDomain()], ep.GetScore())
		if groupsOfTask[ep.GetTaskId()] == nil {
			groupsOfTask[ep.GetTaskId()] = map[string]bool{}
		}
		groupsOfTask[ep.GetTaskId()][ep.GetGroupId()] = true
		attempts[ep.GetAttempt()]++
		runners[ep.GetRunnerId()]++
	}
	t.Logf("storage: %d episodes; by attempt %v; by runner %v; scores by domain %v", len(eps), attempts, runners, scores)
	// The scripted policy solves the math and code tasks: anything below 1
	// is an environment that failed to run them (the py sandbox in the
	// runner container), which must never pass as a low score.
	for _, domain := range []string{"math", "code"} {
		if len(scores[domain]) == 0 {
			t.Errorf("no %s episode stored", domain)
		}
		for _, sc := range scores[domain] {
			if sc != 1 {
				t.Errorf("%s episodes scored %v, want every one 1", domain, scores[domain])
				break
			}
		}
	}
	if want := numTasks * groupSize; int64(len(eps)) != want {
		t.Errorf("storage holds %d episodes, want %d tasks × %d = %d", len(eps), numTasks, groupSize, want)
	}
	if int64(len(groupsOfTask)) != numTasks {
		t.Errorf("stored episodes cover %d tasks, want %d", len(groupsOfTask), numTasks)
	}
	for task, groups := range groupsOfTask {
		if len(groups) != 1 {
			t.Errorf("task %s has %d groups, want 1", task, len(groups))
		}
	}
	for k, n := range done {
		if n != groupSize {
			t.Errorf("task %s group %s: %d DONE episodes, want %d", k.task, k.group, n, groupSize)
		}
	}
	for _, c := range newRunners {
		n := 0
		for r, k := range runners {
			if strings.HasPrefix(r, short(c)+"-") {
				n += k
			}
		}
		if n == 0 {
			t.Errorf("runner %s added by --scale runner=3 finished no episode", short(c))
		}
	}
}

// checkPool waits until every VM is READY and unleased, and checks that the
// guest containers are exactly the pool's.
func (e *env) checkPool(ctx context.Context, poolSize int) {
	t := e.t
	var vms []*pb.VM
	var leases []*pb.Lease
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		vr, err1 := e.vmm.ListVMs(cctx, &pb.ListVMsRequest{})
		lr, err2 := e.vmm.ListLeases(cctx, &pb.ListLeasesRequest{})
		cancel()
		if err1 == nil && err2 == nil {
			vms, leases = vr.GetVms(), lr.GetLeases()
			if poolClean(vms, poolSize) && len(leases) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			for _, vm := range vms {
				t.Errorf("VM %s: %s, lease %q holder %q, last error %q", vm.GetVmId(), vm.GetState(), vm.GetLeaseId(), vm.GetHolder(), vm.GetLastError())
			}
			for _, l := range leases {
				t.Errorf("lease %s of VM %s still held by %s", l.GetLeaseId(), l.GetVmId(), l.GetHolder())
			}
			t.Fatalf("pool not clean 2m after the rollout: want %d VMs READY and no lease (errors: %v, %v)", poolSize, err1, err2)
		}
		time.Sleep(time.Second)
	}
	refs := map[string]bool{}
	served := int64(0)
	for _, vm := range vms {
		refs[vm.GetProviderRef()] = true
		served += vm.GetLeasesServed()
	}
	t.Logf("pool clean: %d VMs READY, no lease; %d leases served since the last vmmanager start", len(vms), served)
	guests := e.guestContainers()
	var stray []string
	for id := range guests {
		if !e.preGuests[id] && !refs[id] {
			stray = append(stray, id)
		}
	}
	if len(stray) > 0 {
		t.Errorf("stray guest containers (not in ListVMs): %v", stray)
	}
	for ref := range refs {
		if !guests[ref] {
			t.Errorf("VM container %s of ListVMs does not exist", short(ref))
			continue
		}
		if st := strings.TrimSpace(e.mustExec("docker", "inspect", "--format", "{{.State.Status}}", ref)); st != "running" {
			t.Errorf("VM container %s is %s, want running", short(ref), st)
		}
	}
}

func poolClean(vms []*pb.VM, size int) bool {
	if len(vms) != size {
		return false
	}
	for _, vm := range vms {
		if vm.GetState() != pb.VMState_VM_STATE_READY || vm.GetLeaseId() != "" {
			return false
		}
	}
	return true
}

// waitPoolReady waits until every pool's VMs are READY and returns the total
// pool size.
func (e *env) waitPoolReady(ctx context.Context, timeout time.Duration) int {
	t := e.t
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pr, err1 := e.vmm.ListPools(cctx, &pb.ListPoolsRequest{})
		vr, err2 := e.vmm.ListVMs(cctx, &pb.ListVMsRequest{})
		cancel()
		if err1 == nil && err2 == nil {
			size := 0
			for _, p := range pr.GetPools() {
				// Warm spares are booted VMs too (deploy/vmmanager.compose.yaml).
				size += int(p.GetSize() + p.GetWarmSpares())
			}
			if size > 0 && poolClean(vr.GetVms(), size) {
				return size
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("VM pool not ready after %s (%v, %v)", timeout, err1, err2)
		}
		time.Sleep(time.Second)
	}
}

// --- progress watcher -----------------------------------------------------------

// watcher polls GetRollout, riding out coordinator restarts.
type watcher struct {
	mu     sync.Mutex
	ro     *pb.Rollout
	cancel context.CancelFunc
	done   chan struct{}
}

func (e *env) watch(ctx context.Context, id string) *watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		lastLog := time.Time{}
		for ctx.Err() == nil {
			cctx, c := context.WithTimeout(ctx, 5*time.Second)
			ro, err := e.coord.GetRollout(cctx, &pb.GetRolloutRequest{RolloutId: id})
			c()
			if err == nil {
				w.mu.Lock()
				w.ro = ro
				w.mu.Unlock()
				if time.Since(lastLog) > 15*time.Second {
					e.t.Logf("progress: %s", progressLine(ro.GetProgress()))
					lastLog = time.Now()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *watcher) stop() { w.cancel(); <-w.done }

func (w *watcher) rollout() *pb.Rollout {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ro
}

func (w *watcher) last() *pb.RolloutProgress { return w.rollout().GetProgress() }

func (w *watcher) waitDone(t *testing.T, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for w.last().GetDone() < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d episodes done after %s: %s", n, timeout, progressLine(w.last()))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitProgress waits until one more episode is done than now.
func (w *watcher) waitProgress(t *testing.T, what string, timeout time.Duration) {
	t.Helper()
	if finished(w.rollout()) {
		return
	}
	w.waitDone(t, w.last().GetDone()+1, timeout)
	t.Logf("progress %s: %s", what, progressLine(w.last()))
}

// requireRunning fails when the rollout ended before all the chaos happened:
// then the test proves nothing and the rollout must be made bigger.
func (w *watcher) requireRunning(t *testing.T, what string) {
	t.Helper()
	if ro := w.rollout(); finished(ro) {
		t.Fatalf("rollout %s already %s %s: make examples/tasks/e2e bigger", ro.GetRolloutId(), ro.GetState(), what)
	}
}

func (w *watcher) waitFinished(t *testing.T, timeout time.Duration) *pb.Rollout {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !finished(w.rollout()) {
		if time.Now().After(deadline) {
			t.Fatalf("rollout not finished after %s: %s", timeout, progressLine(w.last()))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return w.rollout()
}

func finished(ro *pb.Rollout) bool {
	switch ro.GetState() {
	case pb.RolloutState_ROLLOUT_STATE_FINISHED, pb.RolloutState_ROLLOUT_STATE_CANCELLED, pb.RolloutState_ROLLOUT_STATE_FAILED:
		return true
	}
	return false
}

func progressLine(p *pb.RolloutProgress) string {
	return fmt.Sprintf("%d done, %d running, %d queued, %d failed, %d aborted, %d requeued",
		p.GetDone(), p.GetRunning(), p.GetQueued(), p.GetFailed(), p.GetAborted(), p.GetRequeued())
}

// --- docker and compose ---------------------------------------------------------

func (e *env) dialAll() {
	dial := func(addr string) *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			e.t.Fatalf("dial %s: %v", addr, err)
		}
		// The tests share the connections; TestMain closes them.
		shared.conns = append(shared.conns, conn)
		return conn
	}
	e.coord = pb.NewCoordinatorClient(dial(coordinatorAddr))
	e.storage = pb.NewStorageClient(dial(storageAddr))
	e.vmm = pb.NewVMManagerClient(dial(vmmanagerAddr))
}

func (e *env) exec(name string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir = e.root
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (e *env) mustExec(name string, args ...string) string {
	e.t.Helper()
	out, err := e.exec(name, args...)
	if err != nil {
		e.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (e *env) composeOut(args ...string) string {
	e.t.Helper()
	return e.mustExec(e.compose[0], append(e.compose[1:], args...)...)
}

func (e *env) composeRun(args ...string) {
	e.t.Helper()
	e.t.Logf("$ %s %s", strings.Join(e.compose, " "), strings.Join(args, " "))
	e.composeOut(args...)
}

// serviceContainers lists the full ids of svc's running containers, in a
// stable order.
func (e *env) serviceContainers(svc string) []string {
	e.t.Helper()
	ids := strings.Fields(e.composeOut("ps", "-q", svc))
	sort.Strings(ids)
	return ids
}

// guestContainers lists every guest container (full ids), any state.
func (e *env) guestContainers() map[string]bool {
	e.t.Helper()
	return setOf(strings.Fields(e.mustExec("docker", "ps", "-aq", "--no-trunc", "--filter", "label="+guestLabel)))
}

// waitProjectHealthy waits until every container of the project is healthy
// (or running, when it has no health check), like scripts/compose-wait.sh.
func (e *env) waitProjectHealthy(timeout time.Duration) {
	e.t.Helper()
	for _, c := range strings.Fields(e.composeOut("ps", "-q")) {
		e.waitHealthy(c, timeout)
	}
}

func (e *env) waitHealthy(c string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := e.exec("docker", "inspect", "--format", "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", c)
		f := strings.Fields(out)
		if err == nil && len(f) == 2 && f[0] == "running" && (f[1] == "healthy" || f[1] == "none") {
			return
		}
		if time.Now().After(deadline) {
			logs, _ := e.exec("docker", "logs", "--tail", "40", c)
			e.t.Fatalf("container %s not healthy after %s: %s\n%s", short(c), timeout, strings.TrimSpace(out), logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (e *env) waitState(c, want string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, _ := e.exec("docker", "inspect", "--format", "{{.State.Status}}", c)
		if strings.TrimSpace(out) == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("container %s is %s after %s, want %s", short(c), strings.TrimSpace(out), timeout, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func setOf(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
