// Package dispatch serves the runner side of the Work stream: it reads the
// runner's hello, credits, heartbeats, results and hand-backs into the
// scheduler, and writes the scheduler's assignments and cancellations back.
// A broken stream, a runner the scheduler dropped (silent past the heartbeat
// timeout, reconnected elsewhere) or a draining coordinator ends the stream;
// the scheduler then requeues the runner's episodes.
package dispatch

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/scheduler"
)

// engine is the part of the scheduler a Work stream drives.
type engine interface {
	Connect(h *pb.RunnerHello) (*scheduler.Runner, *pb.Welcome, error)
	Credit(rn *scheduler.Runner, free int32)
	Heartbeat(rn *scheduler.Runner, hb *pb.Heartbeat)
	Result(rn *scheduler.Runner, ep *pb.Episode) error
	HandBack(rn *scheduler.Runner, episodeID string)
	Disconnect(rn *scheduler.Runner, why string)
}

var _ engine = (*scheduler.Engine)(nil)

// HelloTimeout bounds the wait for a new stream's hello.
const HelloTimeout = 30 * time.Second

// Serve runs one Work stream until it ends. mapErr translates scheduler
// errors into gRPC status errors.
func Serve(stream pb.Coordinator_WorkServer, eng engine, mapErr func(error) error) error {
	ctx := stream.Context()
	hello, err := recvHello(ctx, stream)
	if err != nil {
		return err
	}
	rn, welcome, err := eng.Connect(hello)
	if err != nil {
		return mapErr(err)
	}
	why := "stream closed"
	defer func() { eng.Disconnect(rn, why) }()
	if err := stream.Send(&pb.WorkResponse{Msg: &pb.WorkResponse_Welcome{Welcome: welcome}}); err != nil {
		why = "send failed"
		return err
	}

	stop := make(chan struct{})
	defer close(stop)
	sendErr := make(chan error, 1)
	go func() {
		// The only goroutine that sends after the welcome.
		for {
			msgs, ok := rn.Take(stop)
			if !ok {
				return
			}
			for _, m := range msgs {
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			}
		}
	}()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if err := handle(eng, rn, req); err != nil {
				recvErr <- mapErr(err)
				return
			}
		}
	}()
	select {
	case err := <-recvErr:
		if errors.Is(err, io.EOF) {
			return nil
		}
		why = "receive: " + status.Convert(err).Message()
		return err
	case err := <-sendErr:
		why = "send failed"
		return err
	case <-rn.Gone():
		why = "dropped by coordinator"
		return status.Error(codes.Unavailable, "coordinator closed the work stream (draining, heartbeat timeout or replaced by a newer stream)")
	}
}

func handle(eng engine, rn *scheduler.Runner, req *pb.WorkRequest) error {
	switch m := req.Msg.(type) {
	case *pb.WorkRequest_Credit:
		eng.Credit(rn, m.Credit.GetFreeSlots())
	case *pb.WorkRequest_Heartbeat:
		eng.Heartbeat(rn, m.Heartbeat)
	case *pb.WorkRequest_Result:
		return eng.Result(rn, m.Result.GetEpisode())
	case *pb.WorkRequest_HandBack:
		eng.HandBack(rn, m.HandBack.GetEpisodeId())
	case *pb.WorkRequest_Hello:
		return &scheduler.FieldError{Field: "hello", Msg: "sent twice on one stream"}
	default:
		return &scheduler.FieldError{Field: "msg", Msg: "empty work request"}
	}
	return nil
}

func recvHello(ctx context.Context, stream pb.Coordinator_WorkServer) (*pb.RunnerHello, error) {
	type got struct {
		req *pb.WorkRequest
		err error
	}
	ch := make(chan got, 1)
	go func() {
		req, err := stream.Recv()
		ch <- got{req, err}
	}()
	t := time.NewTimer(HelloTimeout)
	defer t.Stop()
	select {
	case g := <-ch:
		if g.err != nil {
			return nil, g.err
		}
		h := g.req.GetHello()
		if h == nil {
			return nil, status.Error(codes.InvalidArgument, "hello: the first message on a work stream must be a hello")
		}
		return h, nil
	case <-t.C:
		return nil, status.Error(codes.DeadlineExceeded, "no hello within 30s")
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}
