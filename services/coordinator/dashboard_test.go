package coordinator_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

// TestDashboardNamesCoordinatorMetrics: every coordinator metric the Grafana
// dashboard queries is one the coordinator exports once a rollout has run,
// so a renamed metric cannot leave a panel silently empty.
func TestDashboardNamesCoordinatorMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "rolloutmesh-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\bcoordinator_[a-z_]+`)
	queried := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				queried[n] = true
			}
		}
	}
	if !queried["coordinator_rollout_success_rate"] || !queried["coordinator_rollout_failed_episodes"] {
		t.Fatalf("the dashboard shows no rewards: queried %v", queried)
	}

	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 30*time.Second)
	h.runner(simrunner.Options{ID: "r", Slots: 4, Status: func(a *pb.Assignment) pb.EpisodeStatus {
		if a.Episode.Seed == 0 {
			return pb.EpisodeStatus_EPISODE_STATUS_FAILED
		}
		return pb.EpisodeStatus_EPISODE_STATUS_DONE
	}})
	ro, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Tasks: mathTasks(2), GroupSize: 2, MaxAttempts: 1, OnGroupFailure: pb.GroupFailurePolicy_GROUP_FAILURE_POLICY_REPORT}})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, h.client, ro.RolloutId, 2)
	families, err := h.env.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range families {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+s] = true
			}
		}
	}
	for n := range queried {
		if !exported[n] {
			t.Errorf("the dashboard queries %s, which the coordinator does not export", n)
		}
	}
}
