package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"
)

// TestAcceptanceDesktop is issue 8's acceptance run: 8 desktop tasks ×
// group_size 4 over 3 process VMs (desktopd on its own Xvfb) and 2 real
// runners with scripted fakellm behind the real gateway and real storage.
// GetBatch(8) returns two whole groups at a time; vmmanager shows leases
// held by episode ids while it runs; kill -9 of the coordinator process
// half-way changes nothing in the final counts.
func TestAcceptanceDesktop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 32 desktop episodes on real X servers (about a minute); not in -short")
	}
	for _, bin := range []string{"Xvfb", "openbox", "xterm"} {
		if _, err := os.Stat("/usr/bin/" + bin); err != nil {
			t.Fatalf("%s is required for the desktop acceptance test (apt-get install xvfb openbox xterm)", bin)
		}
	}
	m := startMesh(t, 0)
	venv := daemontest.Env(t)
	vctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vsvc, err := vmmanager.New(vctx, vmmanager.Config{Pools: []vmmanager.PoolSpec{{
		Name: "default", Provider: "process", Size: 3, ScreenWidth: 1280, ScreenHeight: 720,
		ClientPassword: "password", BootTimeout: vmmanager.Duration(60 * time.Second),
		Process: &vmmanager.ProcessSpec{Desktopd: desktopdBinary(t), BasePort: 17400, BaseDisplay: 190},
	}}}, venv)
	if err != nil {
		t.Fatalf("vmmanager.New: %v", err)
	}
	vmAddr := daemontest.Serve(t, venv, vsvc)
	vm := vmClient(t, vmAddr)

	// The bundled OSWorld-format task, eight times under different ids.
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "tasks", "desktop-xterm-file.json"))
	if err != nil {
		t.Fatal(err)
	}
	var task map[string]any
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 8; i++ {
		task["id"] = fmt.Sprintf("xterm-file-%d", i)
		b, _ := json.Marshal(task)
		lines = append(lines, string(b))
	}
	taskDir := t.TempDir()
	src := filepath.Join(taskDir, "tasks.jsonl")
	if err := os.WriteFile(src, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}

	dataDir, addr := t.TempDir(), proctest.FreeAddr(t)
	args := []string{"--vmmanager", vmAddr, "--storage", m.storageAddr, "--gateway", m.gatewayAddr, "--adopt-grace", "10s", "--task-root", taskDir}
	p := startProcess(t, dataDir, addr, args...)
	for _, id := range []string{"runner-a", "runner-b"} {
		env := daemontest.Env(t)
		svc, err := runner.New(context.Background(), runner.Config{
			Coordinator: addr, Gateway: m.gatewayAddr, Storage: m.storageAddr, Slots: 2, RunnerID: id,
			CacheDir: t.TempDir(), EnvModes: "desktop", ClientPassword: "password", StorageBuffer: 64,
			DefaultEpisodeTimeout: 2 * time.Minute,
		}, env)
		if err != nil {
			t.Fatalf("runner.New: %v", err)
		}
		daemontest.Serve(t, env, svc)
	}
	ctx := ctxT(t, 5*time.Minute)
	ro, err := p.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "acceptance", Spec: &pb.RolloutSpec{
		TaskSource: src, EnvMode: "desktop", GroupSize: 4, BatchSize: 8,
		Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10, EpisodeTimeout: durationpb.New(2 * time.Minute),
		Agent: &pb.AgentConfig{Model: "fake-model", ActionSpace: "pyautogui", ObservationType: "screenshot", MaxTurns: 5},
	}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	// Leases are held by episode ids while episodes run.
	sawLeases := false
	for !sawLeases && ctx.Err() == nil {
		resp, err := vm.ListLeases(ctx, &pb.ListLeasesRequest{HolderPrefix: ro.RolloutId + "-e"})
		if err != nil {
			t.Fatal(err)
		}
		sawLeases = len(resp.Leases) > 0
		time.Sleep(50 * time.Millisecond)
	}

	episodes := map[string]int{}
	groups := 0
	take := func(c pb.CoordinatorClient) bool {
		t.Helper()
		resp, err := c.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 8, Timeout: durationpb.New(3 * time.Minute)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			return true
		}
		if len(resp.Groups) != 2 {
			t.Fatalf("batch of %d groups, want 2", len(resp.Groups))
		}
		for _, g := range resp.Groups {
			groups++
			for _, ep := range g.Episodes {
				episodes[ep.EpisodeId]++
				if ep.VmId == "" || ep.Status != pb.EpisodeStatus_EPISODE_STATUS_DONE {
					t.Errorf("episode %s: status %v on vm %q", ep.EpisodeId, ep.Status, ep.VmId)
				}
			}
		}
		if _, err := c.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
		return false
	}
	take(p.client)
	p.kill()
	p = startProcess(t, dataDir, addr, args...)
	for !take(p.client) {
	}
	if groups != 8 || len(episodes) != 32 {
		t.Errorf("%d groups, %d distinct episodes handed out; want 8 and 32", groups, len(episodes))
	}
	for id, n := range episodes {
		if n != 1 {
			t.Errorf("episode %s handed out %d times", id, n)
		}
	}
	got, err := p.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		t.Fatal(err)
	}
	pr := got.Progress
	if got.State != pb.RolloutState_ROLLOUT_STATE_FINISHED || pr.Done != 32 || pr.GroupsConsumed != 8 {
		t.Errorf("final %v %+v, want FINISHED, 32 done, 8 groups consumed", got.State, pr)
	}
	t.Logf("success rate %.2f, requeued %d, failed attempts %d", pr.SuccessRate, pr.Requeued, pr.Failed)
	// Every lease is given back.
	waitHolders(t, ctx, vm, nil)
}
