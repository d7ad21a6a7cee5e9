// Command benchcoordinator measures how many episodes per minute the
// coordinator dispatches, collects and hands out in whole groups: a real
// coordinator (SQLite under a temporary directory, group-committed) on a
// loopback gRPC port, simulated runners on real Work streams whose episodes
// finish at once, and a trainer loop doing GetBatch/AckBatch.
//
//	cd services/coordinator && go run ./cmd/benchcoordinator
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/simrunner"
)

func main() {
	var (
		runners   = flag.Int("runners", 16, "simulated runners")
		slots     = flag.Int("slots", 64, "slots per runner (runners × slots = simulated VMs)")
		tasks     = flag.Int("tasks", 2500, "tasks (groups)")
		groupSize = flag.Int("group-size", 8, "episodes per group")
		batch     = flag.Int("batch", 64, "episodes per GetBatch")
		database  = flag.String("database", "", "postgres:// DSN instead of SQLite")
		mesh      = flag.Bool("mesh", false, "also measure the whole mesh: real runners (math env), fakellm behind the real gateway, real storage")
		meshTasks = flag.Int("mesh-tasks", 500, "tasks (groups) for the whole-mesh run")
	)
	flag.Parse()
	if err := run(*runners, *slots, *tasks, *groupSize, *batch, *database); err != nil {
		log.Fatal(err)
	}
	if *mesh {
		// The same 1,024 slots, as 8 runner replicas of 128.
		if err := runMesh(8, *runners**slots/8, *meshTasks, *groupSize, *batch); err != nil {
			log.Fatal(err)
		}
	}
}

func run(runners, slots, tasks, groupSize, batchSize int, database string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "benchcoordinator")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry(), DataDir: dir}
	svc, err := coordinator.New(ctx, coordinator.Config{Database: database, HeartbeatInterval: 5 * time.Second}, env)
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry}, svc)
	}()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := pb.NewCoordinatorClient(cc)

	for i := 0; i < runners; i++ {
		// One connection per runner, as separate runner processes would have.
		rc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer rc.Close()
		r, err := simrunner.Start(rc, simrunner.Options{ID: fmt.Sprintf("sim-%d", i), Slots: slots,
			Score: func(a *pb.Assignment) float64 { return float64(len(a.Episode.EpisodeId) % 2) }})
		if err != nil {
			return err
		}
		defer r.Stop()
	}

	ts := make([]*pb.Task, tasks)
	for i := range ts {
		ts[i] = &pb.Task{Id: fmt.Sprintf("t%d", i), EnvMode: "math", Instruction: "1+1", Answer: "2"}
	}
	total := tasks * groupSize
	start := time.Now()
	ro, err := client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Name: "bench", Tasks: ts, GroupSize: int32(groupSize), BatchSize: int32(batchSize),
		Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 1000,
	}})
	if err != nil {
		return fmt.Errorf("start rollout: %w", err)
	}
	startup := time.Since(start)
	got := 0
	var batches int
	for {
		resp, err := client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: int32(batchSize), Timeout: durationpb.New(30 * time.Second)})
		if err != nil {
			return fmt.Errorf("get batch: %w", err)
		}
		if resp.RolloutDone {
			break
		}
		if resp.BatchId == "" {
			return fmt.Errorf("no batch within 30s after %d episodes", got)
		}
		for _, g := range resp.Groups {
			got += len(g.Episodes)
		}
		batches++
		if _, err := client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	elapsed := time.Since(start)
	if got != total {
		return fmt.Errorf("handed out %d episodes, want %d", got, total)
	}
	ro, err = client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		return err
	}
	commits, ops := svc.StoreStats()
	fmt.Printf("coordinator-only: %d runners × %d slots = %d simulated VMs, %d groups × %d = %d episodes, database %s\n",
		runners, slots, runners*slots, tasks, groupSize, total, dbName(database))
	fmt.Printf("  StartRollout (store %d episodes): %v\n", total, startup.Round(time.Millisecond))
	fmt.Printf("  all %d episodes run, committed and handed out in %d batches in %v\n", got, batches, elapsed.Round(time.Millisecond))
	fmt.Printf("  throughput: %.0f episodes/min (%.0f/s)\n", float64(got)/elapsed.Minutes(), float64(got)/elapsed.Seconds())
	fmt.Printf("  database: %d commits, %d write ops (%.1f per commit)\n", commits, ops, float64(ops)/float64(max(commits, 1)))
	fmt.Printf("  progress: done=%d failed=%d requeued=%d\n", ro.Progress.Done, ro.Progress.Failed, ro.Progress.Requeued)
	cancel()
	return <-served
}

func dbName(dsn string) string {
	if dsn == "" {
		return "SQLite (WAL, synchronous=FULL)"
	}
	return "PostgreSQL"
}
