package trajectory

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
)

// TestStreamerNeverBlocks: with storage unreachable (a real refused
// connection) and a buffer of 2, recording many steps returns at once and
// Close reports the failure.
func TestStreamerNeverBlocks(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s := NewStreamer(context.Background(), rmv1.NewStorageClient(cc), StreamerConfig{Buffer: 2, Attempts: 2}, clock.Real{}, zaptest.NewLogger(t), &rmv1.Episode{EpisodeId: "e"})
	start := time.Now()
	for i := 0; i < 200; i++ {
		s.Record(context.Background(), agent.StepRecord{Step: &rmv1.Step{EpisodeId: "e", Index: int32(i)}})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Record blocked for %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Close(ctx, &rmv1.Episode{EpisodeId: "e"}); err == nil {
		t.Error("Close reported success with storage unreachable")
	}
}

func TestOSWorldWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	w, err := NewOSWorldWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w.Record(context.Background(), agent.StepRecord{
		Step:    &rmv1.Step{ModelCall: &rmv1.ModelCall{ResponseText: "r"}, Results: []*rmv1.ActionResult{{Ok: true}}},
		Actions: []action.Action{{Type: action.TypeCode, Code: "pyautogui.click()"}}, After: []byte("png"), Time: at,
	})
	w.Record(context.Background(), agent.StepRecord{Step: &rmv1.Step{Error: "parse error: x"}, Time: at})
	w.Record(context.Background(), agent.StepRecord{Step: &rmv1.Step{Done: true}, Actions: []action.Action{{Type: action.TypeDone}}, Time: at})
	if err := w.Finish(0.5, true, "", []byte("mp4")); err != nil {
		t.Fatal(err)
	}
	traj, _ := os.ReadFile(filepath.Join(dir, "traj.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(traj)), "\n")
	want := []string{
		`{"action":"pyautogui.click()","action_timestamp":"20260102@030405","done":false,"info":{"ok":true},"response":"r","reward":0,"screenshot_file":"step_1_20260102@030405.png","step_num":1}`,
		`{"Error":"parse error: x","action_timestamp":"20260102@030405","response":"","step_num":2}`,
		`{"action":"DONE","action_timestamp":"20260102@030405","done":true,"info":{"done":true},"response":"","reward":0,"screenshot_file":"","step_num":3}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("traj.jsonl:\n%s", traj)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d = %s\nwant      %s", i+1, lines[i], want[i])
		}
	}
	for name, content := range map[string]string{"result.txt": "0.5\n", "recording.mp4": "mp4", "step_1_20260102@030405.png": "png"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != content {
			t.Errorf("%s = %q, %v; want %q", name, b, err, content)
		}
	}

	// conversation.json: images as a note of their size, whether the agent
	// still holds their bytes or kept only the size (older than its window).
	image := func(img *rmv1.Image) *rmv1.ContentPart {
		return &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: img}}
	}
	conv := []*rmv1.ChatMessage{
		{Role: "user", Content: []*rmv1.ContentPart{
			{Part: &rmv1.ContentPart_Text{Text: "old"}},
			image(&rmv1.Image{MediaType: "image/png", Blob: &rmv1.BlobRef{MediaType: "image/png", Size: 209000}}),
		}},
		{Role: "user", Content: []*rmv1.ContentPart{image(&rmv1.Image{MediaType: "image/jpeg", Data: []byte("jpeg")})}},
	}
	if err := w.WriteConversation(conv); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "conversation.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("conversation.json: %v\n%s", err, b)
	}
	if len(got) != 2 || len(got[0].Content) != 2 || got[0].Content[1]["bytes"] != 209000.0 || got[1].Content[0]["bytes"] != 4.0 {
		t.Errorf("conversation.json images, want sizes 209000 and 4:\n%s", b)
	}
}

// serveStorage serves impl as the storage service on loopback, for the
// test's length, and returns a connection to it.
func serveStorage(t *testing.T, impl rmv1.StorageServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rmv1.RegisterStorageServer(srv, impl)
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// streamThree streams an episode of three steps through a new streamer
// and wants all three acknowledged.
func streamThree(t *testing.T, client appendClient, cfg StreamerConfig, clk clock.Clock) {
	t.Helper()
	s := NewStreamer(context.Background(), client, cfg, clk, zaptest.NewLogger(t), &rmv1.Episode{EpisodeId: "e"})
	for i := 0; i < 3; i++ {
		s.Record(context.Background(), agent.StepRecord{Step: &rmv1.Step{EpisodeId: "e", Index: int32(i)}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked, err := s.Close(ctx, &rmv1.Episode{EpisodeId: "e", Status: rmv1.EpisodeStatus_EPISODE_STATUS_DONE})
	if err != nil || acked != 3 {
		t.Fatalf("Close = %d, %v; want 3 steps acked", acked, err)
	}
}

// ackServer acknowledges every step it receives.
type ackServer struct {
	rmv1.UnimplementedStorageServer
}

func (ackServer) AppendSteps(stream grpc.ClientStreamingServer[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse]) error {
	resp := &rmv1.AppendStepsResponse{}
	for {
		m, err := stream.Recv()
		if err != nil {
			return stream.SendAndClose(resp)
		}
		if st := m.GetStep(); st != nil {
			resp.Acked = append(resp.Acked, &rmv1.StepKey{EpisodeId: st.GetEpisodeId(), Index: st.GetIndex()})
		}
	}
}

// downClient is storage that is down for its first `down` calls, as while
// the storage service restarts.
type downClient struct {
	rmv1.StorageClient
	down, calls int
}

func (c *downClient) AppendSteps(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], error) {
	c.calls++
	if c.calls <= c.down {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}
	return c.StorageClient.AppendSteps(ctx, opts...)
}

// instantClock fires every timer at once and adds up the time slept.
type instantClock struct{ slept time.Duration }

func (c *instantClock) Now() time.Time { return time.Now() }

func (c *instantClock) After(d time.Duration) <-chan time.Time {
	c.slept += d
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// TestStreamerRidesOutStorageRestart: storage down for longer than a
// restart takes (a SIGKILLed storage container is back in a few seconds) must
// not lose the episode: the streamer keeps retrying and then delivers it.
// It used to give up after 4 attempts (3s), so the runner reported the
// episode DONE while storage never got it (found by the compose chaos test).
func TestStreamerRidesOutStorageRestart(t *testing.T) {
	cc := serveStorage(t, ackServer{})
	client := &downClient{StorageClient: rmv1.NewStorageClient(cc), down: 10}
	clk := &instantClock{}
	streamThree(t, client, StreamerConfig{}, clk)
	if clk.slept < 20*time.Second {
		t.Errorf("backed off %s in all, want at least 20s to ride out a restart", clk.slept)
	}
}

// failFirstClose is storage whose first stream fails at its end, as when
// storage dies while committing: nothing of that stream is acknowledged.
type failFirstClose struct {
	rmv1.StorageClient
	mu     sync.Mutex
	closes int
}

type failingCloseStream struct {
	grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse]
	c *failFirstClose
}

func (c *failFirstClose) AppendSteps(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], error) {
	st, err := c.StorageClient.AppendSteps(ctx, opts...)
	if err != nil {
		return nil, err
	}
	return &failingCloseStream{ClientStreamingClient: st, c: c}, nil
}

func (s *failingCloseStream) CloseAndRecv() (*rmv1.AppendStepsResponse, error) {
	s.c.mu.Lock()
	s.c.closes++
	first := s.c.closes == 1
	s.c.mu.Unlock()
	if first {
		return nil, status.Error(codes.Unavailable, "storage went away")
	}
	return s.ClientStreamingClient.CloseAndRecv()
}

// TestStreamerCheckpointRetriesABrokenClose: a stream that breaks at a
// checkpoint is reopened with the steps it carried, and none is lost or
// counted twice.
func TestStreamerCheckpointRetriesABrokenClose(t *testing.T) {
	cc := serveStorage(t, ackServer{})
	client := &failFirstClose{StorageClient: rmv1.NewStorageClient(cc)}
	streamThree(t, client, StreamerConfig{CheckpointBytes: 1}, &instantClock{})
	// One close per step's checkpoint, the broken one again, and the end.
	if client.closes != 5 {
		t.Errorf("%d stream ends, want 5", client.closes)
	}
}
