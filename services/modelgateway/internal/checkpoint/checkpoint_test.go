package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
)

type applied struct {
	path    string
	version int64
}

func newWatcher(t *testing.T, cfg Config, clk clock.Clock, refuse error) (*Watcher, *[]applied, *int64) {
	t.Helper()
	var got []applied
	cur := new(int64)
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	w := New(cfg, Options{Clock: clk, Current: func() int64 { return *cur },
		Apply: func(_ context.Context, path string, v int64) error {
			if refuse != nil {
				return refuse
			}
			got = append(got, applied{path, v})
			*cur = v
			return nil
		}})
	return w, &got, cur
}

func TestStableSize(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1e9, 0))
	w, got, _ := newWatcher(t, Config{Dir: dir, Complete: CompleteStableSize, StableFor: 30 * time.Second}, clk, nil)
	f := filepath.Join(dir, "ckpt-7.bin")
	if err := os.WriteFile(f, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w.Scan(ctx)
	clk.Advance(20 * time.Second)
	w.Scan(ctx)
	if len(*got) != 0 {
		t.Fatalf("loaded after 20 s of a 30 s stable period: %v", *got)
	}
	// It grows: the stable period starts again.
	if err := os.WriteFile(f, make([]byte, 200), 0o644); err != nil {
		t.Fatal(err)
	}
	clk.Advance(15 * time.Second)
	w.Scan(ctx)
	clk.Advance(20 * time.Second)
	w.Scan(ctx)
	if len(*got) != 0 {
		t.Fatalf("loaded 20 s after it grew: %v", *got)
	}
	clk.Advance(10 * time.Second)
	w.Scan(ctx)
	if want := []applied{{f, 7}}; len(*got) != 1 || (*got)[0] != want[0] {
		t.Fatalf("got %v, want %v", *got, want)
	}
	// Loaded once only.
	clk.Advance(time.Minute)
	w.Scan(ctx)
	if len(*got) != 1 {
		t.Fatalf("loaded again: %v", *got)
	}
}

func TestMarkerNewestWinsAndRetry(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1e9, 0))
	for _, n := range []string{"step-2", "step-10", "step-9", "other-99"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "DONE"), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(dir, "step-11"), 0o755) // no marker
	retry := true
	var got []applied
	w := New(Config{Dir: dir, Pattern: "step-*", Marker: "DONE"}, Options{Clock: clk, Current: func() int64 { return 0 },
		Apply: func(_ context.Context, p string, v int64) error {
			if retry {
				return ErrRetry
			}
			got = append(got, applied{filepath.Base(p), v})
			return nil
		}})
	w.Scan(context.Background())
	retry = false
	w.Scan(context.Background())
	if len(got) != 1 || got[0] != (applied{"step-10", 10}) {
		t.Fatalf("got %v, want step-10 at 10 after a retry", got)
	}
}

func TestRefusedReported(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "step-3"), 0o755)
	os.WriteFile(filepath.Join(dir, "step-3", "COMPLETE"), nil, 0o644)
	w, _, _ := newWatcher(t, Config{Dir: dir}, clock.NewFake(time.Unix(1e9, 0)), errors.New("backend said no"))
	w.Scan(context.Background())
	if _, e := w.Status(); e == "" {
		t.Fatal("refusal not reported")
	}
}

func TestVersionOf(t *testing.T) {
	for _, tt := range []struct {
		name string
		want int64
	}{{"step-200", 200}, {"ckpt_3_step_40", 40}, {"latest", -1}, {"step-99999999999999999999", -1}} {
		if got := VersionOf(tt.name); got != tt.want {
			t.Errorf("VersionOf(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
}
