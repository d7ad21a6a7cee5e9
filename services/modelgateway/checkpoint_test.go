package modelgateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// writeCheckpoint makes dir/name with a config.json (unless broken) and,
// when complete, the marker.
func writeCheckpoint(t *testing.T, dir, name string, complete, broken bool) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if !broken {
		if err := os.WriteFile(filepath.Join(p, "config.json"), []byte(`{}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(p, "model.safetensors"), make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	if complete {
		if err := os.WriteFile(filepath.Join(p, "COMPLETE"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestCheckpointWatcher(t *testing.T) {
	a := startFake(t, fakellm.Config{CheckWeights: true})
	b := startFake(t, fakellm.Config{CheckWeights: true})
	dir := t.TempDir()
	fc := &FileConfig{
		Backends:    backends(KindVLLM, a, b),
		Checkpoints: &CheckpointsConfig{Dir: dir, Pattern: "step-*", Interval: 20 * time.Millisecond},
	}
	h := startGateway(t, fc, nil)
	version := func() int64 {
		res, err := h.cli.ListBackends(ctxT(t, 5*time.Second), &rmv1.ListBackendsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.ModelVersion
	}
	result := func(r string) float64 { return testutil.ToFloat64(h.svc.met.Checkpoints.WithLabelValues(r)) }

	// A complete checkpoint is loaded on every backend, rolling.
	p1 := writeCheckpoint(t, dir, "step-10", true, false)
	waitForD(t, 5*time.Second, "version 10", func() bool { return version() == 10 })
	for _, f := range []*fakellm.Instance{a, b} {
		if st := f.Stats(); st.WeightSource != p1 || st.WeightVersion != "10" {
			t.Fatalf("fakellm serves %q at %q, want %s at 10", st.WeightSource, st.WeightVersion, p1)
		}
	}

	// A half-written one (no marker yet) is left alone.
	writeCheckpoint(t, dir, "step-20", false, false)
	time.Sleep(300 * time.Millisecond)
	if v := version(); v != 10 {
		t.Fatalf("half-written checkpoint loaded: version %d", v)
	}
	// A complete one the backends refuse keeps the previous version.
	writeCheckpoint(t, dir, "step-30", true, true)
	waitForD(t, 5*time.Second, "refusal", func() bool { return result("refused") == 1 })
	if v := version(); v != 10 {
		t.Fatalf("refused checkpoint moved the version to %d", v)
	}
	res, err := h.cli.ListBackends(ctxT(t, 5*time.Second), &rmv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.GetCheckpointError(), "step-30") || !strings.HasSuffix(res.GetCheckpointLoaded(), "step-10") {
		t.Fatalf("ListBackends checkpoint_loaded %q, checkpoint_error %q: want step-10 loaded and step-30's refusal",
			res.GetCheckpointLoaded(), res.GetCheckpointError())
	}
	if st := a.Stats(); st.WeightSource != p1 {
		t.Fatalf("after refusal fakellm serves %q", st.WeightSource)
	}
	// The half-written one completes: it was not complete when step-30
	// was chosen, so it is a candidate now, and newer than version 10.
	if err := os.WriteFile(filepath.Join(dir, "step-20", "COMPLETE"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitForD(t, 5*time.Second, "version 20", func() bool { return version() == 20 })

	// The trainer's update wins: it may repeat the watcher's version, and
	// older checkpoints are skipped after it.
	if _, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 20}); err != nil {
		t.Fatalf("trainer repeating the watcher's version: %v", err)
	}
	if _, err := h.cli.UpdateWeights(ctxT(t, 5*time.Second), &rmv1.UpdateWeightsRequest{Version: 50}); err != nil {
		t.Fatal(err)
	}
	skipped := result("skipped")
	writeCheckpoint(t, dir, "step-40", true, false)
	waitForD(t, 5*time.Second, "skip", func() bool { return result("skipped") == skipped+1 })
	if v := version(); v != 50 {
		t.Fatalf("older checkpoint overrode the trainer's version: %d", v)
	}
	writeCheckpoint(t, dir, "step-60", true, false)
	waitForD(t, 5*time.Second, "version 60", func() bool { return version() == 60 })
}
