package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/api"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	ingestpkg "github.com/rolloutmesh/rolloutmesh/services/storage/internal/ingest"
)

// readService is the storage read path built as storage.New builds it,
// with the hash check switchable: the only way to turn the check off, for
// this benchmark alone. It serves reads only (its ingest writer never
// runs).
type readService struct {
	idx *index.DB
	api *api.Server
}

func newReadService(ctx context.Context, dataDir string, verify bool) (*readService, error) {
	idx, err := index.Open(ctx, filepath.Join(dataDir, "index.db"))
	if err != nil {
		return nil, err
	}
	blobs, err := blobstore.NewFiles(filepath.Join(dataDir, "blobs"))
	if err != nil {
		idx.Close()
		return nil, err
	}
	w := ingestpkg.New(idx, blobs, ingestpkg.Options{Logger: zap.NewNop()})
	return &readService{idx: idx, api: api.New(idx, blobs, w, api.Options{Logger: zap.NewNop(), SkipVerify: !verify})}, nil
}

func (s *readService) Register(g *grpc.Server)                 { s.api.Register(g) }
func (s *readService) Close(context.Context) error             { return s.idx.Close() }
func (s *readService) ValidateRequest(_ string, req any) error { return api.Validate(req) }

// readClass is a kind of blob the read benchmark fetches.
type readClass struct {
	name  string
	size  int
	count int // blobs stored
	calls int // GetBlobs per round and mode
}

// readBench stores screenshots and recordings through a real server, then
// measures GetBlob and an OSWorld export with and without the hash check,
// alternating the two in rounds, each on a fresh server over the same
// files (warm in the page cache, so the difference is the check's CPU).
func readBench(ctx context.Context, o options, dataDir string) error {
	classes := []readClass{
		{"screenshot", o.shotKB << 10, 256, o.readCalls},
		{"recording", 8 << 20, 8, max(o.readCalls/40, 10)},
	}
	keys, exportBytes, err := storeReadData(ctx, o, dataDir, classes)
	if err != nil {
		return err
	}
	fmt.Printf("sha256 on one core of this machine: %.0f MB/s\n", sha256Rate())
	fmt.Printf("GetBlob read path: %d x %d KB screenshots, %d x %d MB recordings; %d concurrent callers; %d rounds alternating\n"+
		"with and without the sha256 check, each on a fresh server over the same (page-cached) files\n\n",
		classes[0].count, classes[0].size>>10, classes[1].count, classes[1].size>>20, o.readConc, o.readRounds)
	type result struct {
		lats  []time.Duration
		bytes int64
		took  time.Duration
		// cpu is the process's CPU time (user + system, server and
		// callers), which the other load on a shared machine inflates far
		// less than it does latency.
		cpu time.Duration
	}
	modes := []bool{true, false}
	// results[mode][class], the last class being the export.
	results := make([][]result, len(modes))
	for i := range results {
		results[i] = make([]result, len(classes)+1)
	}
	for round := 0; round <= o.readRounds; round++ {
		for mi, verify := range modes {
			dial, stop, err := serveRead(ctx, dataDir, verify)
			if err != nil {
				return err
			}
			c, err := dial()
			if err != nil {
				stop()
				return err
			}
			for ci, cl := range classes {
				cpu0 := cpuTime()
				lats, n, took, err := getBlobs(ctx, c, keys[ci], cl.calls, o.readConc)
				cpu := cpuTime() - cpu0
				if err != nil {
					stop()
					return fmt.Errorf("GetBlob %s: %w", cl.name, err)
				}
				// Round 0 warms the page cache and both servers' code paths.
				if round > 0 {
					r := &results[mi][ci]
					r.lats, r.bytes, r.took, r.cpu = append(r.lats, lats...), r.bytes+n, r.took+took, r.cpu+cpu
				}
			}
			cpu0, t0 := cpuTime(), time.Now()
			n, err := exportOSWorld(ctx, c)
			took, cpu := time.Since(t0), cpuTime()-cpu0
			stop()
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if round > 0 {
				r := &results[mi][len(classes)]
				r.lats, r.bytes, r.took, r.cpu = append(r.lats, took), r.bytes+n, r.took+took, r.cpu+cpu
			}
		}
	}
	fmt.Printf("%-34s %12s %12s %10s %10s %14s\n", "read", "p50", "p99", "calls/s", "MB/s", "CPU ms/call")
	name := map[bool]string{true: "verified", false: "unverified"}
	for ci, cl := range classes {
		for mi, verify := range modes {
			r := results[mi][ci]
			fmt.Printf("%-34s %12s %12s %10.0f %10.1f %14.3f\n", fmt.Sprintf("GetBlob %s, %s", cl.name, name[verify]),
				percentile(r.lats, 0.5).Round(10*time.Microsecond), percentile(r.lats, 0.99).Round(10*time.Microsecond),
				float64(len(r.lats))/r.took.Seconds(), float64(r.bytes)/1e6/r.took.Seconds(),
				float64(r.cpu.Microseconds())/1e3/float64(len(r.lats)))
		}
	}
	for mi, verify := range modes {
		r := results[mi][len(classes)]
		fmt.Printf("%-34s %12s %12s %10s %10.1f %14.1f\n", fmt.Sprintf("ExportRollout OSWorld, %s", name[verify]),
			percentile(r.lats, 0.5).Round(time.Millisecond), percentile(r.lats, 0.99).Round(time.Millisecond), "-",
			float64(r.bytes)/1e6/r.took.Seconds(), float64(r.cpu.Microseconds())/1e3/float64(len(r.lats)))
	}
	fmt.Printf("\n(export: %.0f MB of files per run, %d runs per mode)\n\n", float64(exportBytes)/1e6, o.readRounds)
	return nil
}

// storeReadData stores the blobs of each class through a real server
// (AppendSteps, as runners do) and returns their keys per class and the
// bytes an OSWorld export of the rollout writes.
func storeReadData(ctx context.Context, o options, dataDir string, classes []readClass) ([][]string, int64, error) {
	dial, stop, err := serve(ctx, storage.Config{}, dataDir)
	if err != nil {
		return nil, 0, err
	}
	defer stop()
	c, err := dial()
	if err != nil {
		return nil, 0, err
	}
	rng := rand.NewChaCha8([32]byte{7})
	keys := make([][]string, len(classes))
	for ci, cl := range classes {
		stream, err := c.AppendSteps(ctx)
		if err != nil {
			return nil, 0, err
		}
		id := "read-" + cl.name
		ep := &pb.Episode{EpisodeId: id, RolloutId: "read", TaskId: cl.name, Domain: "os",
			Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1, StartTime: timestamppb.Now()}
		if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
			return nil, 0, err
		}
		for i := 0; i < cl.count; i++ {
			data := make([]byte, cl.size)
			rng.Read(data)
			keys[ci] = append(keys[ci], sha(data))
			st := &pb.Step{EpisodeId: id, Index: int32(i), StartTime: timestamppb.Now(),
				Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: data, MediaType: "image/png"}}}
			if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: st}}); err != nil {
				break
			}
		}
		if _, err := stream.CloseAndRecv(); err != nil {
			return nil, 0, fmt.Errorf("store %s blobs: %w", cl.name, err)
		}
	}
	n, err := exportOSWorld(ctx, c)
	return keys, n, err
}

// serveRead serves a readService on a loopback port, as serve does the
// whole service.
func serveRead(ctx context.Context, dataDir string, verify bool) (func() (pb.StorageClient, error), func(), error) {
	svc, err := newReadService(ctx, dataDir, verify)
	if err != nil {
		return nil, nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		svc.Close(ctx)
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(sctx, daemon.ServeConfig{GRPCListener: lis, Logger: zap.NewNop(), Registry: daemon.NewRegistry()}, svc)
	}()
	var conns []*grpc.ClientConn
	dial := func() (pb.StorageClient, error) {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return nil, err
		}
		conns = append(conns, conn)
		return pb.NewStorageClient(conn), nil
	}
	stop := func() {
		for _, c := range conns {
			c.Close()
		}
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintf(os.Stderr, "serve: %v\n", err)
		}
	}
	return dial, stop, nil
}

// getBlobs makes calls GetBlobs of random keys from conc callers and
// returns each call's latency, the bytes received and the wall time.
func getBlobs(ctx context.Context, c pb.StorageClient, keys []string, calls, conc int) ([]time.Duration, int64, time.Duration, error) {
	var mu sync.Mutex
	var lats []time.Duration
	var total int64
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan string)
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				t0 := time.Now()
				n, err := getBlob(ctx, c, key)
				took := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				lats, total = append(lats, took), total+n
				mu.Unlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < calls; i++ {
		next <- keys[rng.IntN(len(keys))]
	}
	close(next)
	wg.Wait()
	return lats, total, time.Since(start), firstErr
}

func getBlob(ctx context.Context, c pb.StorageClient, key string) (int64, error) {
	s, err := c.GetBlob(ctx, &pb.GetBlobRequest{Sha256: key})
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(m.GetData()))
	}
}

// exportOSWorld exports the read rollout (every blob, as files) and
// returns the bytes received.
func exportOSWorld(ctx context.Context, c pb.StorageClient) (int64, error) {
	s, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "read", Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD})
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(m.GetData()))
	}
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sha256Rate measures how fast one core hashes, best of five 32 MB runs.
func sha256Rate() float64 {
	buf := make([]byte, 32<<20)
	best := time.Duration(1 << 62)
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		sha256.Sum256(buf)
		best = min(best, time.Since(t0))
	}
	return float64(len(buf)) / 1e6 / best.Seconds()
}
