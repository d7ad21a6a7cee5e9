package storage_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// fuzzRollout is the rollout the fuzz server holds from the start; the
// fuzzer may not delete it, so every input can reach stored data.
const fuzzRollout = "fz"

// fuzzServer runs a real storage service behind the daemon's gRPC server
// (interceptors, validation, limits) on an in-memory listener, with its
// data on tmpfs when there is one, so a commit's fsync costs little.
func fuzzServer(tb testing.TB) (pb.StorageClient, healthpb.HealthClient) {
	tb.Helper()
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "storage-fuzz-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry(), DataDir: dir}
	svc, err := storage.New(context.Background(), storage.Config{Index: filepath.Join(dir, "index.db"), Blobs: filepath.Join(dir, "blobs")}, env)
	if err != nil {
		tb.Fatal(err)
	}
	conn := daemontest.ServeInMemory(tb, env, svc)
	c := pb.NewStorageClient(conn)
	ep := episode(fuzzRollout, "fz-e1", "fz-g", "task", "os", 0)
	st := step("fz-e1", 0, []byte("fuzz screenshot"), 1)
	st.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
		{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: []byte("fuzz image"), MediaType: "image/png"}}}}}}
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	if _, err := appendAll(actx, c, epMsg(ep), stepMsg(st), epMsg(finished(ep, done, 1, ""))); err != nil {
		tb.Fatalf("seed the fuzz server: %v", err)
	}
	return c, healthpb.NewHealthClient(conn)
}

// fuzzRPCs are the Storage RPCs the fuzzer calls: the selector byte picks
// one, which decodes the rest of the input as its request.
var fuzzRPCs = []struct {
	name string
	call func(ctx context.Context, c pb.StorageClient, body []byte) (bool, error)
}{
	{"GetEpisode", unary(func(ctx context.Context, c pb.StorageClient, r *pb.GetEpisodeRequest) error {
		_, err := c.GetEpisode(ctx, r)
		return err
	})},
	{"ListEpisodes", unary(func(ctx context.Context, c pb.StorageClient, r *pb.ListEpisodesRequest) error {
		_, err := c.ListEpisodes(ctx, r)
		return err
	})},
	{"GetBlob", unary(func(ctx context.Context, c pb.StorageClient, r *pb.GetBlobRequest) error {
		s, err := c.GetBlob(ctx, r)
		if err != nil {
			return err
		}
		return drain(s.Recv)
	})},
	{"ExportRollout", unary(func(ctx context.Context, c pb.StorageClient, r *pb.ExportRolloutRequest) error {
		s, err := c.ExportRollout(ctx, r)
		if err != nil {
			return err
		}
		return drain(s.Recv)
	})},
	{"GetStats", unary(func(ctx context.Context, c pb.StorageClient, r *pb.GetStatsRequest) error {
		_, err := c.GetStats(ctx, r)
		return err
	})},
	{"CompareRollouts", unary(func(ctx context.Context, c pb.StorageClient, r *pb.CompareRolloutsRequest) error {
		_, err := c.CompareRollouts(ctx, r)
		return err
	})},
	{"DeleteRollout", unary(func(ctx context.Context, c pb.StorageClient, r *pb.DeleteRolloutRequest) error {
		if r.GetRolloutId() == fuzzRollout {
			return errSkip
		}
		_, err := c.DeleteRollout(ctx, r)
		return err
	})},
	{"ListStoredRollouts", unary(func(ctx context.Context, c pb.StorageClient, r *pb.ListStoredRolloutsRequest) error {
		_, err := c.ListStoredRollouts(ctx, r)
		return err
	})},
	{"AppendSteps", unary(func(ctx context.Context, c pb.StorageClient, r *pb.AppendStepsRequest) error {
		_, err := appendAll(ctx, c, r)
		return err
	})},
}

// errSkip marks an input the fuzzer may not run.
var errSkip = errors.New("skip")

// unary adapts a typed call: the body decodes into a fresh request of the
// call's type; ran is false when it does not, or the call skips it.
func unary[R any, PR interface {
	*R
	proto.Message
}](call func(context.Context, pb.StorageClient, PR) error) func(context.Context, pb.StorageClient, []byte) (bool, error) {
	return func(ctx context.Context, c pb.StorageClient, body []byte) (ran bool, err error) {
		req := PR(new(R))
		if proto.Unmarshal(body, req) != nil {
			return false, nil
		}
		if err := call(ctx, c, req); !errors.Is(err, errSkip) {
			return true, err
		}
		return false, nil
	}
}

func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// FuzzStorageRequests sends requests built from fuzz input to a real
// storage server through its full interceptor chain. Whatever a caller
// sends, the answer is a success or the caller's error: never Internal or
// Unknown (a bug, or a panic the recovery interceptor caught), never
// DataLoss (nothing is damaged), never a hang; and the server stays
// healthy.
func FuzzStorageRequests(f *testing.F) {
	c, health := fuzzServer(f)
	sha := sha([]byte("fuzz screenshot"))
	seeds := []struct {
		rpc int
		msg proto.Message
	}{
		{0, &pb.GetEpisodeRequest{EpisodeId: "fz-e1", IncludeSteps: true, InlineBlobs: true}},
		{0, &pb.GetEpisodeRequest{EpisodeId: "../index.db"}},
		{1, &pb.ListEpisodesRequest{RolloutId: fuzzRollout, PageSize: 2, PageToken: "eyJzIjowLCJlIjoiZnotZTEifQ"}},
		{1, &pb.ListEpisodesRequest{PageSize: -1, Status: 99}},
		{2, &pb.GetBlobRequest{Sha256: sha}},
		{2, &pb.GetBlobRequest{Sha256: "../../index.db"}},
		{3, &pb.ExportRolloutRequest{RolloutId: fuzzRollout, Format: pb.ExportFormat_EXPORT_FORMAT_JSONL, InlineImages: true}},
		{3, &pb.ExportRolloutRequest{RolloutId: fuzzRollout, Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD}},
		{4, &pb.GetStatsRequest{RolloutIds: []string{fuzzRollout, "nope"}}},
		{5, &pb.CompareRolloutsRequest{BaseRolloutId: fuzzRollout, OtherRolloutId: fuzzRollout}},
		{6, &pb.DeleteRolloutRequest{RolloutId: "nope"}},
		{7, &pb.ListStoredRolloutsRequest{}},
		{7, &pb.ListStoredRolloutsRequest{PageSize: 1, PageToken: "eyJmIjowLCJyIjoiZnoifQ"}},
		{7, &pb.ListStoredRolloutsRequest{PageSize: 1001, PageToken: "eyJzIjowLCJlIjoiZnotZTEifQ"}},
		{8, epMsg(episode("fz2", "fz2-e", "g", "t", "os", 0))},
		{8, stepMsg(step("fz-e1", 1, []byte("another screenshot"), 2))},
		{8, stepMsg(&pb.Step{EpisodeId: "fz-e1", Index: 2, Observation: &pb.Observation{Screenshot: &pb.BlobRef{Sha256: sha}}})},
	}
	for _, s := range seeds {
		body, err := proto.Marshal(s.msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(byte(s.rpc), body)
	}
	f.Fuzz(func(t *testing.T, sel byte, body []byte) {
		rpc := fuzzRPCs[int(sel)%len(fuzzRPCs)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ran, err := rpc.call(ctx, c, body)
		if !ran {
			t.Skip()
		}
		switch status.Code(err) {
		case codes.Internal, codes.Unknown, codes.DataLoss, codes.DeadlineExceeded, codes.Unavailable:
			t.Fatalf("%s: %v", rpc.name, err)
		}
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("after %s: health %v, %v", rpc.name, resp.GetStatus(), err)
		}
	})
}
