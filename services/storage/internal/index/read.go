package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func timeNS(ts *timestamppb.Timestamp) int64 {
	if ts == nil {
		return 0
	}
	return ts.AsTime().UnixNano()
}

func nsTime(ns int64) *timestamppb.Timestamp {
	if ns == 0 {
		return nil
	}
	return timestamppb.New(time.Unix(0, ns))
}

// EpisodeAttempt returns the attempt of a stored episode, and whether it
// is stored.
func (db *DB) EpisodeAttempt(ctx context.Context, id string) (int32, bool, error) {
	var attempt int32
	err := db.r.QueryRowContext(ctx, db.q(`SELECT attempt FROM episodes WHERE episode_id = ?`), id).Scan(&attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("look up episode %s: %w", id, err)
	}
	return attempt, true, nil
}

// Blob returns a blob's record.
func (db *DB) Blob(ctx context.Context, sha string) (BlobRecord, error) {
	b := BlobRecord{SHA256: sha}
	err := db.blobStmt.QueryRowContext(ctx, sha).Scan(&b.Size, &b.MediaType, &b.Loc)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("blob %s: %w", sha, ErrNotFound)
	}
	if err != nil {
		return b, fmt.Errorf("look up blob %s: %w", sha, err)
	}
	return b, nil
}

// GetEpisode returns one episode with its derived fields filled.
func (db *DB) GetEpisode(ctx context.Context, id string) (*pb.Episode, error) {
	eps, err := db.scanEpisodes(ctx, `SELECT episode_id, num_steps, body FROM episodes WHERE episode_id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("episode %s: %w", id, ErrNotFound)
	}
	return eps[0], nil
}

// ErrTooLarge reports rows too large to read back in one piece.
var ErrTooLarge = errors.New("too large to read in one piece")

// MaxPageBytes bounds the episode bodies one ListEpisodes page holds: a
// page of 1,000 episodes whose headers are megabytes each (a long system
// prompt) would otherwise be gigabytes in memory for one call, and more
// than a gRPC message carries. A page that reaches it ends early, with a
// cursor to the rest.
const MaxPageBytes = 16 << 20

// Steps returns an episode's steps in index order, or ErrTooLarge once
// their bodies pass maxBytes: an episode may hold a million steps of up to
// megabytes each, and one call must not hold them all in memory.
func (db *DB) Steps(ctx context.Context, episodeID string, maxBytes int64) ([]*pb.Step, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT body FROM steps WHERE episode_id = ? ORDER BY idx`), episodeID)
	if err != nil {
		return nil, fmt.Errorf("query steps of %s: %w", episodeID, err)
	}
	defer rows.Close()
	var steps []*pb.Step
	var total int64
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("scan step: %w", err)
		}
		if total += int64(len(body)); total > maxBytes {
			return nil, fmt.Errorf("steps of episode %s: more than %d bytes: %w", episodeID, maxBytes, ErrTooLarge)
		}
		s := &pb.Step{}
		if err := proto.Unmarshal(body, s); err != nil {
			return nil, fmt.Errorf("decode step of %s: %w", episodeID, err)
		}
		steps = append(steps, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query steps of %s: %w", episodeID, err)
	}
	return steps, nil
}

// Filter selects episodes; zero fields match anything.
type Filter struct {
	RolloutID, GroupID, TaskID, Domain string
	Status                             pb.EpisodeStatus
	MinScore, MaxScore                 *float64
	ModelVersion                       *int64
	// FailureReason selects episodes that failed for this reason (the
	// viewer's filter; the API does not set it).
	FailureReason string
}

// where returns the filter's conditions on episodes e and their arguments.
func (f Filter) where() ([]string, []any) {
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.RolloutID != "" {
		add("e.rollout_id = ?", f.RolloutID)
	}
	if f.GroupID != "" {
		add("e.group_id = ?", f.GroupID)
	}
	if f.TaskID != "" {
		add("e.task_id = ?", f.TaskID)
	}
	if f.Domain != "" {
		add("e.domain = ?", f.Domain)
	}
	if f.Status != pb.EpisodeStatus_EPISODE_STATUS_UNSPECIFIED {
		add("e.status = ?", int32(f.Status))
	}
	if f.MinScore != nil {
		add("e.score >= ?", *f.MinScore)
	}
	if f.MaxScore != nil {
		add("e.score <= ?", *f.MaxScore)
	}
	if f.ModelVersion != nil {
		add("EXISTS (SELECT 1 FROM episode_versions v WHERE v.model_version = ? AND v.episode_id = e.episode_id)", *f.ModelVersion)
	}
	if f.FailureReason != "" {
		add("e.failure_reason = ?", f.FailureReason)
	}
	return where, args
}

// Cursor is the position after the last episode of a page.
type Cursor struct {
	StartNS   int64
	EpisodeID string
}

// ListEpisodes returns up to limit episodes after cursor (nil for the first
// page) ordered by start time then id, and the cursor of the next page (nil
// on the last page). A page ends early once its bodies pass MaxPageBytes.
func (db *DB) ListEpisodes(ctx context.Context, f Filter, after *Cursor, limit int) ([]*pb.Episode, *Cursor, error) {
	where, args := f.where()
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if after != nil {
		add("(e.start_ns > ? OR (e.start_ns = ? AND e.episode_id > ?))", after.StartNS, after.StartNS, after.EpisodeID)
	}
	query := `SELECT e.episode_id, e.num_steps, e.body, e.start_ns FROM episodes e`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY e.start_ns, e.episode_id LIMIT ?"
	args = append(args, limit+1)
	rows, err := db.r.QueryContext(ctx, db.q(query), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list episodes: %w", err)
	}
	defer rows.Close()
	var eps []*pb.Episode
	var starts []int64
	var bytes int
	var next *Cursor
	for rows.Next() {
		if len(eps) > 0 && bytes > MaxPageBytes {
			// This row exists, so the page is not the last.
			last := len(eps) - 1
			next = &Cursor{StartNS: starts[last], EpisodeID: eps[last].GetEpisodeId()}
			break
		}
		var id string
		var n int32
		var body []byte
		var start int64
		if err := rows.Scan(&id, &n, &body, &start); err != nil {
			return nil, nil, fmt.Errorf("scan episode: %w", err)
		}
		bytes += len(body)
		ep, err := decodeEpisode(id, n, body)
		if err != nil {
			return nil, nil, err
		}
		eps = append(eps, ep)
		starts = append(starts, start)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list episodes: %w", err)
	}
	if len(eps) > limit {
		eps = eps[:limit]
		next = &Cursor{StartNS: starts[limit-1], EpisodeID: eps[limit-1].GetEpisodeId()}
	}
	if err := db.fillVersions(ctx, eps); err != nil {
		return nil, nil, err
	}
	return eps, next, nil
}

func decodeEpisode(id string, numSteps int32, body []byte) (*pb.Episode, error) {
	ep := &pb.Episode{}
	if err := proto.Unmarshal(body, ep); err != nil {
		return nil, fmt.Errorf("decode episode %s: %w", id, err)
	}
	ep.NumSteps = numSteps
	return ep, nil
}

func (db *DB) scanEpisodes(ctx context.Context, query string, args ...any) ([]*pb.Episode, error) {
	rows, err := db.r.QueryContext(ctx, db.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("query episodes: %w", err)
	}
	defer rows.Close()
	var eps []*pb.Episode
	for rows.Next() {
		var id string
		var n int32
		var body []byte
		if err := rows.Scan(&id, &n, &body); err != nil {
			return nil, fmt.Errorf("scan episode: %w", err)
		}
		ep, err := decodeEpisode(id, n, body)
		if err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query episodes: %w", err)
	}
	return eps, db.fillVersions(ctx, eps)
}

// fillVersions sets model_versions from episode_versions, which the step
// inserts maintain.
func (db *DB) fillVersions(ctx context.Context, eps []*pb.Episode) error {
	if len(eps) == 0 {
		return nil
	}
	byID := make(map[string]*pb.Episode, len(eps))
	args := make([]any, 0, len(eps))
	for _, ep := range eps {
		ep.ModelVersions = nil
		byID[ep.GetEpisodeId()] = ep
		args = append(args, ep.GetEpisodeId())
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT episode_id, model_version FROM episode_versions WHERE episode_id IN (`+marks+`) ORDER BY model_version`), args...)
	if err != nil {
		return fmt.Errorf("query model versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return fmt.Errorf("scan model version: %w", err)
		}
		if ep := byID[id]; ep != nil {
			ep.ModelVersions = append(ep.ModelVersions, v)
		}
	}
	return rows.Err()
}

// StatusGroup aggregates a rollout's episodes of one domain, status and
// failure reason.
type StatusGroup struct {
	Domain, FailureReason string
	Status                pb.EpisodeStatus
	// Episodes, Steps, Successes (DONE with score >= threshold) and the
	// score sum of DONE episodes.
	Episodes, Steps, Successes int64
	ScoreSum                   float64
}

// VersionGroup aggregates the episodes with a step of one model version.
type VersionGroup struct {
	Version                          int64
	Episodes, Done, Steps, Successes int64
	ScoreSum                         float64
}

// aggregates is the SELECT list shared by the statistics queries; status 3
// is EPISODE_STATUS_DONE.
const aggregates = `COUNT(*), COALESCE(SUM(e.num_steps), 0),
  COALESCE(SUM(CASE WHEN e.status = 3 AND e.score >= ? THEN 1 ELSE 0 END), 0),
  COALESCE(SUM(CASE WHEN e.status = 3 THEN e.score ELSE 0 END), 0)`

// RolloutStats aggregates a rollout's episodes in the database, so a
// million-step rollout is summarised without reading its rows out.
func (db *DB) RolloutStats(ctx context.Context, rolloutID string, threshold float64) ([]StatusGroup, []VersionGroup, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT e.domain, e.failure_reason, e.status, `+aggregates+`
FROM episodes e WHERE e.rollout_id = ? GROUP BY e.domain, e.failure_reason, e.status ORDER BY e.domain`), threshold, rolloutID)
	if err != nil {
		return nil, nil, fmt.Errorf("query rollout stats: %w", err)
	}
	defer rows.Close()
	var groups []StatusGroup
	for rows.Next() {
		var g StatusGroup
		var status int32
		if err := rows.Scan(&g.Domain, &g.FailureReason, &status, &g.Episodes, &g.Steps, &g.Successes, &g.ScoreSum); err != nil {
			return nil, nil, fmt.Errorf("scan rollout stats: %w", err)
		}
		g.Status = pb.EpisodeStatus(status)
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("query rollout stats: %w", err)
	}
	rows.Close()
	vrows, err := db.r.QueryContext(ctx, db.q(`SELECT v.model_version, COALESCE(SUM(CASE WHEN e.status = 3 THEN 1 ELSE 0 END), 0), `+aggregates+`
FROM episode_versions v JOIN episodes e ON e.episode_id = v.episode_id
WHERE e.rollout_id = ? GROUP BY v.model_version ORDER BY v.model_version`), threshold, rolloutID)
	if err != nil {
		return nil, nil, fmt.Errorf("query version stats: %w", err)
	}
	defer vrows.Close()
	var versions []VersionGroup
	for vrows.Next() {
		var g VersionGroup
		if err := vrows.Scan(&g.Version, &g.Done, &g.Episodes, &g.Steps, &g.Successes, &g.ScoreSum); err != nil {
			return nil, nil, fmt.Errorf("scan version stats: %w", err)
		}
		versions = append(versions, g)
	}
	return groups, versions, vrows.Err()
}

// TaskReward is the mean score of a task's DONE episodes in a rollout.
type TaskReward struct {
	Domain, TaskID string
	Mean           float64
}

// TaskRewards returns the mean score of DONE episodes per task, and whether
// the rollout has any episode at all.
func (db *DB) TaskRewards(ctx context.Context, rolloutID string) ([]TaskReward, bool, error) {
	var any int
	err := db.r.QueryRowContext(ctx, db.q(`SELECT 1 FROM episodes WHERE rollout_id = ? LIMIT 1`), rolloutID).Scan(&any)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up rollout %s: %w", rolloutID, err)
	}
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT domain, task_id, AVG(score) FROM episodes
WHERE rollout_id = ? AND status = 3 GROUP BY domain, task_id ORDER BY domain, task_id`), rolloutID)
	if err != nil {
		return nil, true, fmt.Errorf("query task rewards: %w", err)
	}
	defer rows.Close()
	var out []TaskReward
	for rows.Next() {
		var r TaskReward
		if err := rows.Scan(&r.Domain, &r.TaskID, &r.Mean); err != nil {
			return nil, true, fmt.Errorf("scan task reward: %w", err)
		}
		out = append(out, r)
	}
	return out, true, rows.Err()
}

// Rollout is a rollout the index holds episodes of.
type Rollout struct {
	ID       string
	Episodes int64
	FirstNS  int64
	LastNS   int64
}

// RolloutCursor is the position after the last rollout of a page.
type RolloutCursor struct {
	FirstNS   int64
	RolloutID string
}

// Rollouts returns up to limit stored rollouts after cursor (nil for the
// first page), newest first (latest first episode start, then id), and
// the cursor of the next page (nil on the last page). A limit of 0 or less
// returns them all (the viewer's list, which no message limit bounds).
//
// A page reads limit+1 rows of the rollouts summary through its index
// rollouts_newest, however many episodes are stored. The summary changes
// in the transactions that change episodes, so every page is exact as of
// its read; but the order is by a rollout's current first start, so a
// rollout whose first start moves between two pages (an episode stored
// with an earlier start, or the episode that had it requeued and started
// again) may be listed twice or not at all, as with any cursor over a key
// that moves.
func (db *DB) Rollouts(ctx context.Context, after *RolloutCursor, limit int) ([]Rollout, *RolloutCursor, error) {
	query, args := rolloutsQuery(after, limit)
	rows, err := db.r.QueryContext(ctx, db.q(query), args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list rollouts: %w", err)
	}
	defer rows.Close()
	var out []Rollout
	for rows.Next() {
		var r Rollout
		if err := rows.Scan(&r.ID, &r.Episodes, &r.FirstNS, &r.LastNS); err != nil {
			return nil, nil, fmt.Errorf("scan rollout: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list rollouts: %w", err)
	}
	var next *RolloutCursor
	if limit > 0 && len(out) > limit {
		out = out[:limit]
		next = &RolloutCursor{FirstNS: out[limit-1].FirstNS, RolloutID: out[limit-1].ID}
	}
	return out, next, nil
}

// rolloutsQuery is the query of a Rollouts page.
func rolloutsQuery(after *RolloutCursor, limit int) (string, []any) {
	query := `SELECT rollout_id, episodes, first_ns, last_ns FROM rollouts`
	var args []any
	if after != nil {
		// first_ns <= ? is the range the index seeks to; the rest skips
		// the rollouts of the cursor's first start listed already.
		query += ` WHERE first_ns <= ? AND (first_ns < ? OR rollout_id > ?)`
		args = append(args, after.FirstNS, after.FirstNS, after.RolloutID)
	}
	query += ` ORDER BY first_ns DESC, rollout_id`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit+1)
	}
	return query, args
}

// ToProto converts a Rollout to its API form.
func (r Rollout) ToProto() *pb.StoredRollout {
	return &pb.StoredRollout{RolloutId: r.ID, Episodes: r.Episodes, FirstStartTime: nsTime(r.FirstNS), LastEndTime: nsTime(r.LastNS)}
}

// Deleted reports what DeleteRollout removed.
type Deleted struct {
	Episodes, Steps int64
	// Candidates are blobs the rollout referenced; those no other episode
	// references may now be removed with DeleteBlobsIfUnreferenced.
	Candidates []string
}

// DeleteRollout removes a rollout's episodes, steps, versions, blob
// references and summary in one transaction. Blob records stay: the caller
// removes the unreferenced ones while keeping concurrent writers safe.
func (db *DB) DeleteRollout(ctx context.Context, rolloutID string) (Deleted, error) {
	var d Deleted
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return d, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	const sub = `(SELECT episode_id FROM episodes WHERE rollout_id = ?)`
	rows, err := tx.QueryContext(ctx, db.q(`SELECT DISTINCT sha256 FROM blob_refs WHERE episode_id IN `+sub), rolloutID)
	if err != nil {
		return d, fmt.Errorf("query blob refs: %w", err)
	}
	for rows.Next() {
		var sha string
		if err := rows.Scan(&sha); err != nil {
			rows.Close()
			return d, fmt.Errorf("scan blob ref: %w", err)
		}
		d.Candidates = append(d.Candidates, sha)
	}
	if err := rows.Err(); err != nil {
		return d, fmt.Errorf("query blob refs: %w", err)
	}
	rows.Close()
	for _, stmt := range []struct {
		query string
		count *int64
	}{
		{`DELETE FROM steps WHERE episode_id IN ` + sub, &d.Steps},
		{`DELETE FROM episode_versions WHERE episode_id IN ` + sub, nil},
		{`DELETE FROM blob_refs WHERE episode_id IN ` + sub, nil},
		{`DELETE FROM episodes WHERE rollout_id = ?`, &d.Episodes},
	} {
		res, err := tx.ExecContext(ctx, db.q(stmt.query), rolloutID)
		if err != nil {
			return d, fmt.Errorf("delete rollout %s: %w", rolloutID, err)
		}
		if stmt.count != nil {
			*stmt.count, _ = res.RowsAffected()
		}
	}
	// A recount rather than a delete of the summary: on PostgreSQL a
	// stream may store a new episode of the rollout meanwhile, which the
	// delete above did not see and which stays.
	if err := db.recountRollout(ctx, tx, rolloutID); err != nil {
		return d, fmt.Errorf("delete rollout %s: %w", rolloutID, err)
	}
	if err := tx.Commit(); err != nil {
		return d, fmt.Errorf("commit: %w", err)
	}
	return d, nil
}

// DeleteBlobsIfUnreferenced removes, in one transaction, the records of the
// blobs no episode references, and returns the removed records.
func (db *DB) DeleteBlobsIfUnreferenced(ctx context.Context, shas []string) ([]BlobRecord, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, db.q(`DELETE FROM blobs WHERE sha256 = ?
AND NOT EXISTS (SELECT 1 FROM blob_refs WHERE sha256 = ?) RETURNING size, media_type, loc`))
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	defer stmt.Close()
	var out []BlobRecord
	for _, sha := range shas {
		b := BlobRecord{SHA256: sha}
		err := stmt.QueryRowContext(ctx, sha, sha).Scan(&b.Size, &b.MediaType, &b.Loc)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete blob record %s: %w", sha, err)
		}
		out = append(out, b)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// EachBlobLocation calls fn with the location and size of every blob that
// has a location, in no particular order, stopping at fn's first error.
func (db *DB) EachBlobLocation(ctx context.Context, fn func(loc string, size int64) error) error {
	rows, err := db.r.QueryContext(ctx, `SELECT loc, size FROM blobs WHERE loc <> ''`)
	if err != nil {
		return fmt.Errorf("list blob locations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var loc string
		var size int64
		if err := rows.Scan(&loc, &size); err != nil {
			return fmt.Errorf("list blob locations: %w", err)
		}
		if err := fn(loc, size); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list blob locations: %w", err)
	}
	return nil
}

// EachBlobDigest calls fn with the digest of every stored blob, after
// telling size how many there are (a hint: blobs committed meanwhile may
// be listed too).
func (db *DB) EachBlobDigest(ctx context.Context, size func(n int), fn func(sha string)) error {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM blobs`).Scan(&n); err != nil {
		return fmt.Errorf("count blobs: %w", err)
	}
	size(n)
	rows, err := db.r.QueryContext(ctx, `SELECT sha256 FROM blobs`)
	if err != nil {
		return fmt.Errorf("list blob digests: %w", err)
	}
	defer rows.Close()
	var sha string
	for rows.Next() {
		if err := rows.Scan(&sha); err != nil {
			return fmt.Errorf("list blob digests: %w", err)
		}
		fn(sha)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list blob digests: %w", err)
	}
	return nil
}

// RolloutExists reports whether the index holds an episode of the rollout.
func (db *DB) RolloutExists(ctx context.Context, rolloutID string) (bool, error) {
	var n int
	err := db.r.QueryRowContext(ctx, db.q(`SELECT 1 FROM episodes WHERE rollout_id = ? LIMIT 1`), rolloutID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up rollout %s: %w", rolloutID, err)
	}
	return true, nil
}

// EachBlob calls fn with every blob record, in hash order, stopping at fn's
// first error.
func (db *DB) EachBlob(ctx context.Context, fn func(BlobRecord) error) error {
	rows, err := db.r.QueryContext(ctx, `SELECT sha256, size, media_type, loc FROM blobs ORDER BY sha256`)
	if err != nil {
		return fmt.Errorf("list blobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var b BlobRecord
		if err := rows.Scan(&b.SHA256, &b.Size, &b.MediaType, &b.Loc); err != nil {
			return fmt.Errorf("list blobs: %w", err)
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list blobs: %w", err)
	}
	return nil
}
