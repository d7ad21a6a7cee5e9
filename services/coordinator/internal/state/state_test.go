package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// roundTrip writes one of everything, reopens the database and compares.
func roundTrip(t *testing.T, open func() *Store) {
	ctx := ctxT(t)
	s := open()
	err := s.Write(ctx,
		PutModelVersion(7),
		PutRollout(Rollout{ID: "r1", Spec: []byte{1, 2}, State: 1, CreateTime: 10, StartVersion: 3, NumGroups: 1, NumEpisodes: 2}),
		PutTasks([]Task{{RolloutID: "r1", Idx: 0, Task: []byte("t0")}}),
		PutGroups(Group{ID: "r1-g0", RolloutID: "r1", TaskIdx: 0, Seed: 5, State: 1, DoneSeq: 9}),
		PutEpisodes(Episode{ID: "r1-e0", RolloutID: "r1", GroupID: "r1-g0", Seq: 0, Status: 3, Attempt: 2, Result: []byte("res")},
			Episode{ID: "r1-e1", RolloutID: "r1", GroupID: "r1-g0", Seq: 1, Status: 2, Attempt: 1, RunnerID: "run", LeaseID: "l", LeaseToken: "tok"}),
		PutBatch(Batch{ID: "b1", RolloutID: "r1", GroupIDs: []string{"r1-g0"}, ExpireTime: 99}),
	)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	// Upserts replace.
	if err := s.Write(ctx, PutEpisodes(Episode{ID: "r1-e1", RolloutID: "r1", GroupID: "r1-g0", Seq: 1, Status: 1, Attempt: 2}), PutBatch(Batch{ID: "b1", RolloutID: "r1", GroupIDs: []string{"r1-g0"}, ExpireTime: 99, Acked: true})); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Write(ctx, PutModelVersion(8)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	s = open()
	defer s.Close()
	snap, err := s.Load(ctx)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if snap.ModelVersion != 7 || len(snap.Rollouts) != 1 || snap.Rollouts[0].StartVersion != 3 || len(snap.Tasks) != 1 || len(snap.Groups) != 1 || snap.Groups[0].DoneSeq != 9 {
		t.Errorf("snapshot = %+v", snap)
	}
	if len(snap.Episodes) != 2 || string(snap.Episodes[0].Result) != "res" || snap.Episodes[1].Status != 1 || snap.Episodes[1].Attempt != 2 || snap.Episodes[1].LeaseID != "" {
		t.Errorf("episodes = %+v", snap.Episodes)
	}
	if len(snap.Batches) != 1 || !snap.Batches[0].Acked || snap.Batches[0].GroupIDs[0] != "r1-g0" {
		t.Errorf("batches = %+v", snap.Batches)
	}
}

func TestSQLiteRoundTrip(t *testing.T) {
	dir := t.TempDir()
	roundTrip(t, func() *Store {
		s, err := Open(ctxT(t), "", dir)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

func TestGroupCommit(t *testing.T) {
	s, err := Open(ctxT(t), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		s.Submit(func(err error) {
			errs <- err
			wg.Done()
		}, PutEpisodes(Episode{ID: fmt.Sprint(i), RolloutID: "r", GroupID: "g", Seq: int64(i)}))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	commits, ops := s.Stats()
	if ops != n || commits >= n/2 {
		t.Errorf("%d ops in %d commits: want %d ops group-committed in far fewer commits", ops, commits, n)
	}
	snap, err := s.Load(ctxT(t))
	if err != nil || len(snap.Episodes) != n {
		t.Errorf("loaded %d episodes (%v), want %d", len(snap.Episodes), err, n)
	}
}

// TestPostgresRoundTrip runs a real PostgreSQL server in a temporary
// directory.
func TestPostgresRoundTrip(t *testing.T) {
	dsn := startPostgres(t)
	roundTrip(t, func() *Store {
		s, err := Open(ctxT(t), dsn, "")
		if err != nil {
			t.Fatalf("Open postgres: %v", err)
		}
		return s
	})
}

func startPostgres(t *testing.T) string {
	t.Helper()
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("initdb (PostgreSQL) is required under CI")
		}
		t.Skip("PostgreSQL (initdb, pg_ctl) not installed; this test fails under CI")
	}
	dir, err := os.MkdirTemp("", "coordinator-pg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// PostgreSQL refuses to run as root: run it as the postgres user then.
	var prefix []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		prefix = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) {
		t.Helper()
		full := append(append([]string{}, prefix...), args...)
		out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	run(initdb, "-D", data, "-U", "postgres", "--auth", "trust", "-E", "UTF8")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	pgctl := filepath.Join(filepath.Dir(initdb), "pg_ctl")
	run(pgctl, "-D", data, "-w", "-l", filepath.Join(dir, "log"), "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir), "start")
	t.Cleanup(func() {
		full := append(append([]string{}, prefix...), pgctl, "-D", data, "-m", "immediate", "stop")
		_ = exec.Command(full[0], full[1:]...).Run()
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}
