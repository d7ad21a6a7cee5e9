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
	st := db.write.bind(ctx, tx)
	defer st.close()

	results := make([]Result, len(batches))
	spans := spanChanges{}
	for i, b := range batches {
		for j, e := range b.Episodes {
			if err := st.upsertEpisode(ctx, e, epBodies[i][j], spans); err != nil {
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
	if err := db.applySpans(ctx, tx, st, spans); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return results, nil
}

type writeStmts struct {
	episode, blob, ref, addSteps, attempt *sql.Stmt
	// span looks up the stored episode a header is about to change, for
	// the rollouts summary; newEpisode stores a header of an episode not
	// stored yet.
	span, newEpisode *sql.Stmt
	// A requeued episode keeps its id and runs again with attempt+1; its
	// steps restart at index 0. The first header of the later attempt
	// discards the earlier attempt's steps, so (episode_id, index) stays the
	// idempotency key within an attempt and training never sees two
	// attempts spliced together.
	dropSteps, dropVersions, zeroSteps *sql.Stmt
	// addRollout and widenRollout change the rollouts summary (see
	// applyDelta).
	addRollout, widenRollout *sql.Stmt
}

// stmts lists the statements, for bind and close.
func (st *writeStmts) stmts() []**sql.Stmt {
	return []**sql.Stmt{&st.episode, &st.blob, &st.ref, &st.addSteps, &st.attempt, &st.span, &st.newEpisode,
		&st.dropSteps, &st.dropVersions, &st.zeroSteps, &st.addRollout, &st.widenRollout}
}

// prepareWrite prepares the write path's statements once, on the writer
// (Open). A commit binds them to its transaction (bind), which reuses
// what its connection prepared before: preparing them in every commit
// cost a fifth of the CPU time per step (commits of the headers and
// steps of four 5-step episodes, SQLite), and a round trip each on
// PostgreSQL.
func (db *DB) prepareWrite(ctx context.Context) (*writeStmts, error) {
	var st writeStmts
	// On PostgreSQL another replica may commit a later attempt's header
	// between the check of a step's attempt and the insert of the step:
	// the share lock makes that header's transaction wait for this one,
	// and it then drops the steps this one stored (see upsertEpisode).
	// SQLite has one writer at a time.
	attempt := `SELECT attempt FROM episodes WHERE episode_id = ?`
	// The episode a header changes is locked from its lookup on, so that
	// the span the rollouts summary takes back (see applySpans) is the one
	// the header replaces, whatever another replica commits meanwhile.
	span := `SELECT rollout_id, start_ns, end_ns FROM episodes WHERE episode_id = ?`
	if db.dialect == postgresDialect {
		attempt += ` FOR SHARE`
		span += ` FOR NO KEY UPDATE`
	}
	const insertEpisode = `INSERT INTO episodes (episode_id, rollout_id, group_id, task_id, domain, status, score, start_ns, end_ns, failure_reason, attempt, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		// A retried stream may replay an old header: a header of an
		// earlier attempt never replaces a later one (the later attempt's
		// next header would take it for a new attempt and drop its steps),
		// and a header that is not terminal never replaces a terminal one
		// of the same attempt. Statuses 3-7 are the terminal ones.
		// Both return the stored span, and no row when they change
		// nothing: a header ignored, or (newEpisode) an episode another
		// replica stored since the lookup.
		{&st.episode, insertEpisode + `
ON CONFLICT (episode_id) DO UPDATE SET
  rollout_id = excluded.rollout_id, group_id = excluded.group_id, task_id = excluded.task_id,
  domain = excluded.domain, status = excluded.status, score = excluded.score,
  start_ns = CASE WHEN excluded.start_ns = 0 THEN episodes.start_ns ELSE excluded.start_ns END,
  end_ns = excluded.end_ns, failure_reason = excluded.failure_reason, attempt = excluded.attempt, body = excluded.body
WHERE excluded.attempt > episodes.attempt OR (excluded.attempt = episodes.attempt AND NOT (episodes.status >= 3 AND excluded.status < 3))
RETURNING rollout_id, start_ns, end_ns`},
		{&st.newEpisode, insertEpisode + ` ON CONFLICT (episode_id) DO NOTHING RETURNING rollout_id, start_ns, end_ns`},
		{&st.span, span},
		{&st.blob, `INSERT INTO blobs (sha256, size, media_type, loc) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.ref, `INSERT INTO blob_refs (episode_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&st.addSteps, `UPDATE episodes SET num_steps = num_steps + ? WHERE episode_id = ?`},
		{&st.attempt, attempt},
		{&st.dropSteps, `DELETE FROM steps WHERE episode_id = ? AND EXISTS (SELECT 1 FROM episodes WHERE episode_id = ? AND attempt < ?)`},
		{&st.dropVersions, `DELETE FROM episode_versions WHERE episode_id = ? AND EXISTS (SELECT 1 FROM episodes WHERE episode_id = ? AND attempt < ?)`},
		{&st.zeroSteps, `UPDATE episodes SET num_steps = 0 WHERE episode_id = ? AND attempt < ?`},
		// Commutative, so concurrent commits need no lookup first.
		{&st.addRollout, `INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns) VALUES (?, ?, ?, ?)
ON CONFLICT (rollout_id) DO UPDATE SET episodes = rollouts.episodes + excluded.episodes,
  first_ns = CASE WHEN excluded.first_ns < rollouts.first_ns THEN excluded.first_ns ELSE rollouts.first_ns END,
  last_ns = CASE WHEN excluded.last_ns > rollouts.last_ns THEN excluded.last_ns ELSE rollouts.last_ns END`},
		{&st.widenRollout, `UPDATE rollouts SET
  first_ns = CASE WHEN ? < first_ns THEN ? ELSE first_ns END,
  last_ns = CASE WHEN ? > last_ns THEN ? ELSE last_ns END
WHERE rollout_id = ?`},
	} {
		s, err := db.w.PrepareContext(ctx, db.q(p.query))
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*p.dst = s
	}
	return &st, nil
}

// bind returns the statements bound to tx; they close with it.
func (st *writeStmts) bind(ctx context.Context, tx *sql.Tx) *writeStmts {
	var b writeStmts
	dst := b.stmts()
	for i, s := range st.stmts() {
		*dst[i] = tx.StmtContext(ctx, *s)
	}
	return &b
}

func (st *writeStmts) close() error {
	var err error
	for _, s := range st.stmts() {
		if *s != nil {
			err = errors.Join(err, (*s).Close())
		}
	}
	return err
}

func (st *writeStmts) upsertEpisode(ctx context.Context, e EpisodeRecord, body []byte, spans spanChanges) error {
	ep := e.Episode
	id, attempt := ep.GetEpisodeId(), ep.GetAttempt()
	args := []any{id, ep.GetRolloutId(), ep.GetGroupId(), ep.GetTaskId(),
		ep.GetDomain(), int32(ep.GetStatus()), ep.GetScore(), timeNS(ep.GetStartTime()), timeNS(ep.GetEndTime()),
		ep.GetFailureReason(), attempt, body}
	// Twice at most: a lookup that finds nothing races, on PostgreSQL,
	// with another replica storing the same episode; the second lookup
	// finds (and locks) what it stored.
	for try := 0; ; try++ {
		var was episodeSpan
		err := st.span.QueryRowContext(ctx, id).Scan(&was.rollout, &was.startNS, &was.endNS)
		stored := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("look up episode %s: %w", id, err)
		}
		write := st.newEpisode
		if stored {
			write = st.episode
			// On PostgreSQL the lookup locked the episode row, so steps
			// of the earlier attempt that another transaction is
			// committing (it holds a share lock, see checkAttempts) are
			// committed before dropSteps looks, and dropped with the
			// rest. An episode not stored has none to drop.
			if _, err := st.zeroSteps.ExecContext(ctx, id, attempt); err != nil {
				return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
			}
			if _, err := st.dropSteps.ExecContext(ctx, id, id, attempt); err != nil {
				return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
			}
			if _, err := st.dropVersions.ExecContext(ctx, id, id, attempt); err != nil {
				return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
			}
		}
		var now episodeSpan
		err = write.QueryRowContext(ctx, args...).Scan(&now.rollout, &now.startNS, &now.endNS)
		if err == nil {
			spans.record(id, was, stored, now)
			break
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("upsert episode %s: %w", id, err)
		}
		if stored {
			break // the header changes nothing (see st.episode)
		}
		if try == 1 {
			return fmt.Errorf("upsert episode %s: neither stored nor storable", id)
		}
	}
	return st.addBlobs(ctx, id, e.Blobs)
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
