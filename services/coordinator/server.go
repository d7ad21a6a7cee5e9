package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/dispatch"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/scheduler"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/state"
)

// Bounds on GetBatch.
const (
	maxBatchSize    = 100_000
	maxBatchTimeout = time.Hour
	maxAckTimeout   = 24 * time.Hour
	gatewayTimeout  = 10 * time.Minute
	storageTimeout  = 30 * time.Second
)

// codeOf is the one table translating the coordinator's errors into gRPC
// codes.
var codeOf = map[error]codes.Code{
	scheduler.ErrNotFound:      codes.NotFound,
	scheduler.ErrExists:        codes.AlreadyExists,
	scheduler.ErrFailedPrecond: codes.FailedPrecondition,
	scheduler.ErrUnavailable:   codes.Unavailable,
	errNoDependency:            codes.FailedPrecondition,
	state.ErrClosed:            codes.Unavailable,
}

// toStatus maps an error to a gRPC status error. Context errors and status
// errors made on purpose pass through; unknown errors become Internal
// without their details, which are logged.
func (s *Service) toStatus(err error) error {
	if err == nil {
		return nil
	}
	var fe *scheduler.FieldError
	if errors.As(err, &fe) {
		code := codes.InvalidArgument
		if fe.Precondition {
			code = codes.FailedPrecondition
		}
		st := status.New(code, fe.Error())
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.Field, Description: fe.Msg}}}); derr == nil {
			st = d
		}
		return st.Err()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	for sentinel, code := range codeOf {
		if errors.Is(err, sentinel) {
			return status.Error(code, err.Error())
		}
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	s.log.Error("internal error", zap.Error(err))
	return status.Error(codes.Internal, "internal error")
}

// downstream wraps another service's error so that its code is not passed
// on as ours (its InvalidArgument is not the caller's fault).
func downstream(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.Errorf(codes.Unavailable, "%s: %v", what, err)
	}
	return status.Errorf(codes.Unavailable, "%s: %s", what, status.Convert(err).Message())
}

// page reads a list request's page_size and page_token. A token is the
// position of the page's first item, in decimal; callers treat it as
// opaque.
func page(size int32, token string, def, max int) (offset, limit int, err error) {
	switch {
	case size < 0 || int(size) > max:
		return 0, 0, &scheduler.FieldError{Field: "page_size", Msg: fmt.Sprintf("must be between 0 (default %d) and %d", def, max)}
	case size == 0:
		limit = def
	default:
		limit = int(size)
	}
	if token == "" {
		return 0, limit, nil
	}
	offset, err = strconv.Atoi(token)
	if err != nil || offset < 0 || offset > maxPageOffset {
		return 0, 0, &scheduler.FieldError{Field: "page_token", Msg: "not a token this coordinator gave"}
	}
	return offset, limit, nil
}

// maxPageOffset bounds a page token: no list is longer than the episodes
// one rollout may hold, times a margin for several rollouts.
const maxPageOffset = 1 << 30

// pageToken is the token of the page starting at position next; 0 means
// no page follows (a following page never starts at 0).
func pageToken(next int) string {
	if next == 0 {
		return ""
	}
	return strconv.Itoa(next)
}

// StartRollout implements pb.CoordinatorServer.
func (s *Service) StartRollout(ctx context.Context, req *pb.StartRolloutRequest) (*pb.Rollout, error) {
	r, err := s.engine.StartRollout(ctx, req.RolloutId, req.Spec)
	return r, s.toStatus(err)
}

// GetRollout implements pb.CoordinatorServer.
func (s *Service) GetRollout(ctx context.Context, req *pb.GetRolloutRequest) (*pb.Rollout, error) {
	r, err := s.engine.GetRollout(req.RolloutId, req.IncludeGroups)
	return r, s.toStatus(err)
}

// ListRollouts implements pb.CoordinatorServer.
func (s *Service) ListRollouts(ctx context.Context, req *pb.ListRolloutsRequest) (*pb.ListRolloutsResponse, error) {
	if _, ok := pb.RolloutState_name[int32(req.State)]; !ok {
		return nil, s.toStatus(&scheduler.FieldError{Field: "state", Msg: "unknown rollout state"})
	}
	offset, limit, err := page(req.PageSize, req.PageToken, 100, 1000)
	if err != nil {
		return nil, s.toStatus(err)
	}
	ros, next := s.engine.ListRollouts(req.State, offset, limit)
	return &pb.ListRolloutsResponse{Rollouts: ros, NextPageToken: pageToken(next)}, nil
}

// CancelRollout implements pb.CoordinatorServer.
func (s *Service) CancelRollout(ctx context.Context, req *pb.CancelRolloutRequest) (*pb.Rollout, error) {
	r, err := s.engine.CancelRollout(ctx, req.RolloutId, req.Reason)
	return r, s.toStatus(err)
}

// AddTasks implements pb.CoordinatorServer.
func (s *Service) AddTasks(ctx context.Context, req *pb.AddTasksRequest) (*pb.AddTasksResponse, error) {
	g, e, err := s.engine.AddTasks(ctx, req.RolloutId, req.Tasks)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.AddTasksResponse{Groups: int32(g), Episodes: int32(e)}, nil
}

// GetBatch implements pb.CoordinatorServer.
func (s *Service) GetBatch(ctx context.Context, req *pb.GetBatchRequest) (*pb.GetBatchResponse, error) {
	br := scheduler.BatchRequest{
		RolloutID: req.RolloutId, BatchSize: int(req.BatchSize),
		DropZeroVariance: req.DropZeroVariance, DropStale: req.DropStale,
	}
	switch {
	case req.BatchSize < 0 || req.BatchSize > maxBatchSize:
		return nil, s.toStatus(&scheduler.FieldError{Field: "batch_size", Msg: fmt.Sprintf("must be between 0 and %d", maxBatchSize)})
	case req.Timeout != nil && (!req.Timeout.IsValid() || req.Timeout.AsDuration() < 0 || req.Timeout.AsDuration() > maxBatchTimeout):
		return nil, s.toStatus(&scheduler.FieldError{Field: "timeout", Msg: "must be between 0 and 1h"})
	case req.AckTimeout != nil && (!req.AckTimeout.IsValid() || req.AckTimeout.AsDuration() < time.Second || req.AckTimeout.AsDuration() > maxAckTimeout):
		return nil, s.toStatus(&scheduler.FieldError{Field: "ack_timeout", Msg: "must be between 1s and 24h"})
	case req.IncludeTrajectories && s.storage == nil:
		return nil, s.toStatus(fmt.Errorf("include_trajectories needs --storage: %w", errNoDependency))
	}
	if req.Timeout != nil {
		br.Timeout = req.Timeout.AsDuration()
		if br.Timeout == 0 {
			br.Timeout = time.Millisecond // "do not wait"
		}
	}
	if req.AckTimeout != nil {
		br.AckTimeout = req.AckTimeout.AsDuration()
	}
	resp, err := s.engine.GetBatch(ctx, br)
	if err != nil {
		return nil, s.toStatus(err)
	}
	if req.IncludeTrajectories {
		if err := s.fillTrajectories(ctx, resp); err != nil {
			// The caller will not see this batch, so it cannot ack it:
			// its groups go back now, not after the ack timeout.
			s.engine.ReturnBatch(req.RolloutId, resp.BatchId)
			return nil, s.toStatus(err)
		}
	}
	return resp, nil
}

// fillTrajectories adds each episode's stored steps to a batch, up to what
// one answer can carry (maxPeerMsg): past it the answer could not be sent,
// so it stops instead of holding every episode's steps first.
func (s *Service) fillTrajectories(ctx context.Context, resp *pb.GetBatchResponse) error {
	size := proto.Size(resp)
	for _, g := range resp.Groups {
		for _, ep := range g.Episodes {
			cctx, cancel := context.WithTimeout(ctx, storageTimeout)
			got, err := s.storage.GetEpisode(cctx, &pb.GetEpisodeRequest{EpisodeId: ep.EpisodeId, IncludeSteps: true})
			cancel()
			if err != nil {
				return downstream("storage get episode "+ep.EpisodeId, err)
			}
			steps := &pb.EpisodeSteps{EpisodeId: ep.EpisodeId, Steps: got.Steps}
			if size += proto.Size(steps) + 8; size > maxPeerMsg {
				return &scheduler.FieldError{Field: "include_trajectories", Precondition: true,
					Msg: fmt.Sprintf("the batch's steps exceed %d MiB; ask for a smaller batch_size", maxPeerMsg>>20)}
			}
			g.Trajectories = append(g.Trajectories, steps)
		}
	}
	return nil
}

// AckBatch implements pb.CoordinatorServer.
func (s *Service) AckBatch(ctx context.Context, req *pb.AckBatchRequest) (*pb.AckBatchResponse, error) {
	if err := s.engine.AckBatch(ctx, req.RolloutId, req.BatchId); err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.AckBatchResponse{}, nil
}

// UpdateModelVersion implements pb.CoordinatorServer.
func (s *Service) UpdateModelVersion(ctx context.Context, req *pb.UpdateModelVersionRequest) (*pb.UpdateModelVersionResponse, error) {
	if len(req.Source) > 4096 {
		return nil, s.toStatus(&scheduler.FieldError{Field: "source", Msg: "must be at most 4096 bytes"})
	}
	// One update at a time: check, gateway and record are one step, or a
	// concurrent update could make the record fail after the gateway
	// loaded the weights.
	select {
	case s.updating <- struct{}{}:
		defer func() { <-s.updating }()
	case <-ctx.Done():
		return nil, s.toStatus(ctx.Err())
	}
	retry, err := s.engine.CheckModelVersion(req.Version, req.Reset_)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &pb.UpdateModelVersionResponse{}
	// A retry after a failed commit: the gateway loaded the version before
	// it, and would refuse it now as not newer.
	if req.UpdateGateway && !retry {
		if s.gateway == nil {
			return nil, s.toStatus(fmt.Errorf("update_gateway needs --gateway: %w", errNoDependency))
		}
		cctx, cancel := context.WithTimeout(ctx, gatewayTimeout)
		gw, err := s.gateway.UpdateWeights(cctx, &pb.UpdateWeightsRequest{Version: req.Version, Source: req.Source})
		cancel()
		if err != nil {
			// Not recorded: admission keeps following the old version.
			return nil, downstream("gateway update weights", err)
		}
		resp.Gateway = gw
	}
	prev, err := s.engine.SetModelVersion(ctx, req.Version, req.Reset_)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp.Version, resp.PreviousVersion = req.Version, prev
	return resp, nil
}

// ListQueuedEpisodes implements pb.CoordinatorServer.
func (s *Service) ListQueuedEpisodes(ctx context.Context, req *pb.ListQueuedEpisodesRequest) (*pb.ListQueuedEpisodesResponse, error) {
	offset, limit, err := page(req.PageSize, req.PageToken, 1000, 10_000)
	if err != nil {
		return nil, s.toStatus(err)
	}
	eps, next, err := s.engine.ListQueued(req.RolloutId, offset, limit)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.ListQueuedEpisodesResponse{Episodes: eps, NextPageToken: pageToken(next)}, nil
}

// Work implements pb.CoordinatorServer.
func (s *Service) Work(stream pb.Coordinator_WorkServer) error {
	return dispatch.Serve(stream, s.engine, s.toStatus)
}
