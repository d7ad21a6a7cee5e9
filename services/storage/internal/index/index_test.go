package index

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
			if steps, _ := db.Steps(ctx, "ghost", 1<<20); len(steps) != 0 {
				t.Errorf("ghost steps stored: %v", steps)
			}
		})
	}
}

// eachIndex runs fn against an empty index of every backend.
func eachIndex(t *testing.T, fn func(t *testing.T, db *DB)) {
	for name, dsn := range dsns(t) {
		t.Run(name, func(t *testing.T) {
			db, err := Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			fn(t, db)
		})
	}
}

func TestLaterAttemptRestartsTrajectory(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		attempt := func(n int32, steps int, version int64) {
			t.Helper()
			b := &Batch{Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1", Attempt: n,
				Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING}}}}
			for i := 0; i < steps; i++ {
				b.Steps = append(b.Steps, StepRecord{Step: &pb.Step{EpisodeId: "e1", Index: int32(i), Error: fmt.Sprint("attempt ", n),
					ModelCall: &pb.ModelCall{ModelVersion: version}}, Attempt: n})
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
		steps, err := db.Steps(ctx, "e1", 1<<20)
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

// TestCommitDuplicatesAcrossChunks: steps go in by multi-row INSERTs of
// rowsPerInsert; a step stored before, or repeated in the batch (in the same
// chunk or a later one), is a duplicate, and only new steps count, carry
// their model version and reference their blobs.
func TestCommitDuplicatesAcrossChunks(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		step := func(i int32, version int64) StepRecord {
			sha := fmt.Sprintf("%064x", i)
			return StepRecord{
				Step:  &pb.Step{EpisodeId: "chunky", Index: i, ModelCall: &pb.ModelCall{ModelVersion: version}},
				Blobs: []BlobRecord{{SHA256: sha, Size: int64(i) + 1, MediaType: "image/png", Loc: fmt.Sprintf("0:%d", 4096*int(i))}},
			}
		}
		first := &Batch{
			Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "chunky", RolloutId: "rc"}}},
			Steps:    []StepRecord{step(1, 1)},
		}
		if _, err := db.Commit(ctx, []*Batch{first}); err != nil {
			t.Fatal(err)
		}
		// Steps 0..rowsPerInsert+9, with step 1 stored before, step 0
		// repeated in the first chunk and step 5 repeated in the second.
		var b Batch
		var want []bool
		for i := range int32(rowsPerInsert + 10) {
			b.Steps = append(b.Steps, step(i, int64(i%3)))
			want = append(want, i == 1)
			if i == 2 {
				b.Steps = append(b.Steps, step(0, 9))
				want = append(want, true)
			}
			if i == rowsPerInsert+2 {
				b.Steps = append(b.Steps, step(5, 9))
				want = append(want, true)
			}
		}
		res, err := db.Commit(ctx, []*Batch{&b})
		if err != nil {
			t.Fatal(err)
		}
		if got := res[0].Duplicate; !slices.Equal(got, want) {
			t.Errorf("duplicates differ at %v", diffAt(got, want))
		}
		ep, err := db.GetEpisode(ctx, "chunky")
		if err != nil {
			t.Fatal(err)
		}
		// Version 9 came only with repeated steps, which are not stored.
		if got, want := ep.GetNumSteps(), int32(rowsPerInsert+10); got != want || !slices.Equal(ep.GetModelVersions(), []int64{0, 1, 2}) {
			t.Errorf("num_steps %d versions %v, want %d [0 1 2]", got, ep.GetModelVersions(), want)
		}
		rec, err := db.Blob(ctx, fmt.Sprintf("%064x", rowsPerInsert+3))
		if err != nil || rec.Loc != fmt.Sprintf("0:%d", 4096*(rowsPerInsert+3)) || rec.Size != rowsPerInsert+4 {
			t.Errorf("blob of a second-chunk step = %+v, %v", rec, err)
		}
	})
}

func diffAt(got, want []bool) []int {
	var at []int
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			at = append(at, i)
		}
	}
	return at
}

// TestSQLiteWriterSettings reads back the settings every connection of the
// SQLite writer must run with: a commit durable before AppendSteps answers,
// and statement journals in memory rather than in a temp file per statement.
func TestSQLiteWriterSettings(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"synchronous", "2"}, // FULL
		{"temp_store", "2"},  // MEMORY
	} {
		var got string
		if err := db.w.QueryRowContext(ctx, "PRAGMA "+tc.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
		}
		if got != tc.want {
			t.Errorf("writer PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
		}
	}
}

// TestEarlierAttemptHeaderNeverRollsBack: a retried stream of an earlier
// attempt may replay its RUNNING header after the episode was requeued and
// the later attempt stored steps. That header must not take the episode
// back to the earlier attempt: the later attempt's next header would then
// count as a new attempt and drop the steps it had stored (acknowledged).
func TestEarlierAttemptHeaderNeverRollsBack(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		header := func(attempt int32, status pb.EpisodeStatus, steps int) {
			t.Helper()
			b := &Batch{Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1", Attempt: attempt, Status: status}}}}
			for i := 0; i < steps; i++ {
				b.Steps = append(b.Steps, StepRecord{Step: &pb.Step{EpisodeId: "e1", Index: int32(i), Error: fmt.Sprint("attempt ", attempt)}, Attempt: attempt})
			}
			if _, err := db.Commit(ctx, []*Batch{b}); err != nil {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
		}
		running, done := pb.EpisodeStatus_EPISODE_STATUS_RUNNING, pb.EpisodeStatus_EPISODE_STATUS_DONE
		header(1, running, 3)
		header(2, running, 2)
		header(1, running, 0) // the replayed header of attempt 1
		header(2, done, 0)    // attempt 2 finishes

		ep, err := db.GetEpisode(ctx, "e1")
		if err != nil {
			t.Fatal(err)
		}
		steps, err := db.Steps(ctx, "e1", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprintf("attempt %d, %s, num_steps %d, %d steps", ep.GetAttempt(), ep.GetStatus(), ep.GetNumSteps(), len(steps)),
			"attempt 2, EPISODE_STATUS_DONE, num_steps 2, 2 steps"; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

// TestStepsOfAnotherAttemptRefused: a step commits only while the stored
// episode is at the attempt its stream's header named. A step of an
// earlier attempt, new or at an index the current attempt stored, is
// refused with the rest of its batch and changes nothing.
func TestStepsOfAnotherAttemptRefused(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		b := &Batch{Episodes: []EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "e1", RolloutId: "r1", Attempt: 2}}},
			Steps: []StepRecord{{Step: &pb.Step{EpisodeId: "e1", Index: 0, Error: "attempt 2"}, Attempt: 2}}}
		if _, err := db.Commit(ctx, []*Batch{b}); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name    string
			attempt int32
			index   int32
			stale   bool
		}{
			{"earlier attempt, new index", 1, 1, true},
			{"earlier attempt, index stored", 1, 0, true},
			{"attempt never stored", 3, 1, true},
			{"stored attempt", 2, 1, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				b := &Batch{Steps: []StepRecord{
					{Step: &pb.Step{EpisodeId: "e1", Index: 5, Error: "attempt 2"}, Attempt: 2},
					{Step: &pb.Step{EpisodeId: "e1", Index: tt.index, Error: fmt.Sprint("attempt ", tt.attempt)}, Attempt: tt.attempt},
				}}
				_, err := db.Commit(ctx, []*Batch{b})
				if got := errors.Is(err, ErrStaleAttempt); got != tt.stale {
					t.Fatalf("Commit = %v; stale %v, want %v", err, got, tt.stale)
				}
				steps, err := db.Steps(ctx, "e1", 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, s := range steps {
					got = append(got, fmt.Sprintf("%d:%s", s.GetIndex(), s.GetError()))
				}
				want := []string{"0:attempt 2"}
				if !tt.stale {
					want = []string{"0:attempt 2", "1:attempt 2", "5:attempt 2"}
				}
				if !slices.Equal(got, want) {
					t.Errorf("stored steps %v, want %v", got, want)
				}
			})
		}
	})
}
