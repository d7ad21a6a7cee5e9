package storage_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

// TestUpgradeFromFilePerBlob: a data directory written before pack files
// (one file per blob at blobs/<h>/<sha>, index rows without a location)
// is read, exported and deleted by this release.
func TestUpgradeFromFilePerBlob(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	shot := pngBytes(t, 7)
	sum := sha(shot)
	legacy := filepath.Join(dir, "blobs", sum[:1], sum)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, shot, 0o640); err != nil {
		t.Fatal(err)
	}
	idx, err := index.Open(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := step("old-e", 0, nil, 1)
	st.Observation.Screenshot = &pb.BlobRef{Sha256: sum, MediaType: "image/png", Size: int64(len(shot))}
	rec := index.BlobRecord{SHA256: sum, Size: int64(len(shot)), MediaType: "image/png"} // Loc "": the old layout
	if _, err := idx.Commit(ctx, []*index.Batch{{
		Episodes: []index.EpisodeRecord{{Episode: episode("old", "old-e", "g", "t", "os", 0)}},
		Steps:    []index.StepRecord{{Step: st, Blobs: []index.BlobRecord{rec}, Attempt: 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	idx.Close()

	c := startService(t, storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")})
	if got, _, err := blobBytes(t, ctx, c, sum); err != nil || !bytes.Equal(got, shot) {
		t.Fatalf("GetBlob of an old blob = %d bytes, %v; want the %d stored", len(got), err, len(shot))
	}
	ep, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "old-e", IncludeSteps: true, InlineBlobs: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := ep.GetSteps()[0].GetObservation().GetScreenshot().GetData(); !bytes.Equal(got, shot) {
		t.Errorf("inline screenshot = %d bytes, want %d", len(got), len(shot))
	}
	resp, err := c.DeleteRollout(context.WithoutCancel(ctx), &pb.DeleteRolloutRequest{RolloutId: "old"})
	if err != nil || resp.GetBlobs() != 1 {
		t.Fatalf("DeleteRollout = %v, %v; want 1 blob freed", resp, err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("old blob file still there after DeleteRollout (stat: %v)", err)
	}
}
