package index

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestCheck: an intact index has no problems; a blob reference whose
// record is gone, a rollout summary that is not its episodes' aggregate
// (or of no episodes) and a step body that no longer decodes are each
// named, and RolloutExists and EachBlob see what was committed.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		blob := BlobRecord{SHA256: strings.Repeat("ab", 32), Size: 10, MediaType: "image/png", Loc: "0:0"}
		st := &pb.Step{EpisodeId: "e1", Index: 3, Observation: &pb.Observation{Screenshot: &pb.BlobRef{Sha256: blob.SHA256, Size: 10}}}
		if _, err := db.Commit(ctx, []*Batch{{
			Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1"}}},
			Steps:    []StepRecord{{Step: st, Blobs: []BlobRecord{blob}}},
		}}); err != nil {
			t.Fatal(err)
		}
		if got, err := db.Check(ctx); err != nil || len(got) != 0 {
			t.Fatalf("Check of an intact index = %q, %v; want no problems", got, err)
		}
		for id, want := range map[string]bool{"r1": true, "nope": false} {
			if got, err := db.RolloutExists(ctx, id); err != nil || got != want {
				t.Errorf("RolloutExists(%s) = %v, %v; want %v", id, got, err, want)
			}
		}
		var blobs []BlobRecord
		if err := db.EachBlob(ctx, func(b BlobRecord) error { blobs = append(blobs, b); return nil }); err != nil || !slices.Equal(blobs, []BlobRecord{blob}) {
			t.Errorf("EachBlob = %v, %v; want %v", blobs, err, blob)
		}

		for _, q := range []string{`DELETE FROM blobs`, `UPDATE steps SET body = ?`,
			`UPDATE rollouts SET episodes = 7`, `INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns) VALUES ('ghost', 1, 0, 0)`} {
			args := []any{}
			if strings.Contains(q, "?") {
				args = append(args, []byte{0xff, 0xff, 0xff})
			}
			if _, err := db.w.ExecContext(ctx, db.q(q), args...); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.Check(ctx)
		want := []string{
			"blob reference without a blob record (episode, blob): e1 " + blob.SHA256,
			"rollout summary differs from its episodes (rollout): ghost",
			"rollout summary differs from its episodes (rollout): r1",
			"step body does not decode (episode, index): e1 3",
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Check of a damaged index = %q, %v; want %q", got, err, want)
		}
	})
}

// TestRepairSummary: the rollouts summary rows that differ from their
// episodes (a wrong count, a rollout without a row, a row without
// episodes) are recounted and named, the intact one left alone; then
// Check finds nothing and Rollouts lists the episodes' aggregates, and a
// second repair has nothing to do.
func TestRepairSummary(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		ep := func(id, rollout string, start, end int64) EpisodeRecord {
			return EpisodeRecord{Episode: &pb.Episode{EpisodeId: id, RolloutId: rollout,
				StartTime: timestamppb.New(time.Unix(0, start)), EndTime: timestamppb.New(time.Unix(0, end))}}
		}
		if _, err := db.Commit(ctx, []*Batch{{Episodes: []EpisodeRecord{
			ep("e1", "r1", 100, 200), ep("e2", "r1", 50, 400), ep("e3", "r2", 10, 20), ep("e4", "intact", 5, 6),
		}}}); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`UPDATE rollouts SET episodes = 7, first_ns = 1 WHERE rollout_id = 'r1'`,
			`DELETE FROM rollouts WHERE rollout_id = 'r2'`,
			`INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns) VALUES ('ghost', 1, 0, 0)`} {
			if _, err := db.w.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.RepairSummary(ctx)
		if want := []string{"ghost", "r1", "r2"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("RepairSummary = %q, %v; want %q", got, err, want)
		}
		if problems, err := db.Check(ctx); err != nil || len(problems) != 0 {
			t.Errorf("Check after the repair = %q, %v; want no problems", problems, err)
		}
		rs, _, err := db.Rollouts(ctx, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		gotRows := map[string]string{}
		for _, r := range rs {
			gotRows[r.ID] = fmt.Sprintf("%d %d %d", r.Episodes, r.FirstNS, r.LastNS)
		}
		wantRows := map[string]string{"r1": "2 50 400", "r2": "1 10 20", "intact": "1 5 6"}
		if !maps.Equal(gotRows, wantRows) {
			t.Errorf("Rollouts after the repair = %v, want %v", gotRows, wantRows)
		}
		if again, err := db.RepairSummary(ctx); err != nil || len(again) != 0 {
			t.Errorf("second RepairSummary = %q, %v; want nothing to repair", again, err)
		}
	})
}
