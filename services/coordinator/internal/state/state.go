// Package state persists the coordinator's rollouts, groups, episodes and
// batches in a real database: embedded SQLite under the data directory by
// default, PostgreSQL when a postgres:// DSN is given.
//
// The scheduler keeps the live state in memory and is its source of truth
// while running; this package is its durable shadow. Every change is written
// as an upsert of the whole record, and writes are group-committed: one
// writer goroutine takes everything queued since its last commit and commits
// it in one transaction, then tells each submitter. That keeps the dispatch
// hot path free of per-transition fsyncs while every caller that must not
// proceed before its change is durable (an episode result before its group is
// handed out, an ack before AckBatch returns) can still wait for the commit.
package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
)

// ErrClosed is returned for writes submitted after Close.
var ErrClosed = errors.New("state store closed")

// Rollout is a stored rollout. Spec is the marshalled RolloutSpec without its
// inline tasks (those are stored one row each).
type Rollout struct {
	ID           string
	Spec         []byte
	State        int32
	CreateTime   int64 // unix nanoseconds
	EndTime      int64
	Error        string
	StartVersion int64
	NumGroups    int64 // groups created so far (ids are dense)
	NumEpisodes  int64 // episodes created so far
}

// Task is one task of a rollout, marshalled.
type Task struct {
	RolloutID string
	Idx       int64
	Task      []byte
}

// Group is a stored GRPO group.
type Group struct {
	ID        string
	RolloutID string
	Idx       int64
	TaskIdx   int64
	Seed      int64
	State     int32
	BatchID   string
	Regens    int32
	DoneSeq   int64 // order in which groups became complete
}

// Episode is a stored episode. Result is the marshalled Episode message as
// the runner reported it (empty until terminal).
type Episode struct {
	ID           string
	RolloutID    string
	GroupID      string
	Seq          int64 // creation order within the rollout
	Status       int32
	Attempt      int32
	RunnerID     string
	LeaseID      string
	LeaseToken   string
	ModelVersion int64
	Result       []byte
}

// Batch is a batch handed out by GetBatch.
type Batch struct {
	ID         string
	RolloutID  string
	GroupIDs   []string
	ExpireTime int64 // unix nanoseconds; the batch is handed out again after
	Acked      bool
	Dropped    int32
}

// Snapshot is everything stored, as loaded at start-up.
type Snapshot struct {
	ModelVersion int64
	Rollouts     []Rollout
	Tasks        []Task
	Groups       []Group
	Episodes     []Episode
	Batches      []Batch
}

// Op is one write. Ops are applied in submission order.
type Op interface {
	apply(ctx context.Context, tx *sql.Tx, st *stmts) error
}

type dialect int

const (
	sqlite dialect = iota
	postgres
)

// Store is an open database with its group-commit writer.
type Store struct {
	db      *sql.DB
	dialect dialect
	st      *stmts

	mu      sync.Mutex
	queue   []pending
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	commits   int64
	committed int64
}

type pending struct {
	ops  []Op
	done func(error)
}

// Open opens (and creates) the database named by dsn: a postgres:// or
// postgresql:// URL, a "sqlite:" path, or empty for coordinator.db under
// dataDir.
func Open(ctx context.Context, dsn, dataDir string) (*Store, error) {
	s := &Store{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s.dialect = postgres
		s.db, err = sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		s.db.SetMaxOpenConns(4)
	default:
		path := strings.TrimPrefix(dsn, "sqlite:")
		if path == "" {
			if dataDir == "" {
				return nil, errors.New("open sqlite: no --database and no --data-dir")
			}
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return nil, fmt.Errorf("create data dir: %w", err)
			}
			path = filepath.Join(dataDir, "coordinator.db")
		}
		// WAL with synchronous=FULL: a commit is on disk when it returns,
		// which is what "a finished episode is never rerun" rests on.
		q := "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(OFF)"
		s.db, err = sql.Open("sqlite", "file:"+path+q)
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// One connection: a single writer is all SQLite allows anyway, and
		// reads happen only at start-up.
		s.db.SetMaxOpenConns(1)
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("connect database: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.db.Close()
		return nil, err
	}
	if s.st, err = prepare(ctx, s.db, s.dialect); err != nil {
		s.db.Close()
		return nil, err
	}
	go s.writer()
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	blob := "BLOB"
	if s.dialect == postgres {
		blob = "BYTEA"
	}
	ddl := []string{
		`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS rollouts (id TEXT PRIMARY KEY, spec ` + blob + ` NOT NULL, state INTEGER NOT NULL,
			create_time BIGINT NOT NULL, end_time BIGINT NOT NULL, error TEXT NOT NULL, start_version BIGINT NOT NULL,
			num_groups BIGINT NOT NULL, num_episodes BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS tasks (rollout_id TEXT NOT NULL, idx BIGINT NOT NULL, task ` + blob + ` NOT NULL,
			PRIMARY KEY (rollout_id, idx))`,
		`CREATE TABLE IF NOT EXISTS groups_ (id TEXT PRIMARY KEY, rollout_id TEXT NOT NULL, idx BIGINT NOT NULL,
			task_idx BIGINT NOT NULL, seed BIGINT NOT NULL, state INTEGER NOT NULL, batch_id TEXT NOT NULL,
			regens INTEGER NOT NULL, done_seq BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS episodes (id TEXT PRIMARY KEY, rollout_id TEXT NOT NULL, group_id TEXT NOT NULL,
			seq BIGINT NOT NULL, status INTEGER NOT NULL, attempt INTEGER NOT NULL, runner_id TEXT NOT NULL, lease_id TEXT NOT NULL,
			lease_token TEXT NOT NULL, model_version BIGINT NOT NULL, result ` + blob + `)`,
		`CREATE TABLE IF NOT EXISTS batches (id TEXT PRIMARY KEY, rollout_id TEXT NOT NULL, group_ids TEXT NOT NULL,
			expire_time BIGINT NOT NULL, acked INTEGER NOT NULL, dropped INTEGER NOT NULL)`,
	}
	for _, q := range ddl {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return nil
}

// stmts are the prepared upserts.
type stmts struct {
	meta, rollout, task, group, episode, batch *sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB, d dialect) (*stmts, error) {
	q := map[string]string{
		"meta":    `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		"rollout": `INSERT INTO rollouts (id, spec, state, create_time, end_time, error, start_version, num_groups, num_episodes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET spec = excluded.spec, state = excluded.state, end_time = excluded.end_time, error = excluded.error, num_groups = excluded.num_groups, num_episodes = excluded.num_episodes`,
		"task":    `INSERT INTO tasks (rollout_id, idx, task) VALUES (?, ?, ?) ON CONFLICT (rollout_id, idx) DO NOTHING`,
		"group":   `INSERT INTO groups_ (id, rollout_id, idx, task_idx, seed, state, batch_id, regens, done_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state, batch_id = excluded.batch_id, regens = excluded.regens, done_seq = excluded.done_seq`,
		"episode": `INSERT INTO episodes (id, rollout_id, group_id, seq, status, attempt, runner_id, lease_id, lease_token, model_version, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempt = excluded.attempt, runner_id = excluded.runner_id, lease_id = excluded.lease_id, lease_token = excluded.lease_token, model_version = excluded.model_version, result = excluded.result`,
		"batch":   `INSERT INTO batches (id, rollout_id, group_ids, expire_time, acked, dropped) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET expire_time = excluded.expire_time, acked = excluded.acked`,
	}
	out := &stmts{}
	targets := map[string]**sql.Stmt{"meta": &out.meta, "rollout": &out.rollout, "task": &out.task, "group": &out.group, "episode": &out.episode, "batch": &out.batch}
	for name, text := range q {
		if d == postgres {
			text = rebind(text)
		}
		st, err := db.PrepareContext(ctx, text)
		if err != nil {
			return nil, fmt.Errorf("prepare %s upsert: %w", name, err)
		}
		*targets[name] = st
	}
	return out, nil
}

// rebind turns ? placeholders into PostgreSQL's $n.
func rebind(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Load reads everything stored.
func (s *Store) Load(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{}
	row := s.db.QueryRowContext(ctx, s.q(`SELECT value FROM meta WHERE key = ?`), "model_version")
	if err := row.Scan(&snap.ModelVersion); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("load model version: %w", err)
	}
	if err := s.each(ctx, `SELECT id, spec, state, create_time, end_time, error, start_version, num_groups, num_episodes FROM rollouts ORDER BY create_time`, func(r *sql.Rows) error {
		var x Rollout
		err := r.Scan(&x.ID, &x.Spec, &x.State, &x.CreateTime, &x.EndTime, &x.Error, &x.StartVersion, &x.NumGroups, &x.NumEpisodes)
		snap.Rollouts = append(snap.Rollouts, x)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load rollouts: %w", err)
	}
	if err := s.each(ctx, `SELECT rollout_id, idx, task FROM tasks ORDER BY rollout_id, idx`, func(r *sql.Rows) error {
		var x Task
		err := r.Scan(&x.RolloutID, &x.Idx, &x.Task)
		snap.Tasks = append(snap.Tasks, x)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	if err := s.each(ctx, `SELECT id, rollout_id, idx, task_idx, seed, state, batch_id, regens, done_seq FROM groups_ ORDER BY rollout_id, idx`, func(r *sql.Rows) error {
		var x Group
		err := r.Scan(&x.ID, &x.RolloutID, &x.Idx, &x.TaskIdx, &x.Seed, &x.State, &x.BatchID, &x.Regens, &x.DoneSeq)
		snap.Groups = append(snap.Groups, x)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load groups: %w", err)
	}
	if err := s.each(ctx, `SELECT id, rollout_id, group_id, seq, status, attempt, runner_id, lease_id, lease_token, model_version, result FROM episodes ORDER BY rollout_id, seq`, func(r *sql.Rows) error {
		var x Episode
		err := r.Scan(&x.ID, &x.RolloutID, &x.GroupID, &x.Seq, &x.Status, &x.Attempt, &x.RunnerID, &x.LeaseID, &x.LeaseToken, &x.ModelVersion, &x.Result)
		snap.Episodes = append(snap.Episodes, x)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load episodes: %w", err)
	}
	if err := s.each(ctx, `SELECT id, rollout_id, group_ids, expire_time, acked, dropped FROM batches`, func(r *sql.Rows) error {
		var x Batch
		var ids string
		var acked int
		err := r.Scan(&x.ID, &x.RolloutID, &ids, &x.ExpireTime, &acked, &x.Dropped)
		if ids != "" {
			x.GroupIDs = strings.Split(ids, ",")
		}
		x.Acked = acked != 0
		snap.Batches = append(snap.Batches, x)
		return err
	}); err != nil {
		return nil, fmt.Errorf("load batches: %w", err)
	}
	return snap, nil
}

func (s *Store) q(text string) string {
	if s.dialect == postgres {
		return rebind(text)
	}
	return text
}

func (s *Store) each(ctx context.Context, query string, fn func(*sql.Rows) error) error {
	rows, err := s.db.QueryContext(ctx, s.q(query))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Submit queues ops to be committed together in order; done (which may be
// nil) is called from the writer goroutine with the commit's outcome. It
// never blocks, so it may be called with the scheduler's lock held, which is
// what keeps the database order equal to the in-memory order.
func (s *Store) Submit(done func(error), ops ...Op) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if done != nil {
			done(ErrClosed)
		}
		return
	}
	s.queue = append(s.queue, pending{ops: ops, done: done})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Write submits ops and waits for their commit.
func (s *Store) Write(ctx context.Context, ops ...Op) error {
	ch := make(chan error, 1)
	s.Submit(func(err error) { ch <- err }, ops...)
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats reports commits made and ops committed, for the benchmark.
func (s *Store) Stats() (commits, ops int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits, s.committed
}

func (s *Store) writer() {
	defer close(s.stopped)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		closed := s.closed
		s.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			<-s.wake
			continue
		}
		err := s.commit(batch)
		n := 0
		for _, p := range batch {
			n += len(p.ops)
		}
		s.mu.Lock()
		s.commits++
		s.committed += int64(n)
		s.mu.Unlock()
		for _, p := range batch {
			if p.done != nil {
				p.done(err)
			}
		}
	}
}

func (s *Store) commit(batch []pending) error {
	// The writer owns no request context: a commit must finish even while the
	// service shuts down, so it uses a background context.
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	for _, p := range batch {
		for _, op := range p.ops {
			if err := op.apply(ctx, tx, s.st); err != nil {
				tx.Rollback()
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Close commits what is queued, stops the writer and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.stopped
	return s.db.Close()
}

// PutModelVersion stores the model version in force.
func PutModelVersion(v int64) Op { return metaOp{"model_version", v} }

type metaOp struct {
	key string
	v   int64
}

func (o metaOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	if _, err := tx.StmtContext(ctx, st.meta).ExecContext(ctx, o.key, o.v); err != nil {
		return fmt.Errorf("put meta %s: %w", o.key, err)
	}
	return nil
}

// PutRollout upserts a rollout.
func PutRollout(r Rollout) Op { return rolloutOp(r) }

type rolloutOp Rollout

func (o rolloutOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	_, err := tx.StmtContext(ctx, st.rollout).ExecContext(ctx, o.ID, o.Spec, o.State, o.CreateTime, o.EndTime, o.Error, o.StartVersion, o.NumGroups, o.NumEpisodes)
	if err != nil {
		return fmt.Errorf("put rollout %s: %w", o.ID, err)
	}
	return nil
}

// PutTasks inserts tasks (existing rows are kept: tasks never change).
func PutTasks(ts []Task) Op { return tasksOp(ts) }

type tasksOp []Task

func (o tasksOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	stmt := tx.StmtContext(ctx, st.task)
	for _, t := range o {
		if _, err := stmt.ExecContext(ctx, t.RolloutID, t.Idx, t.Task); err != nil {
			return fmt.Errorf("put task %s/%d: %w", t.RolloutID, t.Idx, err)
		}
	}
	return nil
}

// PutGroups upserts groups.
func PutGroups(gs ...Group) Op { return groupsOp(gs) }

type groupsOp []Group

func (o groupsOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	stmt := tx.StmtContext(ctx, st.group)
	for _, g := range o {
		if _, err := stmt.ExecContext(ctx, g.ID, g.RolloutID, g.Idx, g.TaskIdx, g.Seed, g.State, g.BatchID, g.Regens, g.DoneSeq); err != nil {
			return fmt.Errorf("put group %s: %w", g.ID, err)
		}
	}
	return nil
}

// PutEpisodes upserts episodes.
func PutEpisodes(es ...Episode) Op { return episodesOp(es) }

type episodesOp []Episode

func (o episodesOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	stmt := tx.StmtContext(ctx, st.episode)
	for _, e := range o {
		if _, err := stmt.ExecContext(ctx, e.ID, e.RolloutID, e.GroupID, e.Seq, e.Status, e.Attempt, e.RunnerID, e.LeaseID, e.LeaseToken, e.ModelVersion, e.Result); err != nil {
			return fmt.Errorf("put episode %s: %w", e.ID, err)
		}
	}
	return nil
}

// PutBatch upserts a batch.
func PutBatch(b Batch) Op { return batchOp(b) }

type batchOp Batch

func (o batchOp) apply(ctx context.Context, tx *sql.Tx, st *stmts) error {
	acked := 0
	if o.Acked {
		acked = 1
	}
	if _, err := tx.StmtContext(ctx, st.batch).ExecContext(ctx, o.ID, o.RolloutID, strings.Join(o.GroupIDs, ","), o.ExpireTime, acked, o.Dropped); err != nil {
		return fmt.Errorf("put batch %s: %w", o.ID, err)
	}
	return nil
}
