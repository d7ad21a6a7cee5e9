package index

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// dsns returns an SQLite path and, when ROLLOUTMESH_TEST_POSTGRES_DSN is
// set, a PostgreSQL schema of the test's own.
func dsns(t *testing.T) map[string]string {
	out := map[string]string{"sqlite": filepath.Join(t.TempDir(), "index.db")}
	dsn := os.Getenv("ROLLOUTMESH_TEST_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("ROLLOUTMESH_TEST_POSTGRES_DSN is required when CI is set")
		}
		t.Log("ROLLOUTMESH_TEST_POSTGRES_DSN not set; PostgreSQL not tested here")
		return out
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "ix_" + hex.EncodeToString(b[:])
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		db.Exec("DROP SCHEMA " + schema + " CASCADE")
		db.Close()
	})
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	out["postgres"] = u.String()
	return out
}

func TestIndex(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range dsns(t) {
		t.Run(name, func(t *testing.T) {
			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			// Reopening applies no migration twice.
			db, err = Open(ctx, dsn)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer db.Close()
			var versions int
			if err := db.r.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil || versions != SchemaVersion() {
				t.Fatalf("schema_migrations rows = %d (%v), want %d", versions, err, SchemaVersion())
			}

			blob := BlobRecord{SHA256: "abcdef", Size: 3, MediaType: "image/png"}
			batch := &Batch{
				Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1"}}},
				Steps: []StepRecord{
					{Step: &pb.Step{EpisodeId: "e1", Index: 0, ModelCall: &pb.ModelCall{ModelVersion: 2}}, Blobs: []BlobRecord{blob}},
					{Step: &pb.Step{EpisodeId: "e1", Index: 1}, Blobs: []BlobRecord{blob}},
				},
			}
			for i, want := range [][]bool{{false, false}, {true, true}} {
				res, err := db.Commit(ctx, []*Batch{batch})
				if err != nil {
					t.Fatalf("commit %d: %v", i, err)
				}
				if got := res[0].Duplicate; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
					t.Errorf("commit %d duplicates = %v, want %v", i, got, want)
				}
			}
			ep, err := db.GetEpisode(ctx, "e1")
			if err != nil {
				t.Fatal(err)
			}
			if ep.GetNumSteps() != 2 || len(ep.GetModelVersions()) != 1 || ep.GetModelVersions()[0] != 2 {
				t.Errorf("episode num_steps %d versions %v, want 2 [2]", ep.GetNumSteps(), ep.GetModelVersions())
			}
			if recs, err := db.DeleteBlobsIfUnreferenced(ctx, []string{blob.SHA256}); len(recs) != 0 || err != nil {
				t.Errorf("referenced blob deleted (%v, %v)", recs, err)
			}
			d, err := db.DeleteRollout(ctx, "r1")
			if err != nil || d.Episodes != 1 || d.Steps != 2 || len(d.Candidates) != 1 {
				t.Fatalf("DeleteRollout = %+v, %v; want 1 episode, 2 steps, 1 candidate", d, err)
			}
			if recs, err := db.DeleteBlobsIfUnreferenced(ctx, []string{blob.SHA256}); len(recs) != 1 || err != nil || recs[0].Size != 3 {
				t.Errorf("unreferenced blob not deleted (%v, %v)", recs, err)
			}
			// A step of a missing episode fails the commit, and nothing of it stays.
			if _, err := db.Commit(ctx, []*Batch{{Steps: []StepRecord{{Step: &pb.Step{EpisodeId: "ghost", Index: 0}}}}}); err == nil {
				t.Error("commit of a step without its episode succeeded")
			}
			if steps, _ := db.Steps(ctx, "ghost"); len(steps) != 0 {
				t.Errorf("ghost steps stored: %v", steps)
			}
		})
	}
}

func TestLaterAttemptRestartsTrajectory(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range dsns(t) {
		t.Run(name, func(t *testing.T) {
			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			attempt := func(n int32, steps int, version int64) {
				t.Helper()
				b := &Batch{Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1", Attempt: n,
					Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING}}}}
				for i := 0; i < steps; i++ {
					b.Steps = append(b.Steps, StepRecord{Step: &pb.Step{EpisodeId: "e1", Index: int32(i), Error: fmt.Sprint("attempt ", n),
						ModelCall: &pb.ModelCall{ModelVersion: version}}})
				}
				res, err := db.Commit(ctx, []*Batch{b})
				if err != nil {
					t.Fatalf("attempt %d: %v", n, err)
				}
				for i, dup := range res[0].Duplicate {
					if dup {
						t.Errorf("attempt %d step %d taken for a duplicate of the earlier attempt", n, i)
					}
				}
			}
			attempt(1, 3, 1)
			attempt(2, 2, 2)
			// A replay of attempt 2's stream is idempotent and keeps attempt 2.
			attempt(2, 0, 2)

			ep, err := db.GetEpisode(ctx, "e1")
			if err != nil {
				t.Fatal(err)
			}
			steps, err := db.Steps(ctx, "e1")
			if err != nil {
				t.Fatal(err)
			}
			if ep.GetNumSteps() != 2 || len(steps) != 2 {
				t.Fatalf("after attempt 2: num_steps %d, %d steps stored; want 2, 2", ep.GetNumSteps(), len(steps))
			}
			for _, s := range steps {
				if s.GetError() != "attempt 2" {
					t.Errorf("step %d is from %q, want attempt 2", s.GetIndex(), s.GetError())
				}
			}
			if got := ep.GetModelVersions(); len(got) != 1 || got[0] != 2 {
				t.Errorf("model versions %v, want [2] (attempt 1's version dropped)", got)
			}
		})
	}
}
