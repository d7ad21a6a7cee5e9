package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// The rollouts table summarises each rollout's episodes (count, first
// start, last end) for Rollouts, which would otherwise aggregate every
// stored episode per page. Every transaction that changes episodes changes
// the summary with them:
//
//   - Commit notes each episode's span (rollout, start, end) before and
//     after its headers (spanChanges) and, once its batches are written,
//     applies each rollout's net change (applySpans): a count and a
//     widening of [first, last], one statement per rollout. Only when an
//     episode took away the rollout's first start (it started again
//     later, or moved to another rollout) or its last end is the rollout
//     recounted from its episodes (recountRollout): O(that rollout), and
//     rare (a requeued episode that had the first start or last end).
//   - DeleteRollout recounts the rollout once its episodes are gone.
//
// On PostgreSQL, replicas may commit concurrently. A transaction locks the
// episodes it changes from their lookup on, and the summary rows it
// changes last and in rollout order, so the summary adds no deadlock. A
// recount locks the row before it counts, so its count holds every
// committed change, and the changes still uncommitted add themselves
// after it.

// episodeSpan is what the rollouts summary counts of an episode.
type episodeSpan struct {
	rollout        string
	startNS, endNS int64
}

// spanChange is an episode's span before the transaction (was; stored is
// false for an episode the transaction created) and after its last header.
type spanChange struct {
	was, now episodeSpan
	stored   bool
}

// spanChanges maps the episodes a transaction changed to their spans.
type spanChanges map[string]*spanChange

// record notes that a header changed an episode from was (stored or not)
// to now. The first change of an episode in the transaction gives its span
// before the transaction; later ones only the span after.
func (c spanChanges) record(id string, was episodeSpan, stored bool, now episodeSpan) {
	if ch := c[id]; ch != nil {
		ch.now = now
		return
	}
	c[id] = &spanChange{was: was, now: now, stored: stored}
}

// rolloutDelta is a rollout's net change in one transaction.
type rolloutDelta struct {
	episodes int64
	// widen: first and last are the least start and greatest end of the
	// episodes the rollout now has among the changed ones.
	widen       bool
	first, last int64
	// gone: a start or end the rollout had (the least start, the greatest
	// end of them) left it: its episode left, its start moved later or
	// its end earlier.
	goneStart, goneEnd bool
	leftFirst, leftEnd int64
}

func (d *rolloutDelta) add(s episodeSpan) {
	if !d.widen || s.startNS < d.first {
		d.first = s.startNS
	}
	if !d.widen || s.endNS > d.last {
		d.last = s.endNS
	}
	d.widen = true
}

func (d *rolloutDelta) dropStart(ns int64) {
	if !d.goneStart || ns < d.leftFirst {
		d.leftFirst = ns
	}
	d.goneStart = true
}

func (d *rolloutDelta) dropEnd(ns int64) {
	if !d.goneEnd || ns > d.leftEnd {
		d.leftEnd = ns
	}
	d.goneEnd = true
}

// deltas folds the changes into each rollout's net change.
func (c spanChanges) deltas() map[string]*rolloutDelta {
	out := map[string]*rolloutDelta{}
	of := func(id string) *rolloutDelta {
		d := out[id]
		if d == nil {
			d = &rolloutDelta{}
			out[id] = d
		}
		return d
	}
	for _, ch := range c {
		was, now := ch.was, ch.now
		if ch.stored && was == now {
			continue
		}
		switch {
		case !ch.stored:
			of(now.rollout).episodes++
		case was.rollout != now.rollout:
			old := of(was.rollout)
			old.episodes--
			old.dropStart(was.startNS)
			old.dropEnd(was.endNS)
			of(now.rollout).episodes++
		default:
			d := of(now.rollout)
			if now.startNS > was.startNS {
				d.dropStart(was.startNS)
			}
			if now.endNS < was.endNS {
				d.dropEnd(was.endNS)
			}
		}
		of(now.rollout).add(now)
	}
	return out
}

// applySpans brings the rollouts summary up to date with the episode
// changes of the transaction tx, a rollout at a time in id order.
func (db *DB) applySpans(ctx context.Context, tx *sql.Tx, st *writeStmts, c spanChanges) error {
	if len(c) == 0 {
		return nil
	}
	deltas := c.deltas()
	ids := make([]string, 0, len(deltas))
	for id := range deltas {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := db.applyDelta(ctx, tx, st, id, deltas[id]); err != nil {
			return fmt.Errorf("summarise rollout %s: %w", id, err)
		}
	}
	return nil
}

func (db *DB) applyDelta(ctx context.Context, tx *sql.Tx, st *writeStmts, id string, d *rolloutDelta) error {
	if !d.goneStart && !d.goneEnd {
		if d.episodes > 0 {
			_, err := st.addRollout.ExecContext(ctx, id, d.episodes, d.first, d.last)
			return err
		}
		res, err := st.widenRollout.ExecContext(ctx, d.first, d.first, d.last, d.last, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		// No summary of a rollout with stored episodes: count it.
		return db.recountRollout(ctx, tx, id)
	}
	query := `SELECT episodes, first_ns, last_ns FROM rollouts WHERE rollout_id = ?`
	if db.dialect == postgresDialect {
		query += ` FOR UPDATE`
	}
	var n, first, last int64
	err := tx.QueryRowContext(ctx, db.q(query), id).Scan(&n, &first, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return db.recountRollout(ctx, tx, id)
	}
	if err != nil {
		return err
	}
	// A start that left and was greater than first leaves first to the
	// episodes that have it; one equal to it may have been the only one.
	if n+d.episodes <= 0 || (d.goneStart && d.leftFirst <= first) || (d.goneEnd && d.leftEnd >= last) {
		return db.recountRollout(ctx, tx, id)
	}
	if d.widen {
		first, last = min(first, d.first), max(last, d.last)
	}
	_, err = tx.ExecContext(ctx, db.q(`UPDATE rollouts SET episodes = ?, first_ns = ?, last_ns = ? WHERE rollout_id = ?`),
		n+d.episodes, first, last, id)
	return err
}

// recountRollout sets a rollout's summary from its stored episodes, and
// removes it when none are left. The summary row is locked (created if
// need be) before the count, so on PostgreSQL the count sees every
// transaction that changed the rollout and committed, and those still
// running change the recounted row after this one commits.
func (db *DB) recountRollout(ctx context.Context, tx *sql.Tx, id string) error {
	if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns) VALUES (?, 0, 0, 0)
ON CONFLICT (rollout_id) DO UPDATE SET episodes = rollouts.episodes`), id); err != nil {
		return fmt.Errorf("lock summary: %w", err)
	}
	var n int64
	var first, last sql.NullInt64
	if err := tx.QueryRowContext(ctx, db.q(`SELECT COUNT(*), MIN(start_ns), MAX(end_ns) FROM episodes WHERE rollout_id = ?`), id).
		Scan(&n, &first, &last); err != nil {
		return fmt.Errorf("count episodes: %w", err)
	}
	var err error
	if n == 0 {
		_, err = tx.ExecContext(ctx, db.q(`DELETE FROM rollouts WHERE rollout_id = ?`), id)
	} else {
		_, err = tx.ExecContext(ctx, db.q(`UPDATE rollouts SET episodes = ?, first_ns = ?, last_ns = ? WHERE rollout_id = ?`),
			n, first.Int64, last.Int64, id)
	}
	if err != nil {
		return fmt.Errorf("store summary: %w", err)
	}
	return nil
}
