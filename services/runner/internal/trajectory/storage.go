// Package trajectory takes an episode's steps as they happen and keeps
// them: Streamer sends them to the storage service over AppendSteps without
// ever blocking the agent beyond a bounded buffer, and OSWorldWriter writes
// OSWorld's per-task results layout (traj.jsonl, step_N_<ts>.png,
// result.txt, recording.mp4).
package trajectory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
)

// appendClient is the part of the storage client the streamer uses;
// rolloutmeshv1.StorageClient implements it.
type appendClient interface {
	AppendSteps(ctx context.Context, opts ...grpc.CallOption) (grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], error)
}

// StreamerConfig bounds a streamer.
type StreamerConfig struct {
	// Buffer is how many steps may wait to be sent; when it is full, further
	// steps are dropped (and counted) rather than making the agent wait.
	Buffer int
	// MaxRetainedBytes bounds the sent-but-unacknowledged steps kept for a
	// resend after a broken stream (default 256 MiB): the streamer
	// checkpoints (see CheckpointBytes) at the smaller of the two, so no
	// step is let go of before storage acknowledged it. One step larger
	// than the bound is kept whole.
	MaxRetainedBytes int
	// CheckpointBytes: once the sent-but-unacknowledged steps reach this
	// size (default 16 MiB of encoded steps, in which a screenshot that is
	// both observation and image counts twice), the streamer closes the
	// stream for storage's acknowledgement and goes on in a new one.
	// Storage acknowledges only at a stream's end, so without it an episode
	// in flight kept every step it recorded, screenshots included, until it
	// ended: about 100 MB for 50 steps of 1080p screenshots, per episode a
	// runner runs.
	CheckpointBytes int
	// Attempts is how often a broken stream is reopened (default 20, with a
	// backoff growing by 500ms up to maxBackoff: about 50s in all, enough to
	// ride out a storage restart).
	Attempts int
	// CallTimeout bounds the whole stream of one episode.
	CallTimeout time.Duration
}

// maxBackoff caps the wait between two attempts to reopen the stream.
const maxBackoff = 3 * time.Second

// Streamer streams one episode to storage. Record never blocks; Close sends
// the final episode header and waits (bounded) for the acknowledgement.
type Streamer struct {
	client appendClient
	cfg    StreamerConfig
	clk    clock.Clock
	log    *zap.Logger

	queue chan *rmv1.Step
	done  chan struct{}

	mu      sync.Mutex
	header  *rmv1.Episode
	dropped int
	final   *rmv1.Episode
	result  error
	acked   int

	// inline is set once storage refused a step whose image names the
	// step's screenshot by hash (a storage from before such references):
	// from then on every step goes with its images' bytes.
	inline bool
}

// outgoing is a step as recorded (full) and as sent while storage takes
// references to content of the same message (small).
type outgoing struct {
	full, small *rmv1.Step
	size        int
}

func (o outgoing) step(inline bool) *rmv1.Step {
	if inline {
		return o.full
	}
	return o.small
}

// NewStreamer starts streaming the episode described by header (status
// RUNNING) to storage. The goroutine it starts ends with Close.
func NewStreamer(ctx context.Context, c appendClient, cfg StreamerConfig, clk clock.Clock, log *zap.Logger, header *rmv1.Episode) *Streamer {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 64
	}
	if cfg.MaxRetainedBytes <= 0 {
		cfg.MaxRetainedBytes = 256 << 20
	}
	if cfg.CheckpointBytes <= 0 {
		cfg.CheckpointBytes = 16 << 20
	}
	// A step let go of before storage acknowledged it could not be resent
	// after a broken stream: the bound on retention is a checkpoint.
	cfg.CheckpointBytes = min(cfg.CheckpointBytes, cfg.MaxRetainedBytes)
	if cfg.Attempts <= 0 {
		cfg.Attempts = 20
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Hour
	}
	s := &Streamer{
		client: c, cfg: cfg, clk: clk, log: log,
		queue:  make(chan *rmv1.Step, cfg.Buffer),
		done:   make(chan struct{}),
		header: proto.Clone(header).(*rmv1.Episode),
	}
	go s.run(context.WithoutCancel(ctx))
	return s
}

var _ agent.StepSink = (*Streamer)(nil)

// Record queues a step; when the buffer is full the step is dropped.
func (s *Streamer) Record(_ context.Context, r agent.StepRecord) {
	select {
	case s.queue <- r.Step:
	default:
		s.mu.Lock()
		s.dropped++
		s.mu.Unlock()
		s.log.Warn("storage buffer full, step dropped", zap.Int32("step", r.Step.GetIndex()))
	}
}

// Close sends the final episode header, closes the stream and waits up to
// ctx for storage to acknowledge. It returns how many steps were acked.
func (s *Streamer) Close(ctx context.Context, final *rmv1.Episode) (int, error) {
	s.mu.Lock()
	s.final = proto.Clone(final).(*rmv1.Episode)
	s.mu.Unlock()
	close(s.queue)
	select {
	case <-s.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("storage: %w", ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result == nil && s.dropped > 0 {
		return s.acked, fmt.Errorf("storage: %d steps dropped (buffer full)", s.dropped)
	}
	return s.acked, s.result
}

// run drains the queue into the stream, reopening it (and resending what
// was not acknowledged) when it breaks. Appends are idempotent on
// (episode_id, index), so a resend never duplicates.
func (s *Streamer) run(ctx context.Context) {
	defer close(s.done)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	var (
		retained      []outgoing
		retainedBytes int
		stream        grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse]
		attempts      int
		err           error
		ackedBefore   int // by the streams checkpoint closed
	)
	open := func() error {
		for {
			if !s.inline && refusedReference(err) {
				// Not a permanent refusal: an older storage, which wants
				// the bytes of every image. Resend everything with them.
				s.log.Info("storage resolves no references to a step's own screenshot; sending images inline")
				s.inline = true
			} else if permanent(err) {
				return fmt.Errorf("storage refused the episode: %w", err)
			}
			if attempts >= s.cfg.Attempts {
				return fmt.Errorf("storage: gave up after %d attempts: %w", attempts, err)
			}
			if attempts > 0 {
				if serr := clock.Sleep(ctx, s.clk, min(time.Duration(attempts)*500*time.Millisecond, maxBackoff)); serr != nil {
					return serr
				}
			}
			attempts++
			stream, err = s.client.AppendSteps(ctx)
			if err != nil {
				continue
			}
			if err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Episode{Episode: s.header}}); err != nil {
				continue
			}
			ok := true
			for _, o := range retained {
				if err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Step{Step: o.step(s.inline)}}); err != nil {
					ok = false
					break
				}
			}
			if ok {
				return nil
			}
		}
	}
	// acks records what storage acknowledged of the retained steps at a
	// stream's end.
	acks := func(resp *rmv1.AppendStepsResponse) {
		n := len(resp.GetAcked())
		s.mu.Lock()
		defer s.mu.Unlock()
		s.acked = ackedBefore + n
		if n < len(retained) && s.result == nil {
			s.result = fmt.Errorf("storage acked %d of %d steps", s.acked, ackedBefore+len(retained))
		}
	}
	// checkpoint ends the stream for storage's acknowledgement of what it
	// carried, lets go of those steps and opens a new stream.
	checkpoint := func() error {
		for {
			var resp *rmv1.AppendStepsResponse
			if resp, err = stream.CloseAndRecv(); err == nil {
				acks(resp)
				ackedBefore += len(resp.GetAcked())
				retained, retainedBytes = nil, 0
				attempts = 0 // the reopen budget is per stream
				return open()
			}
			if e := open(); e != nil {
				return e
			}
		}
	}
	fail := func(e error) {
		s.mu.Lock()
		s.result = e
		s.mu.Unlock()
		s.log.Warn("storage stream failed", zap.Error(e))
		for range s.queue { // keep Record from ever blocking: drain until Close
		}
	}
	if e := open(); e != nil {
		fail(e)
		return
	}
	for st := range s.queue {
		o := outgoing{full: st, small: screenshotOnce(st)}
		o.size = proto.Size(o.full)
		retained = append(retained, o)
		retainedBytes += o.size
		if err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Step{Step: o.step(s.inline)}}); err != nil {
			// open resends everything retained, st included.
			if e := open(); e != nil {
				fail(e)
				return
			}
		}
		if retainedBytes >= s.cfg.CheckpointBytes {
			if e := checkpoint(); e != nil {
				fail(e)
				return
			}
		}
	}
	s.mu.Lock()
	final := s.final
	s.mu.Unlock()
	for {
		var resp *rmv1.AppendStepsResponse
		if final != nil {
			err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Episode{Episode: final}})
		}
		if err == nil {
			resp, err = stream.CloseAndRecv()
		}
		if err == nil {
			acks(resp)
			return
		}
		if e := open(); e != nil {
			fail(e)
			return
		}
	}
}

// screenshotOnce returns the step as sent to storage: its screenshot
// carried once. The agent puts each screenshot into its step twice, as the
// observation and as the image of the turn's new user message (the same
// bytes). Storage resolves a reference by hash to content another blob of
// the same message carries, so the image goes as a reference: about 200 KB
// less per step to marshal and send, and for storage to receive, parse and
// compare. The hash costs the runner what storage no longer spends on the
// second copy; storage still hashes the bytes it gets and refuses a digest
// they do not match. The step and its messages are shared with the agent's
// conversation and the other sinks, so what changes is copied.
func screenshotOnce(st *rmv1.Step) *rmv1.Step {
	shot := st.GetObservation().GetScreenshot()
	data := shot.GetData()
	if len(data) == 0 {
		return st
	}
	var (
		out    *rmv1.Step
		digest string
	)
	for i, m := range st.GetModelCall().GetNewMessages() {
		var content []*rmv1.ContentPart
		for j, p := range m.GetContent() {
			img := p.GetImage()
			if img == nil || !sameBytes(img.GetData(), data) {
				continue
			}
			if out == nil {
				// The agent passes the digest it took for the gateway's
				// image cache; storage checks it against the bytes.
				if digest = shot.GetSha256(); digest == "" {
					sum := sha256.Sum256(data)
					digest = hex.EncodeToString(sum[:])
				}
				out = copyStep(st)
				out.Observation = copyObservation(st.GetObservation())
				out.Observation.Screenshot = copyBlobRef(shot)
				out.Observation.Screenshot.Sha256 = digest
				out.ModelCall = copyModelCall(st.GetModelCall())
				out.ModelCall.NewMessages = slices.Clone(st.GetModelCall().GetNewMessages())
			}
			if content == nil {
				content = slices.Clone(m.GetContent())
			}
			ref := copyImage(img)
			ref.Data = nil
			ref.Blob = &rmv1.BlobRef{Sha256: digest, MediaType: img.GetMediaType(), Size: int64(len(data))}
			content[j] = &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: ref}}
		}
		if content != nil {
			nm := copyChatMessage(m)
			nm.Content = content
			out.ModelCall.NewMessages[i] = nm
		}
	}
	if out == nil {
		return st
	}
	return out
}

// sameBytes reports whether a and b hold the same bytes; the agent shares
// one slice between the observation and the image, so the comparison
// usually ends at the pointers.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0] || bytes.Equal(a, b)
}

// The copy functions below copy a message's top level: sub-messages, lists
// and bytes are shared with the original, so only top-level fields of the
// copy may be replaced. They name every field (TestCopiesNameEveryField
// fails when the API adds one): protoreflect's Range and Set would do it
// generically at a twentieth of the streamer's CPU.

func copyStep(m *rmv1.Step) *rmv1.Step {
	return &rmv1.Step{EpisodeId: m.EpisodeId, Index: m.Index, Observation: m.Observation, ModelCall: m.ModelCall,
		Actions: m.Actions, Results: m.Results, Reward: m.Reward, Done: m.Done, Error: m.Error,
		StartTime: m.StartTime, EndTime: m.EndTime, Retry: m.Retry}
}

func copyObservation(m *rmv1.Observation) *rmv1.Observation {
	return &rmv1.Observation{Screenshot: m.Screenshot, AccessibilityTree: m.AccessibilityTree, Terminal: m.Terminal, Text: m.Text}
}

func copyBlobRef(m *rmv1.BlobRef) *rmv1.BlobRef {
	return &rmv1.BlobRef{Sha256: m.Sha256, MediaType: m.MediaType, Size: m.Size, Data: m.Data}
}

func copyModelCall(m *rmv1.ModelCall) *rmv1.ModelCall {
	return &rmv1.ModelCall{RequestSummary: m.RequestSummary, NewMessages: m.NewMessages, ResponseText: m.ResponseText,
		ToolCalls: m.ToolCalls, PromptTokenIds: m.PromptTokenIds, CompletionTokenIds: m.CompletionTokenIds,
		Logprobs: m.Logprobs, ModelVersion: m.ModelVersion, Backend: m.Backend, Latency: m.Latency,
		TimeToFirstToken: m.TimeToFirstToken, FinishReason: m.FinishReason, Usage: m.Usage, Model: m.Model,
		VersionChanged: m.VersionChanged}
}

func copyChatMessage(m *rmv1.ChatMessage) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallId: m.ToolCallId,
		Name: m.Name, Reasoning: m.Reasoning}
}

func copyImage(m *rmv1.Image) *rmv1.Image {
	return &rmv1.Image{Data: m.Data, MediaType: m.MediaType, Url: m.Url, Detail: m.Detail, Blob: m.Blob}
}

// refusedReference reports storage's refusal of a blob named by hash that
// it has not stored: what a storage from before references to content of
// the same message answers to screenshotOnce's steps.
func refusedReference(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.InvalidArgument && strings.Contains(st.Message(), "is not stored; send its data")
}

// permanent reports errors a resend cannot fix.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.Unimplemented:
		return true
	}
	return false
}

// send sends one message; when the stream is already broken it returns the
// server's status (Send itself only says io.EOF).
func send(stream grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse], m *rmv1.AppendStepsRequest) error {
	err := stream.Send(m)
	if err == nil {
		return nil
	}
	if _, rerr := stream.CloseAndRecv(); rerr != nil {
		return rerr
	}
	return err
}
