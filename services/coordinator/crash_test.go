package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// coordinatorBinary builds cmd/coordinator once per test run.
func coordinatorBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "coordinator-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "coordinator")
		out, err := exec.Command("go", "build", "-o", binPath, "./cmd/coordinator").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("build coordinator: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// coordProcess is a coordinator running as its own process.
type coordProcess struct {
	cmd    *exec.Cmd
	cc     *grpc.ClientConn
	client pb.CoordinatorClient
}

func startProcess(t *testing.T, dataDir, addr string, extra ...string) *coordProcess {
	t.Helper()
	args := append([]string{"--grpc-addr", addr, "--http-addr", "", "--data-dir", dataDir,
		"--sweep-interval", "20ms", "--log-level", "warn"}, extra...)
	cmd := exec.Command(coordinatorBinary(t), args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start coordinator: %v", err)
	}
	p := &coordProcess{cmd: cmd}
	t.Cleanup(func() { p.kill() })
	var err error
	// Short reconnect backoff: the process is still starting.
	p.cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.5, MaxDelay: 200 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	p.client = pb.NewCoordinatorClient(p.cc)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := p.client.ListRollouts(ctx, &pb.ListRolloutsRequest{})
		cancel()
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinator did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL: no drain, no final commit.
func (p *coordProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	p.cc.Close()
}

func TestKillNineMidRollout(t *testing.T) {
	dataDir := t.TempDir()
	addr := proctest.FreeAddr(t)
	ctx := ctxT(t, 90*time.Second)
	p := startProcess(t, dataDir, addr)

	delay := func(*pb.Assignment) time.Duration { return 30 * time.Millisecond }
	// r1 and r2 hold their first assignments until the kill, r3 does the
	// work. An assignment goes out before its record is committed (group
	// commit), so one made in the last milliseconds before a kill -9 is
	// unknown after the restart: the coordinator cancels it rather than
	// re-adopting or requeueing it. That is safe, but had r1 and r2 worked,
	// whether any of their episodes was re-adopted or requeued would have
	// depended on when the kill fell.
	var before []*simrunner.Runner
	for _, o := range []simrunner.Options{
		{ID: "r1", Slots: 3, Hold: true},
		{ID: "r2", Slots: 3, Hold: true},
		{ID: "r3", Slots: 3, Delay: delay},
	} {
		r, err := simrunner.Start(p.cc, o)
		if err != nil {
			t.Fatalf("runner %s: %v", o.ID, err)
		}
		t.Cleanup(r.Stop)
		before = append(before, r)
	}
	ro, err := p.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "crash", Spec: &pb.RolloutSpec{
		Tasks: mathTasks(8), GroupSize: 4, BatchSize: 8, Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	handed := map[string]bool{}  // group ids handed out
	acked := map[string]bool{}   // episode ids in acked batches
	episodes := map[string]int{} // episode id → times handed out
	take := func(c pb.CoordinatorClient) (done bool) {
		resp, err := c.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 8, Timeout: durationpb.New(20 * time.Second)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			return true
		}
		if len(resp.Groups) != 2 {
			t.Fatalf("batch with %d groups, want 2", len(resp.Groups))
		}
		for _, g := range resp.Groups {
			if handed[g.GroupId] {
				t.Errorf("group %s handed out again after its batch was acked", g.GroupId)
			}
			handed[g.GroupId] = true
			for _, ep := range g.Episodes {
				episodes[ep.EpisodeId]++
				acked[ep.EpisodeId] = true
			}
		}
		if _, err := c.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
		return false
	}
	take(p.client)
	// Let more finish, then kill -9 with episodes running.
	for {
		r, err := p.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatal(err)
		}
		if r.Progress.Done >= 16 && r.Progress.Running > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.kill()
	for _, r := range before {
		<-r.Done()
	}
	ackedBefore := map[string]bool{}
	for id := range acked {
		ackedBefore[id] = true
	}

	// r1 comes back still running its episodes and claims them; r2 comes
	// back empty-handed, so its episodes are requeued after the grace; r3
	// does not come back.
	time.Sleep(100 * time.Millisecond) // let r3's in-flight "work" settle
	claimed := before[0].Inflight()
	if len(claimed) != 3 {
		t.Fatalf("r1 held %d episodes at the kill, want its 3 slots' worth", len(claimed))
	}
	p = startProcess(t, dataDir, addr, "--adopt-grace", "3s")
	r1, err := simrunner.Start(p.cc, simrunner.Options{ID: "r1", Slots: 3, Delay: delay, Running: claimed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r1.Stop)
	r2, err := simrunner.Start(p.cc, simrunner.Options{ID: "r2", Slots: 3, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r2.Stop)
	after := []*simrunner.Runner{r1, r2}
	readopted := map[string]bool{}
	cancelled := map[string]bool{}
	for _, id := range r1.Welcome().CancelEpisodeIds {
		cancelled[id] = true
	}
	for _, id := range claimed {
		if !cancelled[id] {
			readopted[id] = true
			if err := r1.Complete(id, pb.EpisodeStatus_EPISODE_STATUS_DONE, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for !take(p.client) {
	}
	if got, want := len(handed), 8; got != want {
		t.Errorf("%d groups handed out, want %d", got, want)
	}
	if got, want := len(episodes), 32; got != want {
		t.Errorf("%d distinct episodes handed out, want %d", got, want)
	}
	for id, n := range episodes {
		if n != 1 {
			t.Errorf("episode %s handed out %d times", id, n)
		}
	}
	for _, r := range after {
		for _, a := range r.Assigned() {
			if ackedBefore[a.Episode.EpisodeId] {
				t.Errorf("finished episode %s (acked before the crash) was run again", a.Episode.EpisodeId)
			}
		}
	}
	got, err := p.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		t.Fatal(err)
	}
	pr := got.Progress
	if got.State != pb.RolloutState_ROLLOUT_STATE_FINISHED || pr.Done != 32 || pr.GroupsConsumed != 8 || pr.Failed != 0 {
		t.Errorf("final: %v %+v, want FINISHED, 32 done exactly once, 8 groups consumed", got.State, pr)
	}
	if pr.Requeued < 3 {
		t.Errorf("%d episodes requeued, want at least r2's 3, which were running at the kill", pr.Requeued)
	}
	if len(readopted) != len(claimed) {
		t.Errorf("%d of r1's %d running episodes re-adopted, want all", len(readopted), len(claimed))
	}
	t.Logf("at the kill r1 held %d episodes (%d re-adopted); %d requeued", len(claimed), len(readopted), pr.Requeued)
	for _, r := range after {
		for _, a := range r.Assigned() {
			if readopted[a.Episode.EpisodeId] {
				t.Errorf("re-adopted episode %s was assigned again", a.Episode.EpisodeId)
			}
		}
	}
}

var (
	vmmOnce sync.Once
	vmmPath string
	vmmErr  error
)

func vmmanagerBinary(t *testing.T) string {
	t.Helper()
	vmmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "coordinator-vmmanager")
		if err != nil {
			vmmErr = err
			return
		}
		vmmPath = filepath.Join(dir, "vmmanager")
		cmd := exec.Command("go", "build", "-o", vmmPath, "./cmd/vmmanager")
		cmd.Dir = filepath.Join("..", "vmmanager")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			vmmErr = &buildError{err, string(out)}
		}
	})
	if vmmErr != nil {
		t.Fatalf("build vmmanager: %v", vmmErr)
	}
	return vmmPath
}

// TestKillNineVMManager kills vmmanager (a real process with process VMs)
// in the middle of a desktop rollout and restarts it: renewals and acquires
// fail for a while, then the rollout finishes with every group once.
func TestKillNineVMManager(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "vmmanager.yaml")
	yaml := fmt.Sprintf("pools:\n  - name: default\n    provider: process\n    size: 2\n    screen_width: 1024\n    screen_height: 768\n    process:\n      desktopd: %s\n      no_display: true\n      base_port: 17500\n      base_display: 200\n", desktopdBinary(t))
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	vmAddr, vmData := proctest.FreeAddr(t), t.TempDir()
	start := func() *exec.Cmd {
		cmd := exec.Command(vmmanagerBinary(t), "--config", cfg, "--data-dir", vmData, "--grpc-addr", vmAddr, "--http-addr", "", "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
		})
		return cmd
	}
	vmm := start()
	h := newHarness(t, coordinator.Config{VMManager: vmAddr, LeaseTTL: 3 * time.Second, LeaseWait: 2 * time.Second})
	ctx := ctxT(t, 2*time.Minute)
	h.runner(simrunner.Options{ID: "r", Slots: 2, Modes: []string{"desktop"},
		Delay: func(*pb.Assignment) time.Duration { return 300 * time.Millisecond }})
	tasks := make([]*pb.Task, 6)
	for i := range tasks {
		tasks[i] = &pb.Task{Id: fmt.Sprintf("d%d", i), EnvMode: "desktop"}
	}
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: tasks, GroupSize: 2, MaxAttempts: 5,
		Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		r, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatal(err)
		}
		if r.Progress.Done >= 4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = vmm.Process.Signal(syscall.SIGKILL)
	_ = vmm.Wait()
	time.Sleep(time.Second)
	start()
	groups := drain(t, h.client, ro.RolloutId, 2)
	seen := map[string]bool{}
	for _, g := range groups {
		for _, ep := range g.Episodes {
			if seen[ep.EpisodeId] {
				t.Errorf("episode %s handed out twice", ep.EpisodeId)
			}
			seen[ep.EpisodeId] = true
		}
	}
	if len(groups) != 6 || len(seen) != 12 {
		t.Errorf("%d groups, %d episodes; want 6 and 12", len(groups), len(seen))
	}
	vm := vmClient(t, vmAddr)
	waitHolders(t, ctx, vm, nil)
}
