package index

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// maxProblems bounds the problems of one kind Check lists; the rest are
// counted.
const maxProblems = 100

// Check looks for damage in the index itself, reading all of it: SQLite's
// integrity_check (PostgreSQL checks its own pages as it reads them), blob
// references without a blob record, rollout summaries that differ from
// their episodes, and episode or step bodies that no longer decode. It
// returns one line per problem.
func (db *DB) Check(ctx context.Context) ([]string, error) {
	var problems []string
	if db.dialect == sqliteDialect {
		rows, err := db.r.QueryContext(ctx, `PRAGMA integrity_check`)
		if err != nil {
			return nil, fmt.Errorf("integrity check: %w", err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				rows.Close()
				return nil, fmt.Errorf("integrity check: %w", err)
			}
			if line != "ok" {
				problems = append(problems, "sqlite integrity_check: "+line)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return problems, fmt.Errorf("integrity check: %w", err)
		}
	}
	for _, c := range []struct {
		query string
		what  string
		body  proto.Message
	}{
		{query: `SELECT r.episode_id || ' ' || r.sha256, NULL FROM blob_refs r LEFT JOIN blobs b ON b.sha256 = r.sha256 WHERE b.sha256 IS NULL`,
			what: "blob reference without a blob record (episode, blob)"},
		{query: summaryMismatches, what: SummaryMismatch},
		{query: `SELECT episode_id, body FROM episodes`, what: "episode body does not decode", body: &pb.Episode{}},
		{query: `SELECT episode_id || ' ' || idx, body FROM steps`, what: "step body does not decode (episode, index)", body: &pb.Step{}},
	} {
		found, err := db.checkRows(ctx, c.query, c.body)
		if err != nil {
			return problems, err
		}
		for i, name := range found {
			if i == maxProblems {
				problems = append(problems, fmt.Sprintf("%s: %d more", c.what, len(found)-maxProblems))
				break
			}
			problems = append(problems, c.what+": "+name)
		}
	}
	return problems, nil
}

// SummaryMismatch begins the problem Check reports for each rollout whose
// row in the rollouts summary differs from its episodes (RepairSummary
// recounts them).
const SummaryMismatch = "rollout summary differs from its episodes (rollout)"

// summaryMismatches lists the rollouts whose row in the rollouts summary
// is missing, extra or not the aggregate of their episodes.
const summaryMismatches = `SELECT COALESCE(s.rollout_id, a.rollout_id), NULL FROM rollouts s
FULL JOIN (SELECT rollout_id, COUNT(*) AS n, MIN(start_ns) AS f, MAX(end_ns) AS l FROM episodes GROUP BY rollout_id) a
  ON a.rollout_id = s.rollout_id
WHERE s.rollout_id IS NULL OR a.rollout_id IS NULL OR s.episodes <> a.n OR s.first_ns <> a.f OR s.last_ns <> a.l
ORDER BY 1`

// RepairSummary recounts, from their episodes, the rollouts whose row in
// the rollouts summary Check would name (missing, extra or not the
// aggregate of their episodes), in one transaction, and returns them in
// order. The summary is derived from the episodes, so nothing stored is
// lost. Each recount locks its row as the writers' own do, so on
// PostgreSQL a replica committing meanwhile is counted once.
func (db *DB) RepairSummary(ctx context.Context) ([]string, error) {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("repair summary: begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, summaryMismatches)
	if err != nil {
		return nil, fmt.Errorf("repair summary: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		var unused []byte
		if err := rows.Scan(&id, &unused); err != nil {
			rows.Close()
			return nil, fmt.Errorf("repair summary: %w", err)
		}
		ids = append(ids, id)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("repair summary: %w", err)
	}
	for _, id := range ids {
		if err := db.recountRollout(ctx, tx, id); err != nil {
			return nil, fmt.Errorf("repair summary of rollout %s: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("repair summary: commit: %w", err)
	}
	return ids, nil
}

// checkRows runs a query of (name, body) rows and returns the names of the
// rows it finds bad: every row when body is nil, else those whose body does
// not unmarshal into body.
func (db *DB) checkRows(ctx context.Context, query string, body proto.Message) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("check index: %w", err)
	}
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var name string
		var raw []byte
		if err := rows.Scan(&name, &raw); err != nil {
			return bad, fmt.Errorf("check index: %w", err)
		}
		if body == nil || proto.Unmarshal(raw, body) != nil {
			bad = append(bad, name)
		}
	}
	if err := rows.Err(); err != nil {
		return bad, fmt.Errorf("check index: %w", err)
	}
	return bad, nil
}
