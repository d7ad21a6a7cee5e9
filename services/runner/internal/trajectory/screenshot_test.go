package trajectory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// agentStep is a step as the agent records it: the screenshot shared by
// the observation and the image of the turn's user message.
func agentStep(index int32, shot []byte) *rmv1.Step {
	return &rmv1.Step{
		EpisodeId:   "e",
		Index:       index,
		Observation: &rmv1.Observation{Screenshot: &rmv1.BlobRef{MediaType: "image/png", Size: int64(len(shot)), Data: shot}},
		ModelCall: &rmv1.ModelCall{ResponseText: "click", NewMessages: []*rmv1.ChatMessage{
			{Role: "user", Content: []*rmv1.ContentPart{
				{Part: &rmv1.ContentPart_Text{Text: "Step 1"}},
				{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: shot, MediaType: "image/png", Detail: "high"}}},
			}},
			{Role: "assistant", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: "click"}}}},
		}},
	}
}

// screenshot is n KB of PNG-like bytes.
func screenshot(seed byte, n int) []byte {
	b := bytes.Repeat([]byte{seed, 1, 2, 3}, n<<8)
	return append([]byte("\x89PNG\r\n\x1a\n"), b...)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestScreenshotOnce: the step sent to storage carries the screenshot once,
// as the observation with its digest, and names it by digest in the
// message; the step the agent recorded (shared with its conversation) is
// left as it was. A step whose image is not the observation's (scaled for
// the model) goes as it is.
func TestScreenshotOnce(t *testing.T) {
	shot := screenshot(7, 1) // small: cmp.Diff compares bytes one by one
	st := agentStep(0, shot)
	before := proto.Clone(st)
	got := screenshotOnce(st)
	if d := cmp.Diff(before, st, protocmp.Transform()); d != "" {
		t.Errorf("the recorded step changed (-before +after):\n%s", d)
	}
	want := proto.Clone(st).(*rmv1.Step)
	want.Observation.Screenshot.Sha256 = digestOf(shot)
	want.ModelCall.NewMessages[0].Content[1] = &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{
		MediaType: "image/png", Detail: "high", Blob: &rmv1.BlobRef{Sha256: digestOf(shot), MediaType: "image/png", Size: int64(len(shot))}}}}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("step sent (-want +got):\n%s", d)
	}
	if &got.GetObservation().GetScreenshot().GetData()[0] != &shot[0] {
		t.Error("the screenshot's bytes were copied")
	}

	scaled := agentStep(1, shot)
	scaled.ModelCall.NewMessages[0].Content[1].GetImage().Data = screenshot(8, 1)
	if got := screenshotOnce(scaled); got != scaled {
		t.Errorf("a step whose image is not its screenshot was changed: %v", got)
	}
	none := &rmv1.Step{EpisodeId: "e", ModelCall: &rmv1.ModelCall{ResponseText: "x"}}
	if got := screenshotOnce(none); got != none {
		t.Errorf("a step without a screenshot was changed: %v", got)
	}
}

// realStorage starts the storage service in this process, on loopback
// gRPC, for the test's length, and returns a client of it.
func realStorage(t *testing.T) rmv1.StorageClient {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := storage.New(context.Background(), storage.Config{}, env)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(daemontest.Serve(t, env, svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return rmv1.NewStorageClient(cc)
}

// TestStreamerScreenshotOnceInStorage: against the real storage service,
// the steps go with each screenshot once and come back whole, every image
// resolving to the screenshot's bytes.
func TestStreamerScreenshotOnceInStorage(t *testing.T) {
	client := realStorage(t)
	s := NewStreamer(context.Background(), client, StreamerConfig{}, clock.Real{}, zaptest.NewLogger(t), &rmv1.Episode{EpisodeId: "e", RolloutId: "r"})
	shots := [][]byte{screenshot(1, 200), screenshot(2, 200)}
	for i, shot := range shots {
		s.Record(context.Background(), agent.StepRecord{Step: agentStep(int32(i), shot)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if acked, err := s.Close(ctx, &rmv1.Episode{EpisodeId: "e", RolloutId: "r", Status: rmv1.EpisodeStatus_EPISODE_STATUS_DONE}); err != nil || acked != 2 {
		t.Fatalf("Close = %d, %v; want 2 steps acked", acked, err)
	}
	got, err := client.GetEpisode(ctx, &rmv1.GetEpisodeRequest{EpisodeId: "e", IncludeSteps: true, InlineBlobs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetSteps()) != 2 {
		t.Fatalf("stored %d steps, want 2", len(got.GetSteps()))
	}
	for i, st := range got.GetSteps() {
		if d := st.GetObservation().GetScreenshot().GetData(); !bytes.Equal(d, shots[i]) {
			t.Errorf("step %d: stored screenshot of %d bytes, want the %d sent", i, len(d), len(shots[i]))
		}
		img := st.GetModelCall().GetNewMessages()[0].GetContent()[1].GetImage()
		if img.GetBlob().GetSha256() != digestOf(shots[i]) || !bytes.Equal(img.GetBlob().GetData(), shots[i]) {
			t.Errorf("step %d: stored image %s, want the screenshot %s", i, img.GetBlob().GetSha256(), digestOf(shots[i]))
		}
	}
}

// oldStorage answers as a storage from before references to content of
// the same message: a step naming a blob by hash only is refused.
type oldStorage struct {
	rmv1.UnimplementedStorageServer
	mu    sync.Mutex
	steps []*rmv1.Step // accepted
}

func (o *oldStorage) AppendSteps(stream grpc.ClientStreamingServer[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse]) error {
	resp := &rmv1.AppendStepsResponse{}
	for {
		m, err := stream.Recv()
		if err != nil {
			return stream.SendAndClose(resp)
		}
		st := m.GetStep()
		if st == nil {
			continue
		}
		for _, msg := range st.GetModelCall().GetNewMessages() {
			for _, p := range msg.GetContent() {
				if img := p.GetImage(); img != nil && len(img.GetData()) == 0 {
					return status.Errorf(codes.InvalidArgument, "step.model_call.new_messages[0].content[1].image.blob.sha256: blob %s is not stored; send its data", img.GetBlob().GetSha256())
				}
			}
		}
		o.mu.Lock()
		o.steps = append(o.steps, st)
		o.mu.Unlock()
		resp.Acked = append(resp.Acked, &rmv1.StepKey{EpisodeId: st.GetEpisodeId(), Index: st.GetIndex()})
	}
}

// TestStreamerFallsBackToInlineImages: a storage that refuses an image
// named by hash gets every step again with the image's bytes, and the
// episode is stored whole.
func TestStreamerFallsBackToInlineImages(t *testing.T) {
	old := &oldStorage{}
	cc := serveStorage(t, old)
	s := NewStreamer(context.Background(), rmv1.NewStorageClient(cc), StreamerConfig{}, &instantClock{}, zaptest.NewLogger(t), &rmv1.Episode{EpisodeId: "e"})
	for i := int32(0); i < 3; i++ {
		s.Record(context.Background(), agent.StepRecord{Step: agentStep(i, screenshot(byte(i), 200))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if acked, err := s.Close(ctx, &rmv1.Episode{EpisodeId: "e"}); err != nil || acked != 3 {
		t.Fatalf("Close = %d, %v; want 3 steps acked", acked, err)
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	var idx []int32
	for _, st := range old.steps {
		idx = append(idx, st.GetIndex())
		if img := st.GetModelCall().GetNewMessages()[0].GetContent()[1].GetImage(); !bytes.Equal(img.GetData(), screenshot(byte(st.GetIndex()), 200)) {
			t.Errorf("step %d: image sent without its bytes", st.GetIndex())
		}
	}
	if !slices.Equal(idx, []int32{0, 1, 2}) {
		t.Errorf("steps stored: %v, want [0 1 2]", idx)
	}
}

// populated returns m with every field set, so that a copy missing a field
// (one the API added after the copy was written) differs from it.
func populated[M proto.Message](m M) M {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsList() {
			l := r.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				l.AppendMutable()
			} else {
				l.Append(scalar(fd))
			}
			continue
		}
		if fd.Kind() == protoreflect.MessageKind {
			r.Mutable(fd)
			continue
		}
		r.Set(fd, scalar(fd))
	}
	return m
}

func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{1})
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(1.5)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(1.5)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(1)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(1)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(1)
	default:
		return protoreflect.ValueOfUint64(1)
	}
}

// TestCopiesNameEveryField: each top-level copy screenshotOnce makes
// carries every field of the message, including any the API gains later.
func TestCopiesNameEveryField(t *testing.T) {
	tests := []struct {
		name string
		m    proto.Message
		copy func(proto.Message) proto.Message
	}{
		{"Step", populated(&rmv1.Step{}), func(m proto.Message) proto.Message { return copyStep(m.(*rmv1.Step)) }},
		{"Observation", populated(&rmv1.Observation{}), func(m proto.Message) proto.Message { return copyObservation(m.(*rmv1.Observation)) }},
		{"BlobRef", populated(&rmv1.BlobRef{}), func(m proto.Message) proto.Message { return copyBlobRef(m.(*rmv1.BlobRef)) }},
		{"ModelCall", populated(&rmv1.ModelCall{}), func(m proto.Message) proto.Message { return copyModelCall(m.(*rmv1.ModelCall)) }},
		{"ChatMessage", populated(&rmv1.ChatMessage{}), func(m proto.Message) proto.Message { return copyChatMessage(m.(*rmv1.ChatMessage)) }},
		{"Image", populated(&rmv1.Image{}), func(m proto.Message) proto.Message { return copyImage(m.(*rmv1.Image)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.m, tc.copy(tc.m), protocmp.Transform()); d != "" {
				t.Errorf("copy%s lost fields (-original +copy):\n%s", tc.name, d)
			}
		})
	}
}

// countingClient counts the AppendSteps streams opened.
type countingClient struct {
	rmv1.StorageClient
	mu      sync.Mutex
	streams int
}

func (c *countingClient) AppendSteps(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], error) {
	c.mu.Lock()
	c.streams++
	c.mu.Unlock()
	return c.StorageClient.AppendSteps(ctx, opts...)
}

// TestStreamerCheckpoints: against the real storage service, a streamer
// whose unacknowledged steps pass CheckpointBytes closes the stream for
// storage's acknowledgement and lets go of those steps (the first step is
// collected before the episode ends), and the episode is stored whole.
// Without a checkpoint the streamer keeps every step until Close.
func TestStreamerCheckpoints(t *testing.T) {
	tests := []struct {
		name        string
		checkpoint  int
		maxRetained int
		wantStreams int
		wantFreed   bool
	}{
		{name: "every step", checkpoint: 1, wantStreams: 4, wantFreed: true},
		{name: "none before the end", checkpoint: 1 << 30, wantStreams: 1, wantFreed: false},
		// A retention bound below the checkpoint is the checkpoint: a
		// step let go of unacknowledged could not be resent after a
		// broken stream.
		{name: "retention bound below the checkpoint", checkpoint: 1 << 30, maxRetained: 1, wantStreams: 4, wantFreed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &countingClient{StorageClient: realStorage(t)}
			s := NewStreamer(context.Background(), client, StreamerConfig{CheckpointBytes: tt.checkpoint, MaxRetainedBytes: tt.maxRetained}, clock.Real{}, zaptest.NewLogger(t), &rmv1.Episode{EpisodeId: "e", RolloutId: "r"})
			freed := make(chan struct{})
			shots := make([][]byte, 3)
			for i := range shots {
				shots[i] = screenshot(byte(i+1), 100)
				st := agentStep(int32(i), bytes.Clone(shots[i]))
				if i == 0 {
					runtime.AddCleanup(st, func(ch chan struct{}) { close(ch) }, freed)
				}
				s.Record(context.Background(), agent.StepRecord{Step: st})
			}
			// The third step's checkpoint has closed the first step's stream
			// once that step can be collected; give it two seconds.
			got := false
			for deadline := time.Now().Add(2 * time.Second); !got && time.Now().Before(deadline); {
				runtime.GC()
				select {
				case <-freed:
					got = true
				case <-time.After(20 * time.Millisecond):
				}
			}
			if got != tt.wantFreed {
				t.Errorf("first step collected before Close: %v, want %v", got, tt.wantFreed)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if acked, err := s.Close(ctx, &rmv1.Episode{EpisodeId: "e", RolloutId: "r", Status: rmv1.EpisodeStatus_EPISODE_STATUS_DONE}); err != nil || acked != 3 {
				t.Fatalf("Close = %d, %v; want 3 steps acked", acked, err)
			}
			if client.streams != tt.wantStreams {
				t.Errorf("%d AppendSteps streams, want %d", client.streams, tt.wantStreams)
			}
			ep, err := client.GetEpisode(ctx, &rmv1.GetEpisodeRequest{EpisodeId: "e", IncludeSteps: true, InlineBlobs: true})
			if err != nil {
				t.Fatal(err)
			}
			if ep.GetEpisode().GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || len(ep.GetSteps()) != 3 {
				t.Fatalf("stored episode %s with %d steps, want DONE with 3", ep.GetEpisode().GetStatus(), len(ep.GetSteps()))
			}
			for i, st := range ep.GetSteps() {
				if !bytes.Equal(st.GetObservation().GetScreenshot().GetData(), shots[i]) {
					t.Errorf("step %d: stored screenshot differs from the one sent", i)
				}
			}
		})
	}
}
