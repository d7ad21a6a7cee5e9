// Package index keeps the searchable part of stored trajectories (episodes,
// steps, blob records and blob references) in SQLite or PostgreSQL behind
// database/sql. Step and episode bodies are stored as marshalled protobuf with
// blob data stripped; the columns next to them exist only to filter, sort and
// aggregate. Both databases run the same queries: only the column types of the
// schema and the placeholder syntax differ.
package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// ErrNotFound reports a missing episode or blob record.
var ErrNotFound = errors.New("not found")

type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

// DB is an open index.
type DB struct {
	// w serialises writers: SQLite has one writer anyway, and one pool for
	// PostgreSQL keeps the group committer's transactions ordered.
	w *sql.DB
	// r serves reads; with WAL, SQLite readers never block the writer.
	r       *sql.DB
	dialect dialect
	// blobStmt looks up a blob record: once or twice per stored blob, so
	// prepared once rather than parsed every time.
	blobStmt *sql.Stmt
	// write holds the statements of Commit, prepared once on w.
	write *writeStmts
}

// IsPostgresDSN reports whether dsn names a PostgreSQL database rather than
// an SQLite file.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Open opens (creating if needed) the index named by dsn: a postgres:// URL or
// an SQLite file path. It applies pending schema migrations.
func Open(ctx context.Context, dsn string) (*DB, error) {
	return openAt(ctx, dsn, len(migrations))
}

// openAt opens the index with its schema migrated to version at most (the
// tests write the databases of earlier releases with it).
func openAt(ctx context.Context, dsn string, version int) (*DB, error) {
	db := &DB{}
	if IsPostgresDSN(dsn) {
		db.dialect = postgresDialect
		pool, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		pool.SetMaxOpenConns(8)
		pool.SetMaxIdleConns(8)
		db.w, db.r = pool, pool
	} else {
		if err := os.MkdirAll(filepath.Dir(dsn), 0o750); err != nil {
			return nil, fmt.Errorf("create index directory: %w", err)
		}
		// synchronous(FULL): a commit is on disk before it returns, which
		// is what lets AppendSteps acknowledge a step.
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "foreign_keys(0)")
		u := "file:" + dsn + "?" + q.Encode()
		// The writer's statement journals (SQLite keeps one for a statement
		// inside a transaction that may have to undo it alone) went to a temp
		// file, written a few hundred times a second under ingest; in memory
		// they cost at most one statement's changes.
		wq := url.Values{"_pragma": append([]string{"temp_store(MEMORY)"}, q["_pragma"]...)}
		w, err := sql.Open("sqlite", "file:"+dsn+"?"+wq.Encode())
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		w.SetMaxOpenConns(1)
		r, err := sql.Open("sqlite", u)
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		r.SetMaxOpenConns(4)
		db.w, db.r = w, r
	}
	if err := db.w.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect index: %w", err)
	}
	if err := db.migrate(ctx, version); err != nil {
		db.Close()
		return nil, err
	}
	var err error
	if db.blobStmt, err = db.r.PrepareContext(ctx, db.q(`SELECT size, media_type, loc FROM blobs WHERE sha256 = ?`)); err != nil {
		db.Close()
		return nil, fmt.Errorf("prepare blob lookup: %w", err)
	}
	// An index left at an earlier version (the tests' old databases) may
	// lack the tables the write statements name; it is not written to.
	if version == len(migrations) {
		if db.write, err = db.prepareWrite(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

// Close closes the database handles.
func (db *DB) Close() error {
	var err error
	if db.blobStmt != nil {
		err = db.blobStmt.Close()
	}
	if db.write != nil {
		err = errors.Join(err, db.write.close())
	}
	err = errors.Join(err, db.w.Close())
	if db.r != db.w {
		err = errors.Join(err, db.r.Close())
	}
	return err
}

// Backend names the database engine, for logs.
func (db *DB) Backend() string {
	if db.dialect == postgresDialect {
		return "postgres"
	}
	return "sqlite"
}

// q rewrites ? placeholders into $N for PostgreSQL. Queries here never
// contain a literal question mark.
func (db *DB) q(query string) string {
	if db.dialect != postgresDialect {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// migrations are applied in order, each in its own transaction, and recorded
// in schema_migrations; never edit one that has shipped, append a new one.
var migrations = []struct {
	sqlite, postgres string
}{
	{
		sqlite: `
CREATE TABLE episodes (
  episode_id TEXT PRIMARY KEY,
  rollout_id TEXT NOT NULL,
  group_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  domain TEXT NOT NULL,
  status INTEGER NOT NULL,
  score REAL NOT NULL,
  start_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  failure_reason TEXT NOT NULL,
  num_steps INTEGER NOT NULL DEFAULT 0,
  body BLOB NOT NULL
);
CREATE INDEX episodes_rollout ON episodes(rollout_id, start_ns, episode_id);
CREATE INDEX episodes_start ON episodes(start_ns, episode_id);
CREATE TABLE steps (
  episode_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BLOB NOT NULL,
  PRIMARY KEY (episode_id, idx)
);
CREATE TABLE episode_versions (
  model_version INTEGER NOT NULL,
  episode_id TEXT NOT NULL,
  PRIMARY KEY (model_version, episode_id)
);
CREATE INDEX episode_versions_episode ON episode_versions(episode_id);
CREATE TABLE blobs (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  media_type TEXT NOT NULL
);
CREATE TABLE blob_refs (
  episode_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (episode_id, sha256)
);
CREATE INDEX blob_refs_sha ON blob_refs(sha256);
`,
		postgres: `
CREATE TABLE episodes (
  episode_id TEXT PRIMARY KEY,
  rollout_id TEXT NOT NULL,
  group_id TEXT NOT NULL,
  task_id TEXT NOT NULL,
  domain TEXT NOT NULL,
  status INTEGER NOT NULL,
  score DOUBLE PRECISION NOT NULL,
  start_ns BIGINT NOT NULL,
  end_ns BIGINT NOT NULL,
  failure_reason TEXT NOT NULL,
  num_steps INTEGER NOT NULL DEFAULT 0,
  body BYTEA NOT NULL
);
CREATE INDEX episodes_rollout ON episodes(rollout_id, start_ns, episode_id);
CREATE INDEX episodes_start ON episodes(start_ns, episode_id);
CREATE TABLE steps (
  episode_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BYTEA NOT NULL,
  PRIMARY KEY (episode_id, idx)
);
CREATE TABLE episode_versions (
  model_version BIGINT NOT NULL,
  episode_id TEXT NOT NULL,
  PRIMARY KEY (model_version, episode_id)
);
CREATE INDEX episode_versions_episode ON episode_versions(episode_id);
CREATE TABLE blobs (
  sha256 TEXT PRIMARY KEY,
  size BIGINT NOT NULL,
  media_type TEXT NOT NULL
);
CREATE TABLE blob_refs (
  episode_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (episode_id, sha256)
);
CREATE INDEX blob_refs_sha ON blob_refs(sha256);
`,
	},
	{
		// Version 2: ListEpisodes by task and by group without scanning
		// the whole rollout.
		sqlite: `
CREATE INDEX episodes_task ON episodes(rollout_id, task_id, start_ns, episode_id);
CREATE INDEX episodes_group ON episodes(group_id, start_ns, episode_id);
`,
		postgres: `
CREATE INDEX episodes_task ON episodes(rollout_id, task_id, start_ns, episode_id);
CREATE INDEX episodes_group ON episodes(group_id, start_ns, episode_id);
`,
	},
	{
		// Version 3: the attempt, so a late header of an earlier attempt
		// cannot move a finished episode back to running.
		sqlite:   `ALTER TABLE episodes ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0`,
		postgres: `ALTER TABLE episodes ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0`,
	},
	{
		// Version 4: covering indexes so GetStats aggregates a rollout
		// from indexes alone (3-4x faster over a million steps).
		sqlite: `
CREATE INDEX episodes_stats ON episodes(rollout_id, domain, failure_reason, status, score, num_steps, episode_id);
CREATE INDEX episode_versions_cover ON episode_versions(episode_id, model_version);
DROP INDEX episode_versions_episode;
`,
		postgres: `
CREATE INDEX episodes_stats ON episodes(rollout_id, domain, failure_reason, status, score, num_steps, episode_id);
CREATE INDEX episode_versions_cover ON episode_versions(episode_id, model_version);
DROP INDEX episode_versions_episode;
`,
	},
	{
		// Version 5: where the blob store put each blob (a pack file and
		// offset); '' for blobs stored one file each, or in S3, where the
		// hash alone finds them.
		sqlite:   `ALTER TABLE blobs ADD COLUMN loc TEXT NOT NULL DEFAULT ''`,
		postgres: `ALTER TABLE blobs ADD COLUMN loc TEXT NOT NULL DEFAULT ''`,
	},
	{
		// Version 6: each rollout's episode count, first start and last
		// end, kept by every write of episodes (see applySpans), so that
		// listing rollouts reads a page of this table instead of
		// aggregating every stored episode. Back-filled here once.
		sqlite: `
CREATE TABLE rollouts (
  rollout_id TEXT PRIMARY KEY,
  episodes INTEGER NOT NULL,
  first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL
);
INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns)
  SELECT rollout_id, COUNT(*), MIN(start_ns), MAX(end_ns) FROM episodes GROUP BY rollout_id;
CREATE INDEX rollouts_newest ON rollouts(first_ns DESC, rollout_id);
`,
		postgres: `
CREATE TABLE rollouts (
  rollout_id TEXT PRIMARY KEY,
  episodes BIGINT NOT NULL,
  first_ns BIGINT NOT NULL,
  last_ns BIGINT NOT NULL
);
INSERT INTO rollouts (rollout_id, episodes, first_ns, last_ns)
  SELECT rollout_id, COUNT(*), MIN(start_ns), MAX(end_ns) FROM episodes GROUP BY rollout_id;
CREATE INDEX rollouts_newest ON rollouts(first_ns DESC, rollout_id);
`,
	},
}

// SchemaVersion is the schema version this build migrates to.
func SchemaVersion() int { return len(migrations) }

func (db *DB) migrate(ctx context.Context, upTo int) error {
	if _, err := db.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for i, m := range migrations[:upTo] {
		version := i + 1
		if err := db.applyMigration(ctx, version, m.sqlite, m.postgres); err != nil {
			return fmt.Errorf("migrate index to version %d: %w", version, err)
		}
	}
	return nil
}

func (db *DB) applyMigration(ctx context.Context, version int, sqliteSQL, postgresSQL string) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	body := sqliteSQL
	if db.dialect == postgresDialect {
		body = postgresSQL
		// Two replicas starting together must not both migrate.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7203551)`); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, db.q(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	for _, stmt := range strings.Split(body, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, db.q(`INSERT INTO schema_migrations (version) VALUES (?)`), version); err != nil {
		return err
	}
	return tx.Commit()
}
