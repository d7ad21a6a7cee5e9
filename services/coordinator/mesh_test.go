package coordinator_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// mesh is the rest of the mesh around a coordinator: fakellm behind a real
// modelgateway, a real storage, and real runners.
type mesh struct {
	gatewayAddr, storageAddr string
	storage                  pb.StorageClient
}

// startMesh starts the mesh; ttft slows every model call so that episodes
// are in flight for a while.
func startMesh(t *testing.T, ttft time.Duration) *mesh {
	t.Helper()
	rules, err := fakellm.LoadScript(filepath.Join("..", "..", "examples", "fakellm", "demo.jsonl"))
	if err != nil {
		t.Fatalf("load fakellm script: %v", err)
	}
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{Script: rules, TTFT: ttft, CachedTTFT: ttft})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	genv := daemontest.Env(t)
	gw, err := modelgateway.New(context.Background(), modelgateway.Config{File: &modelgateway.FileConfig{
		Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: f.URL, Kind: modelgateway.KindVLLM, Model: "fake-model"}},
	}}, genv)
	if err != nil {
		t.Fatalf("modelgateway.New: %v", err)
	}
	senv := daemontest.Env(t)
	st, err := storage.New(context.Background(), storage.Config{}, senv)
	if err != nil {
		t.Fatalf("storage.New: %v", err)
	}
	m := &mesh{gatewayAddr: daemontest.Serve(t, genv, gw), storageAddr: daemontest.Serve(t, senv, st)}
	cc, err := grpc.NewClient(m.storageAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	m.storage = pb.NewStorageClient(cc)
	return m
}

// runner starts a real runner replica against the coordinator at addr.
func (m *mesh) runner(t *testing.T, id, coordAddr string, slots int) {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := runner.New(context.Background(), runner.Config{
		Coordinator: coordAddr, Gateway: m.gatewayAddr, Storage: m.storageAddr,
		Slots: slots, RunnerID: id, CacheDir: t.TempDir(), EnvModes: "math",
		DefaultEpisodeTimeout: time.Minute, StorageBuffer: 64,
	}, env)
	if err != nil {
		t.Fatalf("runner.New: %v", err)
	}
	daemontest.Serve(t, env, svc)
}

// TestWholeMesh runs a rollout through real runners (math environment),
// fakellm behind the real gateway and real storage, and takes the batches
// with their trajectories.
func TestWholeMesh(t *testing.T) {
	m := startMesh(t, 0)
	h := newHarness(t, coordinator.Config{Storage: m.storageAddr, Gateway: m.gatewayAddr,
		TaskRoots: []string{filepath.Join("..", "..", "examples", "tasks")}})
	m.runner(t, "runner-a", h.addr, 4)
	m.runner(t, "runner-b", h.addr, 4)
	ctx := ctxT(t, 2*time.Minute)
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Name: "mesh", TaskSource: "math.jsonl", EnvMode: "math",
		Agent:     &pb.AgentConfig{Model: "fake-model", ActionSpace: "tool_calls", MaxTurns: 5, EvaluationMetric: "numeric_match"},
		GroupSize: 4, BatchSize: 8, Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 4,
	}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	seen := map[string]bool{}
	groups := 0
	for {
		resp, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 8, IncludeTrajectories: true, Timeout: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			break
		}
		if resp.BatchId == "" {
			t.Fatal("no batch within a minute")
		}
		for _, g := range resp.Groups {
			groups++
			if len(g.Episodes) != 4 || len(g.Trajectories) != 4 {
				t.Errorf("group %s: %d episodes, %d trajectories; want 4 and 4", g.GroupId, len(g.Episodes), len(g.Trajectories))
			}
			for i, ep := range g.Episodes {
				if seen[ep.EpisodeId] {
					t.Errorf("episode %s handed out twice", ep.EpisodeId)
				}
				seen[ep.EpisodeId] = true
				if ep.Status != pb.EpisodeStatus_EPISODE_STATUS_DONE || ep.Score < 0 || ep.Score > 1 || ep.RunnerId == "" {
					t.Errorf("episode %s: status %v score %v runner %q", ep.EpisodeId, ep.Status, ep.Score, ep.RunnerId)
				}
				if i < len(g.Trajectories) && (g.Trajectories[i].EpisodeId != ep.EpisodeId || len(g.Trajectories[i].Steps) == 0) {
					t.Errorf("trajectory %d of group %s: %s with %d steps", i, g.GroupId, g.Trajectories[i].EpisodeId, len(g.Trajectories[i].Steps))
				}
			}
		}
		if _, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
	}
	got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		t.Fatal(err)
	}
	if int(got.Progress.GroupsTotal) != groups || got.Progress.Done != int64(4*groups) || got.Progress.SuccessRate == 0 {
		t.Errorf("progress %+v after %d groups: want every group consumed and some successes", got.Progress, groups)
	}
	// The gateway is asked to update weights when requested.
	up, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 1, UpdateGateway: true})
	if err != nil {
		t.Fatalf("UpdateModelVersion: %v", err)
	}
	if up.Gateway == nil || up.Gateway.Version != 1 || up.Version != 1 {
		t.Errorf("UpdateModelVersion = %v, want the gateway at version 1", up)
	}
}

// TestWholeMeshCoordinatorKill kills the coordinator process with SIGKILL
// while real runners run episodes, restarts it, and checks the final counts:
// every episode handed out exactly once, every group exactly once.
func TestWholeMeshCoordinatorKill(t *testing.T) {
	m := startMesh(t, 150*time.Millisecond)
	dataDir := t.TempDir()
	addr := proctest.FreeAddr(t)
	args := []string{"--storage", m.storageAddr, "--gateway", m.gatewayAddr, "--adopt-grace", "5s"}
	p := startProcess(t, dataDir, addr, args...)
	// Real runners keep reconnecting to the same address across the crash.
	m.runner(t, "runner-a", addr, 3)
	m.runner(t, "runner-b", addr, 3)
	ctx := ctxT(t, 2*time.Minute)
	tasks := make([]*pb.Task, 8)
	for i := range tasks {
		tasks[i] = &pb.Task{Id: fmt.Sprintf("crate-%d", i), EnvMode: "math", Answer: "252",
			Instruction: "A crate holds 12 boxes and each box holds 7 apples. How many apples are in 3 crates?"}
	}
	ro, err := p.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "mesh-crash", Spec: &pb.RolloutSpec{
		Tasks: tasks, GroupSize: 4, BatchSize: 8, EnvMode: "math", Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 10,
		Agent: &pb.AgentConfig{Model: "fake-model", ActionSpace: "tool_calls", MaxTurns: 5, EvaluationMetric: "numeric_match"}}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	episodes := map[string]int{}
	groups := map[string]int{}
	take := func(c pb.CoordinatorClient) bool {
		resp, err := c.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 8, Timeout: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatalf("GetBatch: %v", err)
		}
		if resp.RolloutDone {
			return true
		}
		for _, g := range resp.Groups {
			groups[g.GroupId]++
			for _, ep := range g.Episodes {
				episodes[ep.EpisodeId]++
			}
		}
		if _, err := c.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			t.Fatalf("AckBatch: %v", err)
		}
		return false
	}
	take(p.client)
	before, err := p.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		t.Fatal(err)
	}
	if before.Progress.Running == 0 {
		t.Fatalf("nothing running at the kill: %+v", before.Progress)
	}
	p.kill()
	p = startProcess(t, dataDir, addr, args...)
	for !take(p.client) {
	}
	if len(groups) != 8 || len(episodes) != 32 {
		t.Errorf("%d groups and %d episodes handed out, want 8 and 32", len(groups), len(episodes))
	}
	for id, n := range groups {
		if n != 1 {
			t.Errorf("group %s handed out %d times", id, n)
		}
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
	if got.State != pb.RolloutState_ROLLOUT_STATE_FINISHED || got.Progress.Done != 32 || got.Progress.GroupsConsumed != 8 {
		t.Errorf("final %v %+v, want FINISHED with 32 done and 8 groups consumed", got.State, got.Progress)
	}
	// The runners came back within the grace: what they were still running
	// or finished while the coordinator was down was taken back. Only
	// results already on the wire at the kill are lost and rerun.
	if got.Progress.Requeued > before.Progress.Running {
		t.Errorf("%d episodes requeued after the restart, more than the %d running at the kill", got.Progress.Requeued, before.Progress.Running)
	}
	t.Logf("running at the kill: %d, requeued after the restart: %d", before.Progress.Running, got.Progress.Requeued)
}

// TestPeerToken checks that the coordinator authenticates to a storage
// that requires a bearer token.
func TestPeerToken(t *testing.T) {
	senv := daemontest.Env(t)
	st, err := storage.New(context.Background(), storage.Config{}, senv)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(sctx, daemon.ServeConfig{GRPCListener: lis, Logger: senv.Logger, Registry: senv.Registry, AuthToken: "s3cret"}, st)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for _, tt := range []struct {
		token, want string
	}{
		{"s3cret", "not found"},     // authenticated: storage has no such episode
		{"wrong", "invalid bearer"}, // refused
	} {
		h := newHarness(t, coordinator.Config{Storage: lis.Addr().String(), PeerToken: tt.token})
		ctx := ctxT(t, 30*time.Second)
		h.runner(simrunner.Options{ID: "r", Slots: 1})
		ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, IncludeTrajectories: true})
		if status.Code(err) != codes.Unavailable || !strings.Contains(strings.ToLower(status.Convert(err).Message()), tt.want) {
			t.Errorf("token %q: GetBatch error %v, want Unavailable mentioning %q", tt.token, err, tt.want)
		}
	}
}
