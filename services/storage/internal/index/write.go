package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// BlobRecord describes a stored blob.
type BlobRecord struct {
	SHA256    string
	Size      int64
	MediaType string
	// Loc is where the blob store put the blob, as its Put returned it.
	Loc string
}

// EpisodeRecord is an episode header to upsert. Episode must have its blob
// data stripped; NumSteps and ModelVersions are derived and ignored.
type EpisodeRecord struct {
	Episode *pb.Episode
	// Blobs the header references (the recording).
	Blobs []BlobRecord
}

// StepRecord is a step to insert. Step must have its blob data stripped.
type StepRecord struct {
	Step *pb.Step
	// Blobs the step references (observation and message images).
	Blobs []BlobRecord
	// Attempt is the episode attempt the step belongs to: steps carry none
	// of their own, so the writer takes it from the header its stream
	// sent (or the stored episode, when the stream sent none). The step
	// commits only while the stored episode is at this attempt
	// (ErrStaleAttempt otherwise).
	Attempt int32
}

// ErrStaleAttempt reports steps of an episode attempt other than the
// stored one: in practice an earlier one, the episode requeued and its
// next attempt started since their stream's header.
var ErrStaleAttempt = errors.New("not the episode's current attempt")

// Batch is what one AppendSteps stream commits at once. Episode headers are
// applied before the steps.
type Batch struct {
	Episodes []EpisodeRecord
	Steps    []StepRecord
}

// Result tells, per step of a Batch in order, whether it was already stored.
type Result struct {
	Duplicate []bool
}

type encodedStep struct {
	body []byte
}

// Commit writes batches in one transaction, so many streams share one fsync
// (group commit). A step already stored under its (episode_id, index) is left
// as it is and reported as a duplicate. Blob records must name blobs that are
// already durable in the blob store.
func (db *DB) Commit(ctx context.Context, batches []*Batch) ([]Result, error) {
	// Marshal before the transaction so the writer lock is held briefly.
	epBodies := make([][][]byte, len(batches))
	stBodies := make([][][]byte, len(batches))
	opts := proto.MarshalOptions{Deterministic: true}
	for i, b := range batches {
		for _, e := range b.Episodes {
			body, err := opts.Marshal(e.Episode)
			if err != nil {
				return nil, fmt.Errorf("marshal episode %s: %w", e.Episode.GetEpisodeId(), err)
			}
			epBodies[i] = append(epBodies[i], body)
		}
		for _, s := range b.Steps {
			body, err := opts.Marshal(s.Step)
			if err != nil {
				return nil, fmt.Errorf("marshal step %s/%d: %w", s.Step.GetEpisodeId(), s.Step.GetIndex(), err)
			}
			stBodies[i] = append(stBodies[i], body)
		}
	}

	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	st, err := db.prepareWrite(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer st.close()

	results := make([]Result, len(batches))
	for i, b := range batches {
		for j, e := range b.Episodes {
			if err := st.upsertEpisode(ctx, e, epBodies[i][j]); err != nil {
				return nil, err
			}
		}
		if err := st.checkAttempts(ctx, b.Steps); err != nil {
			return nil, err
		}
		inserted, err := db.insertSteps(ctx, tx, b.Steps, stBodies[i])
		if err != nil {
			return nil, err
		}
		if err := db.recordSteps(ctx, tx, b.Steps, inserted); err != nil {
			return nil, err
		}
		added := map[string]int{}
		var order []string
		results[i].Duplicate = make([]bool, len(b.Steps))
		for j, s := range b.Steps {
			results[i].Duplicate[j] = !inserted[j]
			if inserted[j] {
				id := s.Step.GetEpisodeId()
				if _, ok := added[id]; !ok {
					order = append(order, id)
				}
				added[id]++
			}
		}
		for _, id := range order {
			res, err := st.addSteps.ExecContext(ctx, added[id], id)
			if err != nil {
				return nil, fmt.Errorf("count steps of %s: %w", id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return nil, fmt.Errorf("episode %s: %w", id, ErrNotFound)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return results, nil
}

type writeStmts struct {
	episode, blob, ref, addSteps, attempt *sql.Stmt
	// A requeued episode keeps its id and runs again with attempt+1; its
	// steps restart at index 0. The first header of the later attempt
	// discards the earlier attempt's steps, so (episode_id, index) stays the
	// idempotency key within an attempt and training never sees two
	// attempts spliced together.
	dropSteps, dropVersions, zeroSteps *sql.Stmt
}

func (db *DB) prepareWrite(ctx context.Context, tx *sql.Tx) (*writeStmts, error) {
	var st writeStmts
	// On PostgreSQL another replica may commit a later attempt's header
	// between the check of a step's attempt and the insert of the step:
	// the share lock makes that header's transaction wait for this one,
	// and it then drops the steps this one stored (see upsertEpisode).
	// SQLite has one writer at a time.
	attempt := `SELECT attempt FROM episodes WHERE episode_id = ?`
	if db.dialect == postgresDialect {
		attempt += ` FOR SHARE`
	}
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		// A retried stream may replay an old header: a header of an
		// earlier attempt never replaces a later one (the later attempt's
		// next header would take it for a new attempt and drop its steps),
		// and a header that is not terminal never replaces a terminal one
		// of the same attempt. Statuses 3-7 are the terminal ones.
		{&st.episode, `INSERT INTO episodes (episode_id, rollout_id, group_id, task_id, domain, status, score, start_ns, end_ns, failure_reason, attempt, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (episode_id) DO UPDATE SET
  rollout_id = excluded.rollout_id, group_id = excluded.group_id, task_id = excluded.task_id,
  domain = excluded.domain, status = excluded.status, score = excluded.score,
  start_ns = CASE WHEN excluded.start_ns = 0 THEN episodes.start_ns ELSE excluded.start_ns END,
  end_ns = excluded.end_ns, failure_reason = excluded.failure_reason, attempt = excluded.attempt, body = excluded.body
WHERE excluded.attempt > episodes.attempt OR (excluded.attempt = episodes.attempt AND NOT (episodes.status >= 3 AND excluded.status < 3))`},
		{&st.blob, `INSERT INTO blobs (sha256, size, media_type, loc) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.ref, `INSERT INTO blob_refs (episode_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&st.addSteps, `UPDATE episodes SET num_steps = num_steps + ? WHERE episode_id = ?`},
		{&st.attempt, attempt},
		{&st.dropSteps, `DELETE FROM steps WHERE episode_id = ? AND EXISTS (SELECT 1 FROM episodes WHERE episode_id = ? AND attempt < ?)`},
		{&st.dropVersions, `DELETE FROM episode_versions WHERE episode_id = ? AND EXISTS (SELECT 1 FROM episodes WHERE episode_id = ? AND attempt < ?)`},
		{&st.zeroSteps, `UPDATE episodes SET num_steps = 0 WHERE episode_id = ? AND attempt < ?`},
	} {
		s, err := tx.PrepareContext(ctx, db.q(p.query))
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*p.dst = s
	}
	return &st, nil
}

func (st *writeStmts) close() {
	for _, s := range []*sql.Stmt{st.episode, st.blob, st.ref, st.addSteps, st.attempt, st.dropSteps, st.dropVersions, st.zeroSteps} {
		if s != nil {
			s.Close()
		}
	}
}

func (st *writeStmts) upsertEpisode(ctx context.Context, e EpisodeRecord, body []byte) error {
	ep := e.Episode
	id, attempt := ep.GetEpisodeId(), ep.GetAttempt()
	// zeroSteps first: on PostgreSQL it locks the episode row, so steps of
	// the earlier attempt that another transaction is committing (it
	// holds a share lock, see checkAttempts) are committed before
	// dropSteps looks, and dropped with the rest.
	if _, err := st.zeroSteps.ExecContext(ctx, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.dropSteps.ExecContext(ctx, id, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.dropVersions.ExecContext(ctx, id, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.episode.ExecContext(ctx, ep.GetEpisodeId(), ep.GetRolloutId(), ep.GetGroupId(), ep.GetTaskId(),
		ep.GetDomain(), int32(ep.GetStatus()), ep.GetScore(), timeNS(ep.GetStartTime()), timeNS(ep.GetEndTime()),
		ep.GetFailureReason(), ep.GetAttempt(), body); err != nil {
		return fmt.Errorf("upsert episode %s: %w", ep.GetEpisodeId(), err)
	}
	return st.addBlobs(ctx, ep.GetEpisodeId(), e.Blobs)
}

// checkAttempts refuses a batch with a step of an attempt the stored
// episode is no longer (or not) at. Inside the commit's transaction, so no
// header of a later attempt can come between the check and the insert: a
// stale step stored there would become the later attempt's step of that
// index, and a stale step already stored by the later attempt would be
// acknowledged as a duplicate of it.
func (st *writeStmts) checkAttempts(ctx context.Context, steps []StepRecord) error {
	type key struct {
		id      string
		attempt int32
	}
	seen := map[key]bool{}
	for _, s := range steps {
		k := key{s.Step.GetEpisodeId(), s.Attempt}
		if seen[k] {
			continue
		}
		seen[k] = true
		var stored int32
		err := st.attempt.QueryRowContext(ctx, k.id).Scan(&stored)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("episode %s: %w", k.id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("look up attempt of %s: %w", k.id, err)
		}
		if stored != k.attempt {
			return fmt.Errorf("episode %s is at attempt %d; steps of attempt %d (the attempt the stream's header named) refused: %w",
				k.id, stored, k.attempt, ErrStaleAttempt)
		}
	}
	return nil
}

func (st *writeStmts) addBlobs(ctx context.Context, episodeID string, blobs []BlobRecord) error {
	for _, b := range blobs {
		if _, err := st.blob.ExecContext(ctx, b.SHA256, b.Size, b.MediaType, b.Loc); err != nil {
			return fmt.Errorf("record blob %s: %w", b.SHA256, err)
		}
		if _, err := st.ref.ExecContext(ctx, episodeID, b.SHA256); err != nil {
			return fmt.Errorf("record blob ref %s: %w", b.SHA256, err)
		}
	}
	return nil
}

// rowsPerInsert bounds the rows of one multi-row INSERT, and so its
// parameters (four per row at most).
const rowsPerInsert = 256

// insertSteps inserts a batch's steps, a statement per rowsPerInsert of
// them rather than one per step (a round trip each on PostgreSQL), and
// reports per step whether it was new: a step already stored under its
// (episode_id, index), or repeated earlier in the batch, was not.
func (db *DB) insertSteps(ctx context.Context, tx *sql.Tx, steps []StepRecord, bodies [][]byte) ([]bool, error) {
	type key struct {
		episode string
		index   int32
	}
	inserted := make([]bool, len(steps))
	for start := 0; start < len(steps); start += rowsPerInsert {
		chunk := steps[start:min(start+rowsPerInsert, len(steps))]
		args := make([]any, 0, 3*len(chunk))
		for j, s := range chunk {
			args = append(args, s.Step.GetEpisodeId(), s.Step.GetIndex(), bodies[start+j])
		}
		query := `INSERT INTO steps (episode_id, idx, body) VALUES ` + placeholders(len(chunk), 3) +
			` ON CONFLICT (episode_id, idx) DO NOTHING RETURNING episode_id, idx`
		rows, err := tx.QueryContext(ctx, db.q(query), args...)
		if err != nil {
			return nil, fmt.Errorf("insert steps: %w", err)
		}
		got := map[key]bool{}
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.episode, &k.index); err != nil {
				rows.Close()
				return nil, fmt.Errorf("insert steps: %w", err)
			}
			got[k] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, fmt.Errorf("insert steps: %w", err)
		}
		for j, s := range chunk {
			k := key{s.Step.GetEpisodeId(), s.Step.GetIndex()}
			if got[k] {
				inserted[start+j] = true
				delete(got, k) // a repeat later in the batch is a duplicate
			}
		}
	}
	return inserted, nil
}

// recordSteps records the model versions and blobs of the new steps.
func (db *DB) recordSteps(ctx context.Context, tx *sql.Tx, steps []StepRecord, inserted []bool) error {
	type version struct {
		v  int64
		ep string
	}
	type ref struct{ ep, sha string }
	var versions, blobs, refs [][]any
	seenV, seenB, seenR := map[version]bool{}, map[string]bool{}, map[ref]bool{}
	for j, s := range steps {
		if !inserted[j] {
			continue
		}
		id := s.Step.GetEpisodeId()
		if mc := s.Step.GetModelCall(); mc != nil {
			if v := (version{mc.GetModelVersion(), id}); !seenV[v] {
				seenV[v] = true
				versions = append(versions, []any{v.v, v.ep})
			}
		}
		for _, b := range s.Blobs {
			if !seenB[b.SHA256] {
				seenB[b.SHA256] = true
				blobs = append(blobs, []any{b.SHA256, b.Size, b.MediaType, b.Loc})
			}
			if r := (ref{id, b.SHA256}); !seenR[r] {
				seenR[r] = true
				refs = append(refs, []any{r.ep, r.sha})
			}
		}
	}
	for _, ins := range []struct {
		what, head string
		rows       [][]any
	}{
		{"model versions", `INSERT INTO episode_versions (model_version, episode_id) VALUES `, versions},
		{"blobs", `INSERT INTO blobs (sha256, size, media_type, loc) VALUES `, blobs},
		{"blob refs", `INSERT INTO blob_refs (episode_id, sha256) VALUES `, refs},
	} {
		if err := db.insertRows(ctx, tx, ins.head, ins.rows); err != nil {
			return fmt.Errorf("record %s: %w", ins.what, err)
		}
	}
	return nil
}

// insertRows inserts rows (all of one width) with head, rowsPerInsert at a
// time, leaving rows whose key exists as they are.
func (db *DB) insertRows(ctx context.Context, tx *sql.Tx, head string, rows [][]any) error {
	for start := 0; start < len(rows); start += rowsPerInsert {
		chunk := rows[start:min(start+rowsPerInsert, len(rows))]
		args := make([]any, 0, len(chunk)*len(chunk[0]))
		for _, r := range chunk {
			args = append(args, r...)
		}
		query := head + placeholders(len(chunk), len(chunk[0])) + ` ON CONFLICT DO NOTHING`
		if _, err := tx.ExecContext(ctx, db.q(query), args...); err != nil {
			return err
		}
	}
	return nil
}

// placeholders returns "(?, ?), (?, ?)" for n rows of width columns.
func placeholders(n, width int) string {
	row := "(" + strings.Repeat("?, ", width-1) + "?)"
	var b strings.Builder
	b.Grow(n * (len(row) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}
