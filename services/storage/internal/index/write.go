package index

import (
	"context"
	"database/sql"
	"fmt"

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
}

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
		added := map[string]int{}
		var order []string
		results[i].Duplicate = make([]bool, len(b.Steps))
		for j, s := range b.Steps {
			inserted, err := st.insertStep(ctx, s, stBodies[i][j])
			if err != nil {
				return nil, err
			}
			results[i].Duplicate[j] = !inserted
			if inserted {
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
	episode, step, version, blob, ref, addSteps *sql.Stmt
	// A requeued episode keeps its id and runs again with attempt+1; its
	// steps restart at index 0. The first header of the later attempt
	// discards the earlier attempt's steps, so (episode_id, index) stays the
	// idempotency key within an attempt and training never sees two
	// attempts spliced together.
	dropSteps, dropVersions, zeroSteps *sql.Stmt
}

func (db *DB) prepareWrite(ctx context.Context, tx *sql.Tx) (*writeStmts, error) {
	var st writeStmts
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		// A retried stream may replay an old RUNNING header after the
		// episode finished: a header that is not terminal never replaces a
		// terminal one of the same or a later attempt. Statuses 3-7 are the
		// terminal ones.
		{&st.episode, `INSERT INTO episodes (episode_id, rollout_id, group_id, task_id, domain, status, score, start_ns, end_ns, failure_reason, attempt, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (episode_id) DO UPDATE SET
  rollout_id = excluded.rollout_id, group_id = excluded.group_id, task_id = excluded.task_id,
  domain = excluded.domain, status = excluded.status, score = excluded.score,
  start_ns = CASE WHEN excluded.start_ns = 0 THEN episodes.start_ns ELSE excluded.start_ns END,
  end_ns = excluded.end_ns, failure_reason = excluded.failure_reason, attempt = excluded.attempt, body = excluded.body
WHERE NOT (episodes.status >= 3 AND excluded.status < 3 AND excluded.attempt <= episodes.attempt)`},
		{&st.step, `INSERT INTO steps (episode_id, idx, body) VALUES (?, ?, ?) ON CONFLICT (episode_id, idx) DO NOTHING`},
		{&st.version, `INSERT INTO episode_versions (model_version, episode_id) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&st.blob, `INSERT INTO blobs (sha256, size, media_type, loc) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&st.ref, `INSERT INTO blob_refs (episode_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING`},
		{&st.addSteps, `UPDATE episodes SET num_steps = num_steps + ? WHERE episode_id = ?`},
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
	for _, s := range []*sql.Stmt{st.episode, st.step, st.version, st.blob, st.ref, st.addSteps, st.dropSteps, st.dropVersions, st.zeroSteps} {
		if s != nil {
			s.Close()
		}
	}
}

func (st *writeStmts) upsertEpisode(ctx context.Context, e EpisodeRecord, body []byte) error {
	ep := e.Episode
	id, attempt := ep.GetEpisodeId(), ep.GetAttempt()
	if _, err := st.dropSteps.ExecContext(ctx, id, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.dropVersions.ExecContext(ctx, id, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.zeroSteps.ExecContext(ctx, id, attempt); err != nil {
		return fmt.Errorf("drop earlier attempt of %s: %w", id, err)
	}
	if _, err := st.episode.ExecContext(ctx, ep.GetEpisodeId(), ep.GetRolloutId(), ep.GetGroupId(), ep.GetTaskId(),
		ep.GetDomain(), int32(ep.GetStatus()), ep.GetScore(), timeNS(ep.GetStartTime()), timeNS(ep.GetEndTime()),
		ep.GetFailureReason(), ep.GetAttempt(), body); err != nil {
		return fmt.Errorf("upsert episode %s: %w", ep.GetEpisodeId(), err)
	}
	return st.addBlobs(ctx, ep.GetEpisodeId(), e.Blobs)
}

func (st *writeStmts) insertStep(ctx context.Context, s StepRecord, body []byte) (bool, error) {
	id := s.Step.GetEpisodeId()
	res, err := st.step.ExecContext(ctx, id, s.Step.GetIndex(), body)
	if err != nil {
		return false, fmt.Errorf("insert step %s/%d: %w", id, s.Step.GetIndex(), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert step %s/%d: %w", id, s.Step.GetIndex(), err)
	}
	if n == 0 {
		return false, nil
	}
	if mc := s.Step.GetModelCall(); mc != nil {
		if _, err := st.version.ExecContext(ctx, mc.GetModelVersion(), id); err != nil {
			return false, fmt.Errorf("record model version of %s: %w", id, err)
		}
	}
	return true, st.addBlobs(ctx, id, s.Blobs)
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
