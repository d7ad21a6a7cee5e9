// Package store persists vmmanager's VMs and leases in SQLite so that a
// restarted (or SIGKILLed) vmmanager knows its VMs and its live leases with
// their remaining TTL. Lease tokens are stored only as SHA-256 hashes.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// VM is a persisted VM row.
type VM struct {
	ID           string
	Pool         string
	Provider     string
	State        string
	Ref          string
	Endpoint     string
	Ports        map[string]string
	Data         map[string]string
	CreateTime   time.Time
	StateTime    time.Time
	LastError    string
	LeasesServed int64
	Resets       int64
}

// Lease is a persisted lease row.
type Lease struct {
	ID          string
	Pool        string
	VMID        string
	TokenHash   []byte
	Holder      string
	TTL         time.Duration
	AcquireTime time.Time
	ExpireTime  time.Time
	Renewals    int64
	Labels      map[string]string
}

// Store is a SQLite database of VMs and leases.
type Store struct {
	db         *sql.DB
	st         *stmts
	instanceID string
	stop       chan struct{}
	done       chan struct{}
}

const schema = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vms (
  id TEXT PRIMARY KEY, pool TEXT NOT NULL, provider TEXT NOT NULL, state TEXT NOT NULL,
  ref TEXT NOT NULL, endpoint TEXT NOT NULL, ports TEXT NOT NULL, data TEXT NOT NULL,
  create_time INTEGER NOT NULL, state_time INTEGER NOT NULL, last_error TEXT NOT NULL,
  leases_served INTEGER NOT NULL, resets INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS leases (
  id TEXT PRIMARY KEY, pool TEXT NOT NULL, vm_id TEXT NOT NULL, token_hash BLOB NOT NULL,
  holder TEXT NOT NULL, ttl_ns INTEGER NOT NULL, acquire_time INTEGER NOT NULL,
  expire_time INTEGER NOT NULL, renewals INTEGER NOT NULL, labels TEXT NOT NULL DEFAULT '{}');
`

// Open opens (creating if needed) dir/vmmanager.db.
func Open(ctx context.Context, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, "vmmanager.db")
	// Automatic checkpoints would run (and fsync) inside whichever commit
	// crosses the threshold, a multi-millisecond stall on the hand-off
	// path; checkpointer runs them in the background instead.
	// WAL with synchronous=NORMAL survives a process crash (SIGKILL) without
	// an fsync per commit, which keeps a lease hand-off well under a
	// millisecond; only a power loss can drop the last commits.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)&_pragma=wal_autocheckpoint(0)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Two connections: writes (serialised by SQLite and the pool locks) and
	// the background checkpointer, which must not stall a lease hand-off.
	db.SetMaxOpenConns(2)
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	if err := addLabelsColumn(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	st, err := prepare(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, st: st, stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.loadInstanceID(ctx); err != nil {
		db.Close()
		return nil, err
	}
	go s.checkpointer()
	return s, nil
}

// checkpointInterval is how often the WAL is folded into the database.
const checkpointInterval = 2 * time.Second

// checkpointer folds the WAL into the database in the background. PASSIVE
// checkpoints never block writers.
func (s *Store) checkpointer() {
	defer close(s.done)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// An error here (busy) only postpones the checkpoint.
			s.db.Exec(`PRAGMA wal_checkpoint(PASSIVE)`)
		}
	}
}

func (s *Store) loadInstanceID(ctx context.Context) error {
	err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='instance_id'`).Scan(&s.instanceID)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read instance id: %w", err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("generate instance id: %w", err)
	}
	s.instanceID = hex.EncodeToString(b)
	if _, err := s.db.ExecContext(ctx, `INSERT INTO meta(key,value) VALUES('instance_id',?)`, s.instanceID); err != nil {
		return fmt.Errorf("write instance id: %w", err)
	}
	return nil
}

// InstanceID identifies this data directory; providers label what they
// create with it so that two vmmanagers sharing a host never take each
// other's VMs for strays.
func (s *Store) InstanceID() string { return s.instanceID }

// Close stops the checkpointer, checkpoints and closes the database.
func (s *Store) Close() error {
	select {
	case <-s.stop:
		return nil // already closed
	default:
	}
	close(s.stop)
	<-s.done
	s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return s.db.Close()
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v)
}

const (
	putVMSQL = `INSERT OR REPLACE INTO vms(id,pool,provider,state,ref,endpoint,ports,data,create_time,state_time,last_error,leases_served,resets)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)`
	putLeaseSQL = `INSERT OR REPLACE INTO leases(id,pool,vm_id,token_hash,holder,ttl_ns,acquire_time,expire_time,renewals,labels)
		VALUES(?,?,?,?,?,?,?,?,?,?)`
	delLeaseSQL = `DELETE FROM leases WHERE id=?`
)

// stmts are prepared once: parsing SQL on every hand-off costs more than
// executing it.
type stmts struct {
	putVM, putLease, delLease *sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB) (*stmts, error) {
	var st stmts
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{{&st.putVM, putVMSQL}, {&st.putLease, putLeaseSQL}, {&st.delLease, delLeaseSQL}} {
		s, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		*p.dst = s
	}
	return &st, nil
}

// execer runs a prepared statement, inside a transaction or not.
type execer func(stmt *sql.Stmt, args ...any) (sql.Result, error)

func direct(stmt *sql.Stmt, args ...any) (sql.Result, error) { return stmt.Exec(args...) }

func inTx(tx *sql.Tx) execer {
	return func(stmt *sql.Stmt, args ...any) (sql.Result, error) { return tx.Stmt(stmt).Exec(args...) }
}

func (s *Store) putVM(e execer, v VM) error {
	ports, err := json.Marshal(v.Ports)
	if err != nil {
		return fmt.Errorf("encode ports: %w", err)
	}
	data, err := json.Marshal(v.Data)
	if err != nil {
		return fmt.Errorf("encode provider data: %w", err)
	}
	_, err = e(s.st.putVM,
		v.ID, v.Pool, v.Provider, v.State, v.Ref, v.Endpoint, string(ports), string(data),
		ns(v.CreateTime), ns(v.StateTime), v.LastError, v.LeasesServed, v.Resets)
	if err != nil {
		return fmt.Errorf("write vm %s: %w", v.ID, err)
	}
	return nil
}

func (s *Store) putLease(e execer, l Lease) error {
	labels, err := json.Marshal(l.Labels)
	if err != nil {
		return fmt.Errorf("encode labels of lease %s: %w", l.ID, err)
	}
	_, err = e(s.st.putLease,
		l.ID, l.Pool, l.VMID, l.TokenHash, l.Holder, int64(l.TTL), ns(l.AcquireTime), ns(l.ExpireTime), l.Renewals, string(labels))
	if err != nil {
		return fmt.Errorf("write lease %s: %w", l.ID, err)
	}
	return nil
}

// SaveVM inserts or replaces a VM.
func (s *Store) SaveVM(v VM) error { return s.putVM(direct, v) }

// DeleteVM removes a VM and any lease on it.
func (s *Store) DeleteVM(id string) error {
	return s.tx(func(tx *sql.Tx) error {
		if _, err := tx.Exec(`DELETE FROM leases WHERE vm_id=?`, id); err != nil {
			return fmt.Errorf("delete leases of vm %s: %w", id, err)
		}
		if _, err := tx.Exec(`DELETE FROM vms WHERE id=?`, id); err != nil {
			return fmt.Errorf("delete vm %s: %w", id, err)
		}
		return nil
	})
}

// SaveLease writes a lease and its VM in one transaction.
func (s *Store) SaveLease(l Lease, v VM) error {
	return s.tx(func(tx *sql.Tx) error {
		if err := s.putLease(inTx(tx), l); err != nil {
			return err
		}
		return s.putVM(inTx(tx), v)
	})
}

// EndLease deletes a lease and writes its VM in one transaction.
func (s *Store) EndLease(leaseID string, v VM) error {
	return s.tx(func(tx *sql.Tx) error {
		if _, err := inTx(tx)(s.st.delLease, leaseID); err != nil {
			return fmt.Errorf("delete lease %s: %w", leaseID, err)
		}
		return s.putVM(inTx(tx), v)
	})
}

// HandOff ends a lease and grants another in one transaction: it deletes
// endedLeaseID, writes ended (the released VM) unless it is the VM
// granted, and then the new lease l and its VM v. One commit rather than
// two is a shorter hand-off from a release to a waiting acquirer.
func (s *Store) HandOff(endedLeaseID string, ended VM, l Lease, v VM) error {
	return s.tx(func(tx *sql.Tx) error {
		if _, err := inTx(tx)(s.st.delLease, endedLeaseID); err != nil {
			return fmt.Errorf("delete lease %s: %w", endedLeaseID, err)
		}
		if ended.ID != v.ID {
			if err := s.putVM(inTx(tx), ended); err != nil {
				return err
			}
		}
		if err := s.putLease(inTx(tx), l); err != nil {
			return err
		}
		return s.putVM(inTx(tx), v)
	})
}

func (s *Store) tx(f func(*sql.Tx) error) error {
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// VMs returns every stored VM of a pool.
func (s *Store) VMs(ctx context.Context, pool string) ([]VM, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id,pool,provider,state,ref,endpoint,ports,data,create_time,state_time,last_error,leases_served,resets
		FROM vms WHERE pool=? ORDER BY id`, pool)
	if err != nil {
		return nil, fmt.Errorf("query vms: %w", err)
	}
	defer rows.Close()
	var out []VM
	for rows.Next() {
		var v VM
		var ports, data string
		var ct, st int64
		if err := rows.Scan(&v.ID, &v.Pool, &v.Provider, &v.State, &v.Ref, &v.Endpoint, &ports, &data, &ct, &st, &v.LastError, &v.LeasesServed, &v.Resets); err != nil {
			return nil, fmt.Errorf("scan vm: %w", err)
		}
		if err := json.Unmarshal([]byte(ports), &v.Ports); err != nil {
			return nil, fmt.Errorf("decode ports of vm %s: %w", v.ID, err)
		}
		if err := json.Unmarshal([]byte(data), &v.Data); err != nil {
			return nil, fmt.Errorf("decode data of vm %s: %w", v.ID, err)
		}
		v.CreateTime, v.StateTime = fromNS(ct), fromNS(st)
		out = append(out, v)
	}
	return out, rows.Err()
}

// Leases returns every stored lease of a pool.
func (s *Store) Leases(ctx context.Context, pool string) ([]Lease, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id,pool,vm_id,token_hash,holder,ttl_ns,acquire_time,expire_time,renewals,labels
		FROM leases WHERE pool=? ORDER BY acquire_time`, pool)
	if err != nil {
		return nil, fmt.Errorf("query leases: %w", err)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var ttl, at, et int64
		var labels string
		if err := rows.Scan(&l.ID, &l.Pool, &l.VMID, &l.TokenHash, &l.Holder, &ttl, &at, &et, &l.Renewals, &labels); err != nil {
			return nil, fmt.Errorf("scan lease: %w", err)
		}
		// Labels are for people: a row whose labels do not decode still
		// restores its lease.
		_ = json.Unmarshal([]byte(labels), &l.Labels)
		l.TTL, l.AcquireTime, l.ExpireTime = time.Duration(ttl), fromNS(at), fromNS(et)
		out = append(out, l)
	}
	return out, rows.Err()
}

// Pools returns the names of every pool with stored VMs, so that VMs of
// pools removed from the config can be cleaned up.
func (s *Store) Pools(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT pool FROM vms ORDER BY pool`)
	if err != nil {
		return nil, fmt.Errorf("query pools: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("scan pool: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// addLabelsColumn brings a database made before leases had labels up to
// the schema: CREATE TABLE IF NOT EXISTS leaves an existing table alone.
func addLabelsColumn(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('leases') WHERE name='labels'`).Scan(&n); err != nil {
		return fmt.Errorf("read lease columns: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, `ALTER TABLE leases ADD COLUMN labels TEXT NOT NULL DEFAULT '{}'`); err != nil {
		return fmt.Errorf("add labels to leases: %w", err)
	}
	return nil
}
