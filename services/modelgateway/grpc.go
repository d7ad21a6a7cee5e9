package modelgateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/breaker"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/launch"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// errBadAnswer marks a backend answer the gateway could not read.
var errBadAnswer = errors.New("unreadable backend answer")

// errCodes is the one table from domain errors to gRPC codes.
var errCodes = []struct {
	err  error
	code codes.Code
}{
	{gateway.ErrUnknownModel, codes.NotFound},
	{gateway.ErrStaleVersion, codes.FailedPrecondition},
	{gateway.ErrUpdateFailed, codes.Unavailable},
	{gateway.ErrNoneRunning, codes.Unavailable},
	{gateway.ErrNoBackend, codes.Unavailable},
	{errBadAnswer, codes.Unavailable},
}

// toStatus translates an error at the gRPC boundary: context errors and
// existing statuses pass through, known errors by the table, a backend's
// final HTTP answer by its class; anything else becomes Internal without
// its text, which is logged under a reference the client sees.
func (s *Service) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	var ire *imageRefError
	if errors.As(err, &ire) {
		return ire.status()
	}
	var se *gateway.StatusError
	if errors.As(err, &se) {
		switch {
		case se.Code == http.StatusTooManyRequests:
			return status.Errorf(codes.ResourceExhausted, "backend %s is overloaded: %s", se.Backend, backendMessage(se.Body))
		case se.Code >= 500 || se.Code == http.StatusRequestTimeout:
			return status.Errorf(codes.Unavailable, "backend %s failed with status %d: %s", se.Backend, se.Code, backendMessage(se.Body))
		case se.Code == http.StatusBadRequest || se.Code == http.StatusUnprocessableEntity:
			// Usually the prompt: too long for the context, bad tool
			// schema. Another backend would refuse it too.
			return status.Errorf(codes.InvalidArgument, "backend %s rejected the request: %s", se.Backend, backendMessage(se.Body))
		}
		return status.Errorf(codes.FailedPrecondition, "backend %s answered status %d: %s", se.Backend, se.Code, backendMessage(se.Body))
	}
	for _, e := range errCodes {
		if errors.Is(err, e.err) {
			return status.Error(e.code, truncate(err.Error(), maxStatusMessage))
		}
	}
	sum := sha256.Sum256([]byte(err.Error()))
	ref := hex.EncodeToString(sum[:4])
	s.log.Error("internal error", zap.String("ref", ref), zap.Error(err))
	return status.Errorf(codes.Internal, "internal error (ref %s)", ref)
}

// maxStatusMessage bounds the message of a status the gateway makes: it may
// hold a backend's words, which are not the caller's to read by the
// kilobyte.
const maxStatusMessage = 1024

// backendMessage extracts the message of an OpenAI error envelope, bounded.
func backendMessage(body []byte) string {
	var eb openaiapi.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Message != "" {
		return truncate(eb.Error.Message, 512)
	}
	return truncate(string(bytes.TrimSpace(body)), 512)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Chat runs one chat completion.
func (s *Service) Chat(ctx context.Context, req *rmv1.ChatRequest) (*rmv1.ChatResponse, error) {
	resp, err := s.chat(ctx, req)
	return resp, s.toStatus(err)
}

func (s *Service) chat(ctx context.Context, req *rmv1.ChatRequest) (*rmv1.ChatResponse, error) {
	var p chatPrep
	if err := s.prepareChat(req, &p); err != nil {
		return nil, err
	}
	defer p.release()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.limits.RequestTimeout)
		defer cancel()
	}
	var a gateway.Attempts
	return s.sendChat(ctx, p.request(req), &a, &p)
}

// chatPrep is a Chat request made ready for the backends.
type chatPrep struct {
	start   time.Time
	model   string
	digests []string
	// body is the backend's JSON body, in buf, a buffer of the process's
	// pool; openAIBody makes the body for backends of kind openai.
	body       []byte
	buf        *[]byte
	openAIBody func() ([]byte, error)
}

// prepareChat resolves a validated request's model and images and writes
// its body into p; p.release gives the body's buffer back.
func (s *Service) prepareChat(req *rmv1.ChatRequest, p *chatPrep) error {
	p.start = time.Now()
	model, err := s.g.ResolveModel(req.GetModel())
	if err != nil {
		return err
	}
	digests, release, err := s.resolveImages(req)
	if err != nil {
		return err
	}
	// The body's buffer comes from the process's buffer pool, which
	// serverkit/grpcserver makes one with a class at every power of two
	// that does not clear what it hands out. Once the backend's answer is
	// closed nothing holds the body: fasthttp lets go of it when it
	// releases its request, and the event loop's client once it has
	// written it.
	pool := mem.DefaultBufferPool()
	buf := pool.Get(bodySize(req, model))
	body, err := appendChatBody((*buf)[:0], req, model, false)
	// A second body only for a backend of kind openai, which refuses
	// vLLM's extra fields, and only when the request goes to one; made
	// now, while cached images are pinned, when the request named any.
	openAIBody := func() ([]byte, error) { return chatBody(req, model, true) }
	if release != nil && err == nil && s.anyOpenAI {
		b, oerr := openAIBody()
		openAIBody = func() ([]byte, error) { return b, oerr }
	}
	// Cached images are pinned only while the bodies are written: the
	// oldest images in the cache are the ones most often named, and a
	// pin held for a whole generation would keep new images out.
	if release != nil {
		release()
	}
	if err != nil {
		pool.Put(buf)
		return err
	}
	p.model, p.digests, p.body, p.buf, p.openAIBody = model, digests, body, buf, openAIBody
	return nil
}

// request is the gateway's request for req, prepared as p.
func (p *chatPrep) request(req *rmv1.ChatRequest) *gateway.Request {
	return &gateway.Request{Model: p.model, RoutingKey: req.GetRoutingKey(), Body: p.body, OpenAIBody: p.openAIBody}
}

// release gives the body's buffer back to the pool; later calls do
// nothing.
func (p *chatPrep) release() {
	if p.buf != nil {
		*p.buf = p.body[:0]
		mem.DefaultBufferPool().Put(p.buf)
		p.buf, p.body = nil, nil
	}
}

// sendChat makes the attempts of r after those a records (none: all of
// them), within ctx, and reads the answer.
func (s *Service) sendChat(ctx context.Context, r *gateway.Request, a *gateway.Attempts, p *chatPrep) (*rmv1.ChatResponse, error) {
	resp, err := s.g.Resume(ctx, r, a)
	if err != nil {
		return nil, err
	}
	raw, err := gateway.ReadAnswer(resp, s.limits.MaxResponseBytes)
	if err != nil && ctx.Err() != nil {
		resp.FinishCanceled()
		return nil, ctx.Err()
	}
	if err != nil {
		resp.Finish(false, err.Error())
		return nil, fmt.Errorf("%w from %s: %v", errBadAnswer, resp.Backend.ID(), err)
	}
	return s.chatDone(resp, resp.StatusCode, raw, p)
}

// chatDone makes the answer of a backend's answer (code, raw: its status
// and body) and ends resp.
func (s *Service) chatDone(resp *gateway.Response, code int, raw []byte, p *chatPrep) (*rmv1.ChatResponse, error) {
	if code/100 != 2 {
		se := &gateway.StatusError{Backend: resp.Backend.ID(), Code: code, Body: bytes.Clone(raw)}
		resp.Finish(true, "") // the backend works; the request was refused
		return nil, se
	}
	// raw is the backend's buffer until Finish; the answer copies what it
	// keeps.
	out, err := chatAnswer(raw)
	if err != nil {
		resp.Finish(false, "decode answer: "+err.Error())
		return nil, fmt.Errorf("%w from %s: %v", errBadAnswer, resp.Backend.ID(), err)
	}
	changed := resp.Finish(true, "")
	latency := time.Since(p.start)
	out.Backend = resp.Backend.ID()
	out.ModelVersion = resp.Backend.Version()
	out.VersionChanged = changed
	out.Latency = durationpb.New(latency)
	out.TimeToFirstToken = durationpb.New(latency)
	out.Attempts = int32(resp.Attempts)
	out.ImageSha256 = p.digests
	s.front.Latency.Observe(latency.Seconds())
	s.front.TTFT.Observe(latency.Seconds())
	if u := out.GetUsage(); u != nil {
		s.g.CountTokens(resp.Backend, int64(u.GetPromptTokens()), int64(u.GetCompletionTokens()))
	}
	return out, nil
}

// ListBackends shows each backend's state.
func (s *Service) ListBackends(context.Context, *rmv1.ListBackendsRequest) (*rmv1.ListBackendsResponse, error) {
	pins := s.g.PinCounts()
	out := &rmv1.ListBackendsResponse{ModelVersion: s.g.Version(), RoutingPolicy: s.g.PolicyName()}
	for _, b := range s.g.Backends() {
		sn := b.Snapshot()
		pb := &rmv1.Backend{
			Id: sn.ID, BaseUrl: sn.BaseURL, Kind: sn.Kind, Model: sn.Model, Healthy: sn.Healthy,
			Breaker: breakerState(sn.Breaker), InFlight: int32(sn.InFlight), MaxConcurrent: int32(sn.MaxConcurrent),
			Weight: sn.Weight, ModelVersion: sn.Version, Updating: sn.Updating,
			LatencyP50: durationpb.New(sn.LatencyP50), Requests: sn.Requests, Failures: sn.Failures,
			LastError: sn.LastError, PinnedKeys: int32(pins[sn.ID]),
		}
		if st := sn.Replica; st.State != "" {
			pb.Replica = &rmv1.Replica{
				State: string(st.State), Detail: truncate(st.Detail, 4096), Pid: int32(st.PID),
				Port: int32(st.Port), Restarts: int32(st.Restarts), LogFile: st.LogPath,
			}
			if st.State != launch.Ready && pb.LastError == "" {
				// Clients that predate the replica field still see why
				// the backend gets no traffic.
				pb.LastError = replicaText(st)
			}
		}
		out.Backends = append(out.Backends, pb)
	}
	if s.watcher != nil {
		out.CheckpointLoaded, out.CheckpointError = s.watcher.Status()
	}
	return out, nil
}

// replicaText describes a launched replica that is not serving.
func replicaText(st launch.Status) string {
	t := fmt.Sprintf("replica %s (pid %d, port %d, %d restarts, log %s)", st.State, st.PID, st.Port, st.Restarts, st.LogPath)
	if st.Detail != "" {
		t += ": " + st.Detail
	}
	return truncate(t, 4096)
}

func breakerState(st breaker.State) rmv1.BreakerState {
	switch st {
	case breaker.Closed:
		return rmv1.BreakerState_BREAKER_STATE_CLOSED
	case breaker.Open:
		return rmv1.BreakerState_BREAKER_STATE_OPEN
	case breaker.HalfOpen:
		return rmv1.BreakerState_BREAKER_STATE_HALF_OPEN
	}
	return rmv1.BreakerState_BREAKER_STATE_UNSPECIFIED
}

// UpdateWeights moves the backends to a new weight version.
func (s *Service) UpdateWeights(ctx context.Context, req *rmv1.UpdateWeightsRequest) (*rmv1.UpdateWeightsResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		// A backend that takes the call and never answers must not hold
		// the update, and every later one, for ever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.limits.RequestTimeout)
		defer cancel()
	}
	res, err := s.updateWeights(ctx, gateway.UpdateOptions{
		Version: req.GetVersion(), Source: req.GetSource(),
		Rolling: req.GetStrategy() == rmv1.UpdateStrategy_UPDATE_STRATEGY_ROLLING,
		Abort:   req.GetAbortInFlight(),
	})
	if err != nil && res == nil {
		return nil, s.toStatus(err)
	}
	out := &rmv1.UpdateWeightsResponse{Version: s.g.Version(), PreviousVersion: res.Previous}
	for _, b := range res.Backends {
		bu := &rmv1.BackendUpdate{Backend: b.Backend, Ok: b.Err == nil, Duration: durationpb.New(b.Duration)}
		if b.Err != nil {
			bu.Error = b.Err.Error()
		}
		out.Backends = append(out.Backends, bu)
	}
	if err != nil {
		// Every backend failed: report it as an error whose message
		// names each backend's failure.
		msg := err.Error()
		for _, b := range out.Backends {
			msg += "; " + b.Backend + ": " + truncate(b.Error, 200)
		}
		return nil, status.Error(codes.Unavailable, truncate(msg, maxStatusMessage))
	}
	out.UpdateTime = timestamppb.New(res.At)
	return out, nil
}
