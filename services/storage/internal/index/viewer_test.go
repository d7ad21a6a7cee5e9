package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestViewerQueries: numbered pages, failure-reason filter, step ranges and
// group members, on SQLite and (when configured) PostgreSQL.
func TestViewerQueries(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range dsns(t) {
		t.Run(name, func(t *testing.T) {
			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			b := &Batch{}
			for i := range 23 {
				ep := &pb.Episode{EpisodeId: fmt.Sprintf("e-%02d", i), RolloutId: "r", GroupId: fmt.Sprintf("g-%d", i/4), TaskId: "t",
					Domain: "os", Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: float64(i % 2),
					StartTime: timestamppb.New(t0.Add(time.Duration(i) * time.Second))}
				if i%5 == 0 {
					ep.Status, ep.FailureReason = pb.EpisodeStatus_EPISODE_STATUS_FAILED, "env_error"
				}
				b.Episodes = append(b.Episodes, EpisodeRecord{Episode: ep})
			}
			// Another rollout reusing a group id must not leak into r's groups.
			b.Episodes = append(b.Episodes, EpisodeRecord{Episode: &pb.Episode{EpisodeId: "other", RolloutId: "r2", GroupId: "g-0",
				TaskId: "t", Domain: "os", Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, StartTime: timestamppb.New(t0)}})
			for i := range 7 {
				b.Steps = append(b.Steps, StepRecord{Step: &pb.Step{EpisodeId: "e-00", Index: int32(i)}})
			}
			// Indexes with gaps: 0, 10, 20.
			for i := range 3 {
				b.Steps = append(b.Steps, StepRecord{Step: &pb.Step{EpisodeId: "e-01", Index: int32(10 * i)}})
			}
			if _, err := db.Commit(ctx, []*Batch{b}); err != nil {
				t.Fatal(err)
			}

			for _, tc := range []struct {
				f    Filter
				want int64
			}{
				{Filter{RolloutID: "r"}, 23},
				{Filter{RolloutID: "r", FailureReason: "env_error"}, 5},
				{Filter{RolloutID: "r", FailureReason: "model_error"}, 0},
				{Filter{RolloutID: "nope"}, 0},
			} {
				if got, err := db.CountEpisodes(ctx, tc.f); err != nil || got != tc.want {
					t.Errorf("CountEpisodes(%+v) = %d, %v; want %d", tc.f, got, err, tc.want)
				}
			}
			eps, _, err := db.ListEpisodes(ctx, Filter{RolloutID: "r", FailureReason: "env_error"}, nil, 100)
			if err != nil || len(eps) != 5 {
				t.Fatalf("ListEpisodes by failure reason: %d episodes, %v; want 5", len(eps), err)
			}

			// Page 3 of 10 a page starts at the 21st episode.
			f := Filter{RolloutID: "r"}
			cur, err := db.CursorAt(ctx, f, 20)
			if err != nil {
				t.Fatal(err)
			}
			page, _, err := db.ListEpisodes(ctx, f, cur, 10)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, ep := range page {
				ids = append(ids, ep.GetEpisodeId())
			}
			if want := []string{"e-20", "e-21", "e-22"}; !slices.Equal(ids, want) {
				t.Errorf("page 3 = %v, want %v", ids, want)
			}
			if cur, err := db.CursorAt(ctx, f, 0); err != nil || cur != nil {
				t.Errorf("CursorAt(0) = %v, %v; want nil, nil", cur, err)
			}
			if _, err := db.CursorAt(ctx, f, 24); err == nil {
				t.Error("CursorAt past the end: no error")
			}

			steps, err := db.StepRange(ctx, "e-00", 5, 10)
			if err != nil || len(steps) != 2 || steps[0].GetIndex() != 5 || steps[1].GetIndex() != 6 {
				t.Errorf("StepRange(5, 10) = %v, %v; want steps 5 and 6", steps, err)
			}

			for _, tc := range []struct {
				offset int64
				want   string
			}{{0, "0 <nil>"}, {1, "10 <nil>"}, {2, "20 <nil>"}, {3, "0 not found"}} {
				idx, err := db.StepIndexAt(ctx, "e-01", tc.offset)
				got := fmt.Sprint(idx, " <nil>")
				if err != nil {
					got = fmt.Sprint(idx, " not found")
					if !errors.Is(err, ErrNotFound) {
						got = err.Error()
					}
				}
				if got != tc.want {
					t.Errorf("StepIndexAt(%d) = %s, want %s", tc.offset, got, tc.want)
				}
			}

			members, err := db.GroupMembers(ctx, "r", []string{"g-0", "g-5"})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range members {
				got = append(got, m.GroupID+"/"+m.EpisodeID)
			}
			if want := []string{"g-0/e-00", "g-0/e-01", "g-0/e-02", "g-0/e-03", "g-5/e-20", "g-5/e-21", "g-5/e-22"}; !slices.Equal(got, want) {
				t.Errorf("GroupMembers = %v, want %v", got, want)
			}
		})
	}
}
