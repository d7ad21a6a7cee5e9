package coordinator_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"
)

var (
	desktopdOnce sync.Once
	desktopdPath string
	desktopdErr  error
)

// desktopdBinary builds the guest server the process provider runs.
func desktopdBinary(t *testing.T) string {
	t.Helper()
	desktopdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "coordinator-desktopd")
		if err != nil {
			desktopdErr = err
			return
		}
		desktopdPath = filepath.Join(dir, "desktopd")
		cmd := exec.Command("go", "build", "-o", desktopdPath, "./cmd/desktopd")
		cmd.Dir = filepath.Join("..", "..", "guest", "desktopd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			desktopdErr = &buildError{err, string(out)}
		}
	})
	if desktopdErr != nil {
		t.Fatalf("build desktopd: %v", desktopdErr)
	}
	return desktopdPath
}

// startVMManager runs a real vmmanager with a pool of process VMs (desktopd
// without a display) on a loopback port.
func startVMManager(t *testing.T, size, basePort int) (pb.VMManagerClient, string) {
	t.Helper()
	env := daemontest.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := vmmanager.New(ctx, vmmanager.Config{Pools: []vmmanager.PoolSpec{{
		Name: "default", Provider: "process", Size: size, ScreenWidth: 1280, ScreenHeight: 720,
		ClientPassword: "password", BootTimeout: vmmanager.Duration(30 * time.Second),
		Process: &vmmanager.ProcessSpec{Desktopd: desktopdBinary(t), NoDisplay: true, BasePort: basePort, BaseDisplay: 180},
	}}}, env)
	if err != nil {
		t.Fatalf("vmmanager.New: %v", err)
	}
	addr := daemontest.Serve(t, env, svc)
	return vmClient(t, addr), addr
}

func vmClient(t *testing.T, addr string) pb.VMManagerClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewVMManagerClient(cc)
}

func leaseHolders(t *testing.T, ctx context.Context, vm pb.VMManagerClient) []string {
	t.Helper()
	resp, err := vm.ListLeases(ctx, &pb.ListLeasesRequest{})
	if err != nil {
		t.Fatalf("ListLeases: %v", err)
	}
	var out []string
	for _, l := range resp.Leases {
		out = append(out, l.Holder)
	}
	sort.Strings(out)
	return out
}

func waitHolders(t *testing.T, ctx context.Context, vm pb.VMManagerClient, want []string) {
	t.Helper()
	sort.Strings(want)
	for {
		got := leaseHolders(t, ctx, vm)
		if equal(got, want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease holders %v, want %v", got, want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLeasesWithRealVMManager(t *testing.T) {
	vm, vmAddr := startVMManager(t, 3, 17300)
	h := newHarness(t, coordinator.Config{VMManager: vmAddr, LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, LeaseAhead: 1})
	ctx := ctxT(t, 2*time.Minute)
	r := h.runner(simrunner.Options{ID: "r", Slots: 2, Hold: true, Modes: []string{"desktop"}})
	tasks := []*pb.Task{{Id: "t0", EnvMode: "desktop"}, {Id: "t1", EnvMode: "desktop"}}
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: tasks, GroupSize: 2}})
	if err != nil {
		t.Fatalf("StartRollout: %v", err)
	}
	if err := r.WaitFor(ctx, func(as []*pb.Assignment, _ []*pb.Episode, _ []*pb.CancelAssignment) bool { return len(as) == 2 }); err != nil {
		t.Fatalf("assignments: %v", err)
	}
	var held []string
	for _, a := range r.Assigned() {
		if a.Lease == nil || a.Lease.Endpoint == "" || a.Lease.Token != "" {
			t.Fatalf("assignment lease %v: want an endpoint and no token", a.Lease)
		}
		held = append(held, a.Episode.EpisodeId)
	}
	// Every slot is busy: the next queued episode gets its VM ahead of time.
	next := ro.RolloutId + "-e2"
	waitHolders(t, ctx, vm, append(held, next))
	q, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{RolloutId: ro.RolloutId})
	if err != nil {
		t.Fatal(err)
	}
	if q.Episodes[0].LeaseId == "" || q.Episodes[0].RunnerId != "r" {
		t.Errorf("running episode %v: want its runner and lease", q.Episodes[0])
	}
	// Past the TTL the leases live on: the coordinator renews them while the
	// runner heartbeats (and the one leased ahead while it waits).
	time.Sleep(3 * time.Second)
	resp, err := vm.ListLeases(ctx, &pb.ListLeasesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Leases) != 3 {
		t.Fatalf("%d leases after the TTL, want 3 renewed", len(resp.Leases))
	}
	for _, l := range resp.Leases {
		if l.Renewals == 0 {
			t.Errorf("lease %s never renewed", l.LeaseId)
		}
		// The lease says what it is for: the rollout and task from the
		// acquire, the step from the runner's heartbeats at renewal.
		if lb := l.Labels; lb["rollout"] != ro.RolloutId || (lb["task"] != "t0" && lb["task"] != "t1") {
			t.Errorf("lease %s labels %v, want rollout %s and task t0 or t1", l.LeaseId, lb, ro.RolloutId)
		}
		if l.Holder != next && (l.Labels["step"] == "" || l.Labels["phase"] != "acting") {
			t.Errorf("running episode's lease %s labels %v, want its step and phase acting", l.LeaseId, l.Labels)
		}
	}
	// The runner dies: its leases are released and its episodes requeued;
	// the queued episode keeps the VM leased for it.
	r.Stop()
	waitHolders(t, ctx, vm, []string{next})
	h.runner(simrunner.Options{ID: "r2", Slots: 2, Modes: []string{"desktop"}})
	groups := drain(t, h.client, ro.RolloutId, 2)
	if len(groups) != 2 {
		t.Fatalf("got %d groups, want 2", len(groups))
	}
	for _, g := range groups {
		for _, ep := range g.Episodes {
			if ep.VmId == "" {
				t.Errorf("episode %s ran without a VM", ep.EpisodeId)
			}
		}
	}
	waitHolders(t, ctx, vm, nil)

	// What no lease can ever satisfy is refused at StartRollout and
	// AddTasks, naming the field, instead of failing every attempt later:
	// a pool vmmanager does not have, an override the pool's provider (here
	// process, which applies none) refuses.
	refused := []struct {
		name  string
		spec  *pb.RolloutSpec
		field string
	}{
		{"unknown pool", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "desktop"}}, VmPool: "nope"}, "spec.vm_pool"},
		{"task snapshot", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "desktop"}, {Id: "snap", EnvMode: "desktop", EnvConfig: &pb.EnvConfig{Snapshot: "init_state"}}}}, "spec.tasks[1].env_config.snapshot"},
		{"rollout proxy", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "desktop"}}, EnvConfig: &pb.EnvConfig{Proxy: true}}, "spec.env_config.proxy"},
		{"task fixed_ip", &pb.RolloutSpec{Tasks: []*pb.Task{{Id: "a", EnvMode: "desktop", EnvConfig: &pb.EnvConfig{FixedIp: true}}}}, "spec.tasks[0].env_config.fixed_ip"},
	}
	for _, tt := range refused {
		_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: tt.spec})
		if got := status.Code(err); got != codes.FailedPrecondition {
			t.Errorf("%s: StartRollout code = %v (%v), want FailedPrecondition", tt.name, got, err)
			continue
		}
		if msg := status.Convert(err).Message(); !strings.HasPrefix(msg, tt.field+":") {
			t.Errorf("%s: message %q does not name %s", tt.name, msg, tt.field)
		}
	}
	_, err = h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: ro.RolloutId,
		Tasks: []*pb.Task{{Id: "late", EnvMode: "desktop", EnvConfig: &pb.EnvConfig{Proxy: true}}}})
	if got := status.Code(err); got != codes.FailedPrecondition || !strings.HasPrefix(status.Convert(err).Message(), "tasks[0].env_config.proxy:") {
		t.Errorf("AddTasks with a refused override: %v, want FailedPrecondition naming tasks[0].env_config.proxy", err)
	}
	// A math task never leases a VM: no pool check.
	if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(1), VmPool: "nope"}}); err != nil {
		t.Errorf("math rollout naming an unknown pool: %v", err)
	}
}
