// Package trajectory takes an episode's steps as they happen and keeps
// them: Streamer sends them to the storage service over AppendSteps without
// ever blocking the agent beyond a bounded buffer, and OSWorldWriter writes
// OSWorld's per-task results layout (traj.jsonl, step_N_<ts>.png,
// result.txt, recording.mp4).
package trajectory

import (
	"context"
	"fmt"
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
	// resend after a broken stream.
	MaxRetainedBytes int
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
		retained      []*rmv1.Step
		retainedBytes int
		stream        grpc.ClientStreamingClient[rmv1.AppendStepsRequest, rmv1.AppendStepsResponse]
		attempts      int
		err           error
	)
	open := func() error {
		for {
			if permanent(err) {
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
			for _, st := range retained {
				if err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Step{Step: st}}); err != nil {
					ok = false
					break
				}
			}
			if ok {
				return nil
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
		retained = append(retained, st)
		retainedBytes += proto.Size(st)
		for retainedBytes > s.cfg.MaxRetainedBytes && len(retained) > 1 {
			retainedBytes -= proto.Size(retained[0])
			retained = retained[1:]
		}
		for {
			if err = send(stream, &rmv1.AppendStepsRequest{Item: &rmv1.AppendStepsRequest_Step{Step: st}}); err == nil {
				break
			}
			if e := open(); e != nil {
				fail(e)
				return
			}
			break // open resent everything retained, st included
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
			s.mu.Lock()
			s.acked = len(resp.GetAcked())
			s.mu.Unlock()
			if s.acked < len(retained) && retainedBytes <= s.cfg.MaxRetainedBytes {
				s.mu.Lock()
				s.result = fmt.Errorf("storage acked %d of %d steps", s.acked, len(retained))
				s.mu.Unlock()
			}
			return
		}
		if e := open(); e != nil {
			fail(e)
			return
		}
	}
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
