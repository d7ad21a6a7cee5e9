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

// The queries below serve the viewer (internal/ui): numbered pages of a
// filtered episode list, a range of an episode's steps, and the members of
// a few GRPO groups. Each reads only what one page shows.

// CountEpisodes counts the episodes f selects (the viewer's page count).
// With a rollout it walks that rollout's part of episodes_rollout.
func (db *DB) CountEpisodes(ctx context.Context, f Filter) (int64, error) {
	where, args := f.where()
	query := `SELECT COUNT(*) FROM episodes e`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	var n int64
	if err := db.r.QueryRowContext(ctx, db.q(query), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count episodes: %w", err)
	}
	return n, nil
}

// CursorAt returns the cursor that makes ListEpisodes start at the
// offset-th episode f selects (0-based; nil for offset 0), so a numbered
// page costs one index walk of ids instead of reading the bodies before it.
func (db *DB) CursorAt(ctx context.Context, f Filter, offset int64) (*Cursor, error) {
	if offset <= 0 {
		return nil, nil
	}
	where, args := f.where()
	query := `SELECT e.start_ns, e.episode_id FROM episodes e`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY e.start_ns, e.episode_id LIMIT 1 OFFSET ?"
	args = append(args, offset-1)
	var c Cursor
	err := db.r.QueryRowContext(ctx, db.q(query), args...).Scan(&c.StartNS, &c.EpisodeID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("episode at offset %d: %w", offset, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("find page start: %w", err)
	}
	return &c, nil
}

// StepIndexAt returns the index of an episode's offset-th step (0-based,
// in index order), so a numbered page of steps starts there: indexes may
// have gaps, and a page offset is not an index. It walks the steps
// primary key, never the bodies; ErrNotFound past the last step.
func (db *DB) StepIndexAt(ctx context.Context, episodeID string, offset int64) (int, error) {
	var idx int
	err := db.r.QueryRowContext(ctx, db.q(`SELECT idx FROM steps WHERE episode_id = ? ORDER BY idx LIMIT 1 OFFSET ?`),
		episodeID, offset).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("step at offset %d of %s: %w", offset, episodeID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("find step page start of %s: %w", episodeID, err)
	}
	return idx, nil
}

// StepRange returns up to limit steps of an episode from index from on, in
// index order, through the steps primary key.
func (db *DB) StepRange(ctx context.Context, episodeID string, from, limit int) ([]*pb.Step, error) {
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT body FROM steps WHERE episode_id = ? AND idx >= ? ORDER BY idx LIMIT ?`),
		episodeID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("query steps of %s: %w", episodeID, err)
	}
	defer rows.Close()
	var steps []*pb.Step
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("scan step: %w", err)
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

// GroupMember is one episode of a GRPO group, without its body.
type GroupMember struct {
	GroupID, EpisodeID, TaskID string
	Status                     pb.EpisodeStatus
	Score                      float64
}

// GroupMembers returns the episodes of a rollout's groups (at most a page's
// worth of groups), ordered by group then start. It reads the columns
// only, never the bodies, through episodes_group: with the rollout in the
// WHERE clause SQLite would walk the whole rollout instead, so the rollout
// is checked here.
func (db *DB) GroupMembers(ctx context.Context, rolloutID string, groups []string) ([]GroupMember, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(groups))
	for _, g := range groups {
		args = append(args, g)
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(groups)), ",")
	rows, err := db.r.QueryContext(ctx, db.q(`SELECT rollout_id, group_id, episode_id, task_id, status, score FROM episodes
WHERE group_id IN (`+marks+`) ORDER BY group_id, start_ns, episode_id`), args...)
	if err != nil {
		return nil, fmt.Errorf("query group members: %w", err)
	}
	defer rows.Close()
	var out []GroupMember
	for rows.Next() {
		var m GroupMember
		var rollout string
		var status int32
		if err := rows.Scan(&rollout, &m.GroupID, &m.EpisodeID, &m.TaskID, &status, &m.Score); err != nil {
			return nil, fmt.Errorf("scan group member: %w", err)
		}
		if rollout != rolloutID {
			continue
		}
		m.Status = pb.EpisodeStatus(status)
		out = append(out, m)
	}
	return out, rows.Err()
}
