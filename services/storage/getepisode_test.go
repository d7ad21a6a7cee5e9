package storage_test

import (
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// TestGetEpisodeInlineWithinMessageLimit: GetEpisode answers in one gRPC
// message. Steps under the 64 MiB limit and blobs under
// --max-inline-bytes may still add up past it; the answer is then refused
// before any blob is read, FailedPrecondition naming the fields and
// pointing at GetBlob, rather than failing as ResourceExhausted once the
// server has built it.
func TestGetEpisodeInlineWithinMessageLimit(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	c := startService(t, storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")})
	const id = "rinl-e0"
	text := strings.Repeat("x", 3500<<10)
	msgs := []*pb.AppendStepsRequest{epMsg(episode("rinl", id, "g", "t", "os", 0))}
	for i := range 11 {
		st := step(id, int32(i), nil, 1)
		st.Observation = nil
		if i < 10 {
			shot := make([]byte, 3<<20)
			rand.Read(shot)
			st = step(id, int32(i), shot, 1)
		}
		st.ModelCall.ResponseText = text
		msgs = append(msgs, stepMsg(st))
	}
	if _, err := appendAll(ctx, c, msgs...); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}

	// 38 MiB of steps and 30 MiB of screenshots: each within its bound
	// (64 MiB, --max-inline-bytes 32 MiB), together past the message
	// limit.
	_, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: id, IncludeSteps: true, InlineBlobs: true})
	for _, want := range []string{"include_steps", "inline_blobs", "GetBlob"} {
		wantCode(t, err, codes.FailedPrecondition, want)
	}
	for _, req := range []*pb.GetEpisodeRequest{
		{EpisodeId: id, IncludeSteps: true},
		{EpisodeId: id, InlineBlobs: true},
	} {
		if _, err := c.GetEpisode(ctx, req); err != nil {
			t.Errorf("GetEpisode %v = %v", req, err)
		}
	}
}
