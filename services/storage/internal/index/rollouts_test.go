package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

const (
	running = pb.EpisodeStatus_EPISODE_STATUS_RUNNING
	done    = pb.EpisodeStatus_EPISODE_STATUS_DONE
	failed  = pb.EpisodeStatus_EPISODE_STATUS_FAILED
)

// header is an episode header with its start and end in nanoseconds (0:
// none).
func header(id, rollout string, attempt int32, status pb.EpisodeStatus, startNS, endNS int64) EpisodeRecord {
	ts := func(ns int64) *timestamppb.Timestamp {
		if ns == 0 {
			return nil
		}
		return timestamppb.New(time.Unix(0, ns))
	}
	return EpisodeRecord{Episode: &pb.Episode{EpisodeId: id, RolloutId: rollout, GroupId: "g", TaskId: "t", Domain: "os",
		Attempt: attempt, Status: status, StartTime: ts(startNS), EndTime: ts(endNS)}}
}

// aggregated lists the rollouts as the release before the summary did:
// by aggregating every stored episode.
func aggregated(t *testing.T, db *DB) []Rollout {
	t.Helper()
	rows, err := db.r.Query(`SELECT rollout_id, COUNT(*), MIN(start_ns), MAX(end_ns) FROM episodes
GROUP BY rollout_id ORDER BY MIN(start_ns) DESC, rollout_id`)
	if err != nil {
		t.Fatalf("aggregate episodes: %v", err)
	}
	defer rows.Close()
	var out []Rollout
	for rows.Next() {
		var r Rollout
		if err := rows.Scan(&r.ID, &r.Episodes, &r.FirstNS, &r.LastNS); err != nil {
			t.Fatalf("aggregate episodes: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("aggregate episodes: %v", err)
	}
	return out
}

// checkSummary fails the test unless the rollouts summary is the
// aggregate of the stored episodes, and Rollouts lists what aggregating
// them lists.
func checkSummary(t *testing.T, db *DB) {
	t.Helper()
	bad, err := db.checkRows(context.Background(), summaryMismatches, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("rollout summaries differing from their episodes: %v", bad)
	}
	got, _, err := db.Rollouts(context.Background(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := aggregated(t, db); !slices.Equal(got, want) {
		t.Errorf("Rollouts = %v\nwant (aggregated) %v", got, want)
	}
}

// pageIDs pages through Rollouts with limit and returns the ids in order.
func pageIDs(t *testing.T, db *DB, limit int, between func(page int)) []string {
	t.Helper()
	var ids []string
	var cur *RolloutCursor
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("pages never end")
		}
		rs, next, err := db.Rollouts(context.Background(), cur, limit)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if next != nil && len(rs) != limit {
			t.Fatalf("page %d holds %d rollouts of %d with more to come", page, len(rs), limit)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if next == nil {
			return ids
		}
		cur = next
		if between != nil {
			between(page)
		}
	}
}

// TestRolloutsSummary: each write that changes episodes changes the
// rollouts listed with them, one step after another: new episodes, their
// ends, re-attempts whose start moves earlier or later (away from the
// rollout's first start or last end, so that the rollout is recounted),
// ignored headers, an episode written twice in one commit, an episode
// moving to another rollout, DeleteRollout.
func TestRolloutsSummary(t *testing.T) {
	ctx := context.Background()
	type step struct {
		name   string
		commit []EpisodeRecord // one batch
		delete string
		want   []Rollout
	}
	steps := []step{
		{name: "new episodes",
			commit: []EpisodeRecord{header("e1", "r1", 1, running, 100, 0), header("e2", "r1", 1, running, 150, 0), header("e3", "r2", 1, running, 300, 0)},
			want:   []Rollout{{"r2", 1, 300, 0}, {"r1", 2, 100, 0}}},
		{name: "episodes end",
			commit: []EpisodeRecord{header("e1", "r1", 1, done, 100, 500), header("e2", "r1", 1, failed, 150, 400)},
			want:   []Rollout{{"r2", 1, 300, 0}, {"r1", 2, 100, 500}}},
		{name: "re-attempt starts earlier",
			commit: []EpisodeRecord{header("e2", "r1", 2, running, 50, 0)},
			want:   []Rollout{{"r2", 1, 300, 0}, {"r1", 2, 50, 500}}},
		{name: "re-attempt of the first start starts later",
			commit: []EpisodeRecord{header("e2", "r1", 3, running, 700, 0)},
			want:   []Rollout{{"r2", 1, 300, 0}, {"r1", 2, 100, 500}}},
		{name: "re-attempt of the first start and last end",
			commit: []EpisodeRecord{header("e1", "r1", 2, running, 800, 0)},
			want:   []Rollout{{"r1", 2, 700, 0}, {"r2", 1, 300, 0}}},
		{name: "header of an earlier attempt ignored",
			commit: []EpisodeRecord{header("e1", "r1", 1, done, 100, 900)},
			want:   []Rollout{{"r1", 2, 700, 0}, {"r2", 1, 300, 0}}},
		{name: "header without a start keeps the stored one",
			commit: []EpisodeRecord{header("e1", "r1", 2, done, 0, 1000)},
			want:   []Rollout{{"r1", 2, 700, 1000}, {"r2", 1, 300, 0}}},
		{name: "new episode written twice in one commit counts as it ends",
			commit: []EpisodeRecord{header("e4", "r2", 1, running, 250, 0), header("e4", "r2", 1, done, 260, 600)},
			want:   []Rollout{{"r1", 2, 700, 1000}, {"r2", 2, 260, 600}}},
		{name: "stored episode written twice in one commit",
			commit: []EpisodeRecord{header("e2", "r1", 4, running, 10, 0), header("e2", "r1", 4, done, 720, 1100)},
			want:   []Rollout{{"r1", 2, 720, 1100}, {"r2", 2, 260, 600}}},
		{name: "episode moves to another rollout",
			commit: []EpisodeRecord{header("e3", "r3", 1, running, 300, 0)},
			want:   []Rollout{{"r1", 2, 720, 1100}, {"r3", 1, 300, 0}, {"r2", 1, 260, 600}}},
		{name: "rollouts with one first start in id order",
			commit: []EpisodeRecord{header("e5", "r0", 1, running, 300, 350)},
			want:   []Rollout{{"r1", 2, 720, 1100}, {"r0", 1, 300, 350}, {"r3", 1, 300, 0}, {"r2", 1, 260, 600}}},
		{name: "DeleteRollout", delete: "r1",
			want: []Rollout{{"r0", 1, 300, 350}, {"r3", 1, 300, 0}, {"r2", 1, 260, 600}}},
		{name: "DeleteRollout of an unknown rollout", delete: "nope",
			want: []Rollout{{"r0", 1, 300, 350}, {"r3", 1, 300, 0}, {"r2", 1, 260, 600}}},
		{name: "last episode leaves its rollout",
			commit: []EpisodeRecord{header("e4", "r3", 1, done, 260, 600)},
			want:   []Rollout{{"r0", 1, 300, 350}, {"r3", 2, 260, 600}}},
		{name: "deleted rollout stored again",
			commit: []EpisodeRecord{header("e1", "r1", 5, running, 50, 0)},
			want:   []Rollout{{"r0", 1, 300, 350}, {"r3", 2, 260, 600}, {"r1", 1, 50, 0}}},
		{name: "episode without a start",
			commit: []EpisodeRecord{header("e6", "r0", 1, pb.EpisodeStatus_EPISODE_STATUS_QUEUED, 0, 0)},
			want:   []Rollout{{"r3", 2, 260, 600}, {"r1", 1, 50, 0}, {"r0", 2, 0, 350}}},
	}
	eachIndex(t, func(t *testing.T, db *DB) {
		for _, s := range steps {
			if s.delete != "" {
				if _, err := db.DeleteRollout(ctx, s.delete); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
			} else if _, err := db.Commit(ctx, []*Batch{{Episodes: s.commit}}); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			got, next, err := db.Rollouts(ctx, nil, 0)
			if err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			if !slices.Equal(got, s.want) || next != nil {
				t.Errorf("%s: Rollouts = %v, %v\nwant %v", s.name, got, next, s.want)
			}
			checkSummary(t, db)
		}
	})
}

// TestRolloutsPages: paging through the rollouts gives each once, in the
// order of the whole list (newest first start first, ties by id), which is
// the order aggregating the episodes gives, whatever the page size.
func TestRolloutsPages(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		var b Batch
		const n = 23
		for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
			r := fmt.Sprintf("r%02d", i)
			// Three rollouts per first start; a later episode each.
			first := int64(i/3*10 + 1)
			b.Episodes = append(b.Episodes, header(r+"-a", r, 1, done, first, first+5), header(r+"-b", r, 1, running, first+int64(i)+1, 0))
		}
		if _, err := db.Commit(ctx, []*Batch{&b}); err != nil {
			t.Fatal(err)
		}
		checkSummary(t, db)
		var want []string
		for _, r := range aggregated(t, db) {
			want = append(want, r.ID)
		}
		if len(want) != n {
			t.Fatalf("%d rollouts aggregated, want %d", len(want), n)
		}
		for _, limit := range []int{1, 2, 3, 5, 22, 23, 24, 1000} {
			if got := pageIDs(t, db, limit, nil); !slices.Equal(got, want) {
				t.Errorf("pages of %d: %v\nwant %v", limit, got, want)
			}
		}
	})
}

// TestRolloutsPagesWhileWriting: writes between pages that leave the
// listed rollouts' first starts where they are (episodes of listed and
// unlisted rollouts starting later and ending, new rollouts starting
// before and after the cursor) leave each rollout listed once; a new
// rollout is listed when it sorts after the cursor.
func TestRolloutsPagesWhileWriting(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		var b Batch
		for i := range 10 {
			r := fmt.Sprintf("r%d", i)
			b.Episodes = append(b.Episodes, header(r+"-0", r, 1, running, int64(100*(i+1)), 0))
		}
		if _, err := db.Commit(ctx, []*Batch{&b}); err != nil {
			t.Fatal(err)
		}
		got := pageIDs(t, db, 3, func(page int) {
			var b Batch
			for i := range 10 {
				r := fmt.Sprintf("r%d", i)
				id := fmt.Sprintf("%s-%d", r, page+1)
				b.Episodes = append(b.Episodes, header(id, r, 1, done, int64(100*(i+1)+page+1), int64(5000+page)))
			}
			// Newer than every listed rollout, and older than all.
			b.Episodes = append(b.Episodes, header(fmt.Sprintf("new-%d", page), fmt.Sprintf("new%d", page), 1, running, 2000, 0),
				header(fmt.Sprintf("old-%d", page), fmt.Sprintf("old%d", page), 1, running, int64(10-page), 0))
			if _, err := db.Commit(ctx, []*Batch{&b}); err != nil {
				t.Fatal(err)
			}
		})
		want := []string{"r9", "r8", "r7", "r6", "r5", "r4", "r3", "r2", "r1", "r0", "old0", "old1", "old2", "old3"}
		if !slices.Equal(got, want) {
			t.Errorf("pages of 3 while writing: %v\nwant %v", got, want)
		}
		checkSummary(t, db)
	})
}

// TestRolloutsQueryPlan: a page of rollouts is read in order from the
// summary's index, never from episodes and never sorted, so it costs the
// page whatever is stored. On PostgreSQL, whose planner scans a small
// table whole, scans and sorts are priced out to see whether the index
// serves the order.
func TestRolloutsQueryPlan(t *testing.T) {
	ctx := context.Background()
	eachIndex(t, func(t *testing.T, db *DB) {
		for _, tc := range []struct {
			name  string
			after *RolloutCursor
			limit int
		}{
			{"first page", nil, 100},
			{"later page", &RolloutCursor{FirstNS: 5, RolloutID: "r"}, 100},
			{"all", nil, 0},
		} {
			query, args := rolloutsQuery(tc.after, tc.limit)
			var plan []string
			tx, err := db.r.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			explain := `EXPLAIN QUERY PLAN `
			if db.dialect == postgresDialect {
				explain = `EXPLAIN `
				for _, set := range []string{`SET LOCAL enable_seqscan = off`, `SET LOCAL enable_sort = off`} {
					if _, err := tx.ExecContext(ctx, set); err != nil {
						t.Fatal(err)
					}
				}
			}
			rows, err := tx.QueryContext(ctx, db.q(explain+query), args...)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
			}
			rows.Close()
			tx.Rollback()
			text := strings.Join(plan, "\n")
			if !strings.Contains(text, "rollouts_newest") || strings.Contains(text, "episodes") ||
				strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, "Sort") {
				t.Errorf("%s: plan\n%s\nwant an index walk of rollouts_newest, no episodes, no sort", tc.name, text)
			}
		}
	})
}

// randomWrites makes n commits of random headers and, now and then, a
// DeleteRollout, checking the summary after each.
func randomWrites(t *testing.T, db *DB, rng *rand.Rand, n int) {
	ctx := context.Background()
	attempts := map[string]int32{}
	rollouts := []string{"ra", "rb", "rc", "rd", "re"}
	for i := range n {
		if rng.IntN(15) == 0 {
			r := rollouts[rng.IntN(len(rollouts))]
			if _, err := db.DeleteRollout(ctx, r); err != nil {
				t.Fatalf("write %d: DeleteRollout(%s): %v", i, r, err)
			}
			checkSummary(t, db)
			continue
		}
		var batches []*Batch
		for range 1 + rng.IntN(3) {
			b := &Batch{}
			for range 1 + rng.IntN(4) {
				e := rng.IntN(30)
				id := fmt.Sprintf("e%02d", e)
				r := rollouts[e%len(rollouts)]
				if rng.IntN(20) == 0 {
					r = rollouts[rng.IntN(len(rollouts))] // a header naming another rollout
				}
				a := attempts[id] + int32(rng.IntN(3)) - 1 // an earlier, the same or the next attempt
				if a > attempts[id] {
					attempts[id] = a
				}
				status := []pb.EpisodeStatus{running, running, done, failed}[rng.IntN(4)]
				var start, end int64
				if rng.IntN(5) > 0 {
					start = 1 + rng.Int64N(1000)
				}
				if rng.IntN(2) == 0 {
					end = 1000 + rng.Int64N(1000)
				}
				b.Episodes = append(b.Episodes, header(id, r, a, status, start, end))
			}
			batches = append(batches, b)
		}
		if _, err := db.Commit(ctx, batches); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		checkSummary(t, db)
		if t.Failed() {
			t.Fatalf("write %d: %d batches, first header %v", i, len(batches), batches[0].Episodes[0].Episode)
		}
	}
}

// TestRolloutsSummaryRandomWrites: after every commit of a random
// sequence (new episodes, re-attempts starting and ending anywhere,
// headers of earlier attempts, without a start, naming another rollout,
// several per commit) and DeleteRollouts, the summary is the aggregate of
// the episodes.
func TestRolloutsSummaryRandomWrites(t *testing.T) {
	eachIndex(t, func(t *testing.T, db *DB) {
		randomWrites(t, db, rand.New(rand.NewPCG(7, 11)), 300)
	})
}

// TestRolloutsBackfill: a database written by the release before the
// summary (schema version 5, rows stored straight into episodes) gets the
// summary at its next open, lists what the aggregation listed, page by
// page too, and keeps it from then on.
func TestRolloutsBackfill(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range dsns(t) {
		t.Run(name, func(t *testing.T) {
			old, err := openAt(ctx, dsn, 5)
			if err != nil {
				t.Fatal(err)
			}
			var tables int
			if err := old.r.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&tables); err != nil || tables != 5 {
				t.Fatalf("old schema at version %d (%v), want 5", tables, err)
			}
			rng := rand.New(rand.NewPCG(3, 5))
			for i := range 60 {
				var start, end int64
				if i%7 > 0 {
					start = 1 + rng.Int64N(50) // ties between rollouts
				}
				if i%3 > 0 {
					end = 100 + rng.Int64N(100)
				}
				if _, err := old.w.Exec(old.q(`INSERT INTO episodes (episode_id, rollout_id, group_id, task_id, domain, status, score,
  start_ns, end_ns, failure_reason, attempt, body) VALUES (?, ?, 'g', 't', 'os', 3, 1, ?, ?, '', 1, ?)`),
					fmt.Sprintf("e%02d", i), fmt.Sprintf("r%d", rng.IntN(9)), start, end, []byte{}); err != nil {
					t.Fatal(err)
				}
			}
			want := aggregated(t, old)
			old.Close()

			db, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("open the old index: %v", err)
			}
			defer db.Close()
			got, _, err := db.Rollouts(ctx, nil, 0)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Rollouts after the upgrade = %v, %v\nwant (aggregated before it) %v", got, err, want)
			}
			var wantIDs []string
			for _, r := range want {
				wantIDs = append(wantIDs, r.ID)
			}
			if got := pageIDs(t, db, 2, nil); !slices.Equal(got, wantIDs) {
				t.Errorf("pages of 2 after the upgrade: %v\nwant %v", got, wantIDs)
			}
			checkSummary(t, db)
			randomWrites(t, db, rng, 40)
		})
	}
}

// TestRolloutsSummaryConcurrentReplicas: two indexes on one PostgreSQL
// database (two storage replicas) write episodes of the same rollouts at
// once, each its own episodes (streams) and some episodes both (a stream
// retried on the other replica), with DeleteRollouts between; the summary
// ends as the aggregate of the episodes. A deadlock PostgreSQL breaks is
// retried, as a client retries a failed stream.
func TestRolloutsSummaryConcurrentReplicas(t *testing.T) {
	// dsns fails the test under CI without PostgreSQL; a developer
	// without it skips this PostgreSQL-only test.
	dsn := dsns(t)["postgres"]
	if dsn == "" {
		t.Skip("ROLLOUTMESH_TEST_POSTGRES_DSN not set")
	}
	ctx := context.Background()
	var dbs []*DB
	for range 2 {
		db, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	rollouts := []string{"ra", "rb", "rc"}
	retry := func(what string, fn func() error) error {
		for {
			err := fn()
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
				t.Logf("%s: deadlock broken, retrying", what)
				continue
			}
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := dbs[w%2]
			rng := rand.New(rand.NewPCG(uint64(w), 13))
			attempt := int32(1)
			for i := range 60 {
				if w == 0 && i%20 == 19 {
					r := rollouts[rng.IntN(len(rollouts))]
					if err := retry("delete", func() error { _, err := db.DeleteRollout(ctx, r); return err }); err != nil {
						errs <- err
						return
					}
					continue
				}
				b := &Batch{}
				if i%5 == 0 {
					// An episode both replicas store.
					id := fmt.Sprintf("shared-%d", i)
					b.Episodes = append(b.Episodes, header(id, rollouts[i%len(rollouts)], 1, running, int64(1000+i), 0))
				} else {
					for range 1 + rng.IntN(3) {
						e := rng.IntN(6)
						id := fmt.Sprintf("w%d-e%d", w, e)
						if rng.IntN(4) == 0 {
							attempt++
						}
						var end int64
						if rng.IntN(2) == 0 {
							end = 5000 + rng.Int64N(1000)
						}
						b.Episodes = append(b.Episodes, header(id, rollouts[e%len(rollouts)], attempt, running, 1+rng.Int64N(2000), end))
					}
				}
				if err := retry("commit", func() error { _, err := db.Commit(ctx, []*Batch{b}); return err }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkSummary(t, dbs[0])
}
