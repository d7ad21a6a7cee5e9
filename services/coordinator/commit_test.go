// Tests of calls whose state commit fails: the caller hears of it, and its
// retry stores what the first call changed in memory.

package coordinator_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	_ "modernc.org/sqlite"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// failWrites makes the coordinator's SQLite database refuse inserts into
// table whose new row matches when, as a full disk or a lost database
// would refuse them, until the returned function is called.
func failWrites(t *testing.T, h *harness, table, when string) (restore func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.env.DataDir, "coordinator.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	name := "fail_" + table
	q := fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON %s WHEN %s BEGIN SELECT RAISE(ABORT, 'injected write failure'); END`, name, table, when)
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("create trigger: %v", err)
	}
	return func() {
		if _, err := db.Exec("DROP TRIGGER " + name); err != nil {
			t.Fatalf("drop trigger: %v", err)
		}
	}
}

// TestRetryAfterFailedCommit: a CancelRollout, UpdateModelVersion or
// AckBatch whose commit fails answers with an error, and the caller's retry
// stores the change. A retry used to find memory already changed and answer
// OK with nothing stored (or refuse the version as not newer): after a
// restart the cancelled rollout ran again, the version went back, and the
// acked batch's groups were handed out a second time.
func TestRetryAfterFailedCommit(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		h := newHarness(t, coordinator.Config{})
		ctx := ctxT(t, 30*time.Second)
		ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(2)}})
		if err != nil {
			t.Fatal(err)
		}
		restore := failWrites(t, h, "rollouts", fmt.Sprintf("NEW.state = %d", pb.RolloutState_ROLLOUT_STATE_CANCELLED))
		req := &pb.CancelRolloutRequest{RolloutId: ro.RolloutId, Reason: "test"}
		if _, err := h.client.CancelRollout(ctx, req); err == nil {
			t.Fatal("CancelRollout with its commit refused: OK, want an error")
		}
		restore()
		if _, err := h.client.CancelRollout(ctx, req); err != nil {
			t.Fatalf("retried CancelRollout: %v", err)
		}
		h.restart()
		got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatal(err)
		}
		if p := got.GetProgress(); got.State != pb.RolloutState_ROLLOUT_STATE_CANCELLED || p.Queued != 0 || p.Aborted != 2 {
			t.Errorf("after a restart: %v %v, want CANCELLED with 2 aborted", got.State, p)
		}
	})
	t.Run("model version", func(t *testing.T) {
		gw := &versionGateway{}
		h := newHarness(t, coordinator.Config{GatewayClient: gw})
		ctx := ctxT(t, 30*time.Second)
		restore := failWrites(t, h, "meta", "NEW.key = 'model_version'")
		req := &pb.UpdateModelVersionRequest{Version: 3, UpdateGateway: true}
		if _, err := h.client.UpdateModelVersion(ctx, req); err == nil {
			t.Fatal("UpdateModelVersion with its commit refused: OK, want an error")
		}
		restore()
		got, err := h.client.UpdateModelVersion(ctx, req)
		if err != nil || got.PreviousVersion != 0 {
			t.Fatalf("retried UpdateModelVersion = %v, %v; want OK from version 0", got, err)
		}
		if n := gw.updates(); n != 1 {
			t.Errorf("gateway asked %d times, want once: the retry's version is loaded", n)
		}
		h.restart()
		if got, err := h.client.UpdateModelVersion(ctx, &pb.UpdateModelVersionRequest{Version: 4}); err != nil || got.PreviousVersion != 3 {
			t.Errorf("UpdateModelVersion after a restart = %v, %v; want OK from version 3", got, err)
		}
	})
	t.Run("ack", func(t *testing.T) {
		h := newHarness(t, coordinator.Config{})
		ctx := ctxT(t, 30*time.Second)
		h.runner(simrunner.Options{ID: "r", Slots: 4})
		ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{Tasks: mathTasks(2), GroupSize: 2, BatchSize: 4}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: 4, Timeout: durationpb.New(10 * time.Second)})
		if err != nil || len(b.Groups) != 2 {
			t.Fatalf("GetBatch = %v, %v; want both groups", b, err)
		}
		restore := failWrites(t, h, "batches", "NEW.acked")
		req := &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: b.BatchId}
		if _, err := h.client.AckBatch(ctx, req); err == nil {
			t.Fatal("AckBatch with its commit refused: OK, want an error")
		}
		restore()
		if _, err := h.client.AckBatch(ctx, req); err != nil {
			t.Fatalf("retried AckBatch: %v", err)
		}
		h.restart()
		got, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetProgress().GetGroupsConsumed() != 2 {
			t.Errorf("after a restart %d groups consumed, want 2", got.GetProgress().GetGroupsConsumed())
		}
		again, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, Timeout: durationpb.New(time.Second)})
		if err != nil || len(again.Groups) != 0 || !again.RolloutDone {
			t.Errorf("GetBatch after a restart = %v, %v; want rollout_done and no group handed out again", again, err)
		}
	})
}

// versionGateway loads weights as the gateway does: only a version newer
// than the one it serves.
type versionGateway struct {
	pb.ModelGatewayClient
	mu      sync.Mutex
	version int64
	calls   int
}

func (g *versionGateway) UpdateWeights(_ context.Context, in *pb.UpdateWeightsRequest, _ ...grpc.CallOption) (*pb.UpdateWeightsResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	if in.Version <= g.version {
		return nil, status.Errorf(codes.FailedPrecondition, "version must be greater than the current version: %d <= %d", in.Version, g.version)
	}
	g.version = in.Version
	return &pb.UpdateWeightsResponse{}, nil
}

func (g *versionGateway) updates() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls
}
