package ingest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// msgs replays AppendSteps messages as a client stream would deliver them.
type msgs []*pb.AppendStepsRequest

func (m *msgs) Recv() (*pb.AppendStepsRequest, error) {
	if len(*m) == 0 {
		return nil, io.EOF
	}
	x := (*m)[0]
	*m = (*m)[1:]
	return x, nil
}

func newWriter(t *testing.T, limits Limits) *Writer {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	idx, err := index.Open(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := blobstore.NewFiles(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	w := New(idx, files, Options{Limits: limits})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		idx.Close()
	})
	return w
}

// TestSharedContentWrittenOnce streams the same screenshot from many
// concurrent streams; it must be written exactly once.
func TestSharedContentWrittenOnce(t *testing.T) {
	w := newWriter(t, Limits{BatchSteps: 3})
	shot := make([]byte, 64<<10)
	rand.Read(shot)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var written, acked int64
	for s := 0; s < 16; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("e%d", s)
			m := msgs{{Item: &pb.AppendStepsRequest_Episode{Episode: &pb.Episode{EpisodeId: id, RolloutId: "r"}}}}
			for i := int32(0); i < 8; i++ {
				m = append(m, &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: &pb.Step{EpisodeId: id, Index: i,
					Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: shot}}}}})
			}
			resp, err := w.Append(context.Background(), &m)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			written += resp.GetBlobBytesWritten()
			acked += int64(len(resp.GetAcked()))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if written != int64(len(shot)) {
		t.Errorf("blob bytes written = %d, want %d (once)", written, len(shot))
	}
	if acked != 16*8 {
		t.Errorf("acked = %d, want %d", acked, 16*8)
	}
}

func TestLimits(t *testing.T) {
	w := newWriter(t, Limits{MaxBlobBytes: 1000, MaxStepBytes: 2000, MaxBlobsPerMessage: 2})
	ep := &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: &pb.Episode{EpisodeId: "e", RolloutId: "r"}}}
	step := func(mut func(*pb.Step)) *pb.AppendStepsRequest {
		s := &pb.Step{EpisodeId: "e", Index: 0}
		mut(s)
		return &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: s}}
	}
	for _, tc := range []struct {
		name  string
		msg   *pb.AppendStepsRequest
		field string
	}{
		{"blob too large", step(func(s *pb.Step) {
			s.Observation = &pb.Observation{Screenshot: &pb.BlobRef{Data: make([]byte, 1001)}}
		}), "step.observation.screenshot.data"},
		{"step too large", step(func(s *pb.Step) { s.Error = string(make([]byte, 2001)) }), "step"},
		{"too many blobs", step(func(s *pb.Step) {
			s.Observation = &pb.Observation{Screenshot: &pb.BlobRef{Data: []byte{1}}, AccessibilityTree: &pb.BlobRef{Data: []byte{2}}}
			s.ModelCall = &pb.ModelCall{NewMessages: []*pb.ChatMessage{{Content: []*pb.ContentPart{{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: []byte{3}}}}}}}}
		}), "step.observation.screenshot"},
		{"index too large", step(func(s *pb.Step) { s.Index = 1_000_001 }), "step.index"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := msgs{ep, tc.msg}
			_, err := w.Append(context.Background(), &m)
			fe, ok := asField(err)
			if !ok || fe != tc.field {
				t.Errorf("got error %v, want a field error on %s", err, tc.field)
			}
		})
	}
}

func asField(err error) (string, bool) {
	fe, ok := validate.AsFieldError(err)
	if !ok {
		return "", false
	}
	return fe.Field, true
}

// TestContentCarriedOncePerMessage: a step may carry its screenshot as the
// observation and name it by hash in its new message, or carry it twice;
// either way it is hashed from the bytes, written once, and both slots end
// as references to it. A reference to content neither stored nor carried
// is refused, and so is a digest the data does not hash to.
func TestContentCarriedOncePerMessage(t *testing.T) {
	shot := make([]byte, 32<<10)
	rand.Read(shot)
	sameLen := make([]byte, len(shot))
	rand.Read(sameLen)
	sum := sha256.Sum256(shot)
	digest := hex.EncodeToString(sum[:])
	other := sha256.Sum256(sameLen)
	image := func(img *pb.Image) *pb.ModelCall {
		return &pb.ModelCall{NewMessages: []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{{Part: &pb.ContentPart_Image{Image: img}}}}}}
	}
	tests := []struct {
		name        string
		obs         *pb.BlobRef
		call        *pb.ModelCall
		wantField   string // "" for success
		wantWritten int64
		wantImage   string // the digest the stored image names
	}{
		{"data twice", &pb.BlobRef{Data: shot}, image(&pb.Image{Data: shot, MediaType: "image/png"}), "", int64(len(shot)), digest},
		{"image by hash of the observation", &pb.BlobRef{Data: shot, Sha256: digest}, image(&pb.Image{Blob: &pb.BlobRef{Sha256: digest, Size: int64(len(shot))}}), "", int64(len(shot)), digest},
		{"image carried, observation by hash", &pb.BlobRef{Sha256: digest}, image(&pb.Image{Data: shot}), "", int64(len(shot)), digest},
		{"same length, other bytes", &pb.BlobRef{Data: shot}, image(&pb.Image{Data: sameLen}), "", int64(2 * len(shot)), hex.EncodeToString(other[:])},
		{"reference to nothing carried or stored", &pb.BlobRef{Data: sameLen}, image(&pb.Image{Blob: &pb.BlobRef{Sha256: digest}}), "step.model_call.new_messages[0].content[0].image.blob.sha256", 0, ""},
		{"reference with the wrong size", &pb.BlobRef{Data: shot}, image(&pb.Image{Blob: &pb.BlobRef{Sha256: digest, Size: 5}}), "step.model_call.new_messages[0].content[0].image.blob.size", 0, ""},
		{"digest the data does not hash to", &pb.BlobRef{Data: sameLen, Sha256: digest}, image(&pb.Image{Blob: &pb.BlobRef{Sha256: digest}}), "step.observation.screenshot.sha256", 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t, Limits{})
			st := &pb.Step{EpisodeId: "e", Observation: &pb.Observation{Screenshot: tc.obs}, ModelCall: tc.call}
			m := msgs{
				{Item: &pb.AppendStepsRequest_Episode{Episode: &pb.Episode{EpisodeId: "e", RolloutId: "r"}}},
				{Item: &pb.AppendStepsRequest_Step{Step: st}},
			}
			resp, err := w.Append(context.Background(), &m)
			if tc.wantField != "" {
				if field, ok := asField(err); !ok || field != tc.wantField {
					t.Fatalf("got error %v, want a field error on %s", err, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetBlobBytesWritten(); got != tc.wantWritten {
				t.Errorf("blob bytes written = %d, want %d", got, tc.wantWritten)
			}
			if got := st.GetObservation().GetScreenshot(); got.GetSha256() != digest || len(got.GetData()) != 0 {
				t.Errorf("stored screenshot = %s with %d bytes inline, want a reference to %s", got.GetSha256(), len(got.GetData()), digest)
			}
			img := st.GetModelCall().GetNewMessages()[0].GetContent()[0].GetImage()
			if img.GetBlob().GetSha256() != tc.wantImage || len(img.GetData()) != 0 || img.GetBlob().GetSize() != int64(len(shot)) {
				t.Errorf("stored image = %v, want a reference to %s of %d bytes", img, tc.wantImage, len(shot))
			}
		})
	}
}

// countingIndex counts blob lookups.
type countingIndex struct {
	*index.DB
	lookups atomic.Int64
}

func (c *countingIndex) Blob(ctx context.Context, sha string) (index.BlobRecord, error) {
	c.lookups.Add(1)
	return c.DB.Blob(ctx, sha)
}

// TestDigestFilter: with the filter loaded, a new blob is written without
// an index lookup, content stored before (by an earlier process, found by
// the load, or by this one) is still written once, and a filter outgrown
// is replaced by a larger one holding every stored digest.
func TestDigestFilter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(minCapacity int) (*Writer, *countingIndex, func()) {
		db, err := index.Open(ctx, filepath.Join(dir, "index.db"))
		if err != nil {
			t.Fatal(err)
		}
		files, err := blobstore.NewFiles(filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		idx := &countingIndex{DB: db}
		w := New(idx, files, Options{FilterDigests: true})
		w.digests.minCapacity = minCapacity
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(runCtx)
		}()
		return w, idx, func() { cancel(); <-done; db.Close() }
	}
	waitReady := func(w *Writer, atLeast int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			b := w.digests.cur.Load()
			if b.ready.Load() && b.capacity >= atLeast {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("filter not loaded: ready %v, capacity %d, want >= %d", b.ready.Load(), b.capacity, atLeast)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	shot := func(i int) []byte {
		b := make([]byte, 4<<10)
		rand.Read(b)
		b[0] = byte(i)
		return b
	}
	appendShots := func(w *Writer, ep string, shots [][]byte) int64 {
		t.Helper()
		m := msgs{{Item: &pb.AppendStepsRequest_Episode{Episode: &pb.Episode{EpisodeId: ep, RolloutId: "r"}}}}
		for i, s := range shots {
			m = append(m, &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: &pb.Step{EpisodeId: ep, Index: int32(i),
				Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: s}}}}})
		}
		resp, err := w.Append(ctx, &m)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetBlobBytesWritten()
	}

	first := [][]byte{shot(1), shot(2), shot(3)}
	w, idx, stop := open(1 << 10)
	waitReady(w, 1<<10)
	before := idx.lookups.Load()
	if got := appendShots(w, "e1", first); got != 3*4<<10 {
		t.Errorf("new blobs: wrote %d bytes, want %d", got, 3*4<<10)
	}
	if n := idx.lookups.Load() - before; n != 0 {
		t.Errorf("new blobs looked up %d times in the index, want 0", n)
	}
	if got := appendShots(w, "e2", first[:1]); got != 0 {
		t.Errorf("content this process stored: wrote %d bytes again", got)
	}
	stop()

	// A new process loads the digests stored before; a filter of 8 is
	// soon outgrown and replaced.
	w, _, stop = open(8)
	defer stop()
	waitReady(w, 8)
	if got := appendShots(w, "e3", first); got != 0 {
		t.Errorf("content an earlier process stored: wrote %d bytes again", got)
	}
	var more [][]byte
	for i := 0; i < 40; i++ {
		more = append(more, shot(10+i))
	}
	if got := appendShots(w, "e4", more); got != 40*4<<10 {
		t.Errorf("40 new blobs: wrote %d bytes, want %d", got, 40*4<<10)
	}
	waitReady(w, 43)
	for _, s := range append(first, more...) {
		sum := sha256.Sum256(s)
		if !w.digests.mayHold(hex.EncodeToString(sum[:])) {
			t.Fatalf("the grown filter misses a stored digest")
		}
	}
	if got := appendShots(w, "e5", more); got != 0 {
		t.Errorf("after the filter grew: wrote %d bytes of stored content again", got)
	}
}

// TestBloom: no false negatives, and about 1 % false positives at capacity.
func TestBloom(t *testing.T) {
	b := newBloom(10000)
	digest := func(i int) string {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		return hex.EncodeToString(sum[:])
	}
	for i := 0; i < 10000; i++ {
		b.add(digest(i))
	}
	for i := 0; i < 10000; i++ {
		if !b.test(digest(i)) {
			t.Fatalf("digest %d added but not held", i)
		}
	}
	fp := 0
	for i := 10000; i < 30000; i++ {
		if b.test(digest(i)) {
			fp++
		}
	}
	if rate := float64(fp) / 20000; rate > 0.02 {
		t.Errorf("false positives %.2f %%, want about 1 %%", 100*rate)
	}
}

// TestMergedHeaderBounded: a header sent in parts (instruction, then
// system prompt, then evaluator details) merges over the stored one, and
// the merged header is what the index stores and every read returns: it
// is bounded like one header, not one part at a time.
func TestMergedHeaderBounded(t *testing.T) {
	w := newWriter(t, Limits{MaxStepBytes: 2000})
	header := func(mut func(*pb.Episode)) *pb.AppendStepsRequest {
		ep := &pb.Episode{EpisodeId: "e", RolloutId: "r"}
		mut(ep)
		return &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}
	}
	big := string(make([]byte, 1500))
	first := msgs{header(func(ep *pb.Episode) { ep.Instruction = big })}
	if _, err := w.Append(context.Background(), &first); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msgs msgs
	}{
		{"over the stored header", msgs{header(func(ep *pb.Episode) { ep.SystemPrompt = big })}},
		{"over a header of the same stream", msgs{header(func(ep *pb.Episode) { ep.EpisodeId = "e2" }),
			header(func(ep *pb.Episode) { ep.EpisodeId, ep.Instruction = "e2", big }),
			header(func(ep *pb.Episode) { ep.EpisodeId, ep.SystemPrompt = "e2", big })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.msgs
			_, err := w.Append(context.Background(), &m)
			if fe, ok := asField(err); !ok || fe != "episode" {
				t.Errorf("got error %v, want a field error on episode", err)
			}
		})
	}
	ep, err := w.idx.GetEpisode(context.Background(), "e")
	if err != nil || ep.GetSystemPrompt() != "" {
		t.Errorf("stored header = %d-byte system prompt, %v; want the first header alone", len(ep.GetSystemPrompt()), err)
	}
}

// TestGroupCommitIsolatesBatches: batches of many streams commit in one
// transaction, and a batch that cannot commit (steps of an episode that a
// DeleteRollout removed after the stream sent its header) must fail its
// own stream only, not the other streams committed with it.
func TestGroupCommitIsolatesBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	idx, err := index.Open(ctx, filepath.Join(dir, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	files, err := blobstore.NewFiles(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	w := New(idx, files, Options{})
	// Both queued before the committer starts, so they commit as a group.
	orphan := &commitReq{done: make(chan struct{}), batch: &index.Batch{
		Steps: []index.StepRecord{{Step: &pb.Step{EpisodeId: "deleted", Index: 3}}}}}
	good := &commitReq{done: make(chan struct{}), batch: &index.Batch{
		Episodes: []index.EpisodeRecord{{Episode: &pb.Episode{EpisodeId: "kept", RolloutId: "r"}}},
		Steps:    []index.StepRecord{{Step: &pb.Step{EpisodeId: "kept", Index: 0}}}}}
	w.commits <- orphan
	w.commits <- good
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(runCtx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	<-orphan.done
	<-good.done
	if !errors.Is(orphan.err, index.ErrNotFound) {
		t.Errorf("batch of a deleted episode: error %v, want not found", orphan.err)
	}
	if good.err != nil || len(good.result.Duplicate) != 1 {
		t.Errorf("batch committed beside it: %+v, %v; want its one step stored", good.result, good.err)
	}
	if ep, err := idx.GetEpisode(ctx, "kept"); err != nil || ep.GetNumSteps() != 1 {
		t.Errorf("kept episode = %v, %v; want it stored with its step", ep, err)
	}
}
