package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// fiveSteps makes every math episode take five model turns: four
// calculator calls and the final answer.
const fiveSteps = `{"match": "calculator\\(.*3\\s*\\*\\s*12\\s*\\*\\s*7.*returned: 252", "tool_calls": [{"name": "final_answer", "arguments": {"answer": "252"}}]}
{"match": "calculator\\(.*33\\s*\\+\\s*3.*returned", "tool_calls": [{"name": "calculator", "arguments": {"expression": "3 * 12 * 7"}}]}
{"match": "calculator\\(.*22\\s*\\+\\s*2.*returned", "tool_calls": [{"name": "calculator", "arguments": {"expression": "33 + 3"}}]}
{"match": "calculator\\(.*11\\s*\\+\\s*1.*returned", "tool_calls": [{"name": "calculator", "arguments": {"expression": "22 + 2"}}]}
{"match": "A crate holds 12 boxes", "tool_calls": [{"name": "calculator", "arguments": {"expression": "11 + 1"}}]}
`

// serve runs a built service on a loopback port until ctx ends.
func serve(ctx context.Context, log *zap.Logger, svc daemon.Service, done chan<- error) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		done <- daemon.Serve(ctx, daemon.ServeConfig{GRPCListener: lis, Logger: log, Registry: daemon.NewRegistry()}, svc)
	}()
	return lis.Addr().String(), nil
}

// runMesh measures the whole mesh: real runners running the zero-latency
// math environment, fakellm behind the real gateway, real storage
// receiving every step, and the coordinator.
func runMesh(runners, slots, tasks, groupSize, batchSize int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "benchmesh")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	log := zap.NewNop()
	var services []chan error
	start := func(svc daemon.Service, err error) (string, error) {
		if err != nil {
			return "", err
		}
		done := make(chan error, 1)
		services = append(services, done)
		return serve(ctx, log, svc, done)
	}
	defer func() {
		cancel()
		for _, d := range services {
			<-d
		}
	}()

	script := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(script, []byte(fiveSteps), 0o644); err != nil {
		return err
	}
	rules, err := fakellm.LoadScript(script)
	if err != nil {
		return err
	}
	llm, err := fakellm.Start(ctx, "127.0.0.1:0", fakellm.Config{Script: rules})
	if err != nil {
		return err
	}
	defer llm.Close()
	gwAddr, err := start(modelgateway.New(ctx, modelgateway.Config{File: &modelgateway.FileConfig{
		Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: llm.URL, Kind: modelgateway.KindVLLM, Model: "fake-model", MaxConcurrent: 4096}},
	}}, daemon.Env{Logger: log, Registry: daemon.NewRegistry()}))
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	stAddr, err := start(storage.New(ctx, storage.Config{}, daemon.Env{Logger: log, Registry: daemon.NewRegistry(), DataDir: filepath.Join(dir, "storage")}))
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	csvc, err := coordinator.New(ctx, coordinator.Config{Storage: stAddr, Gateway: gwAddr}, daemon.Env{Logger: log, Registry: daemon.NewRegistry(), DataDir: filepath.Join(dir, "coordinator")})
	coAddr, err := start(csvc, err)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	for i := 0; i < runners; i++ {
		_, err := start(runner.New(ctx, runner.Config{
			Coordinator: coAddr, Gateway: gwAddr, Storage: stAddr, Slots: slots, RunnerID: fmt.Sprintf("runner-%d", i),
			EnvModes: "math", CacheDir: filepath.Join(dir, "cache", fmt.Sprint(i)), StorageBuffer: 64,
			DefaultEpisodeTimeout: time.Minute,
		}, daemon.Env{Logger: log, Registry: daemon.NewRegistry(), DataDir: filepath.Join(dir, "runner", fmt.Sprint(i))}))
		if err != nil {
			return fmt.Errorf("runner: %w", err)
		}
	}
	cc, err := grpc.NewClient(coAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := pb.NewCoordinatorClient(cc)
	// Give the runners a moment to connect their Work streams.
	time.Sleep(300 * time.Millisecond)

	ts := make([]*pb.Task, tasks)
	for i := range ts {
		ts[i] = &pb.Task{Id: fmt.Sprintf("crate-%d", i), Domain: "math", EnvMode: "math", Answer: "252",
			Instruction: "A crate holds 12 boxes and each box holds 7 apples. How many apples are in 3 crates?",
			SpecJson:    `{"metric":"numeric_match"}`}
	}
	total := tasks * groupSize
	t0 := time.Now()
	ro, err := client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
		Name: "bench-mesh", Tasks: ts, GroupSize: int32(groupSize), BatchSize: int32(batchSize), EnvMode: "math",
		Agent: &pb.AgentConfig{Model: "fake-model", ActionSpace: "tool_calls", MaxTurns: 10, EvaluationMetric: "numeric_match"},
		Mode:  pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 1000,
	}})
	if err != nil {
		return fmt.Errorf("start rollout: %w", err)
	}
	got, steps := 0, 0
	var success float64
	for {
		resp, err := client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: ro.RolloutId, BatchSize: int32(batchSize), Timeout: durationpb.New(60 * time.Second)})
		if err != nil {
			return fmt.Errorf("get batch: %w", err)
		}
		if resp.RolloutDone {
			break
		}
		if resp.BatchId == "" {
			r, _ := client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
			return fmt.Errorf("no batch within 60s after %d episodes: %v", got, r.GetProgress())
		}
		for _, g := range resp.Groups {
			for _, ep := range g.Episodes {
				got++
				steps += int(ep.NumSteps)
				success += ep.Score
			}
		}
		if _, err := client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: ro.RolloutId, BatchId: resp.BatchId}); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
	elapsed := time.Since(t0)
	r, err := client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
	if err != nil {
		return err
	}
	fmt.Printf("whole mesh: %d runners × %d slots = %d concurrent episodes, %d groups × %d = %d episodes\n",
		runners, slots, runners*slots, tasks, groupSize, total)
	fmt.Printf("  coordinator + %d runners (math env) + modelgateway + fakellm + storage, in one process over loopback gRPC/HTTP\n", runners)
	fmt.Printf("  handed out %d episodes (%d steps, %.1f per episode, mean reward %.2f) in %v\n", got, steps, float64(steps)/float64(max(got, 1)), success/float64(max(got, 1)), elapsed.Round(time.Millisecond))
	fmt.Printf("  throughput: %.0f episodes/min, %.0f steps/s\n", float64(got)/elapsed.Minutes(), float64(steps)/elapsed.Seconds())
	fmt.Printf("  progress: done=%d failed=%d requeued=%d groups_failed=%d\n", r.Progress.Done, r.Progress.Failed, r.Progress.Requeued, r.Progress.GroupsFailed)
	return nil
}
