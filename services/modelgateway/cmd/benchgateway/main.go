// Command benchgateway measures the model gateway side by side with fakellm
// reached directly and through nginx, and compares routing policies on
// time to first token and prefix-cache hits. Run it from
// services/modelgateway: go run ./cmd/benchgateway
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/bench"
)

func main() {
	var o bench.Options
	rates := flag.String("rates", "1000,5000", "(a) comma-separated request rates of the latency runs")
	flag.IntVar(&o.GoalRate, "goal-rate", 5000, "(a) rate at which the latency goals are checked")
	flag.DurationVar(&o.Duration, "duration", 5*time.Second, "(a) length of each measured run")
	flag.IntVar(&o.Conns, "conns", 64, "(a) connections of the max-throughput run")
	flag.IntVar(&o.Rounds, "rounds", 5, "(a) interleaved rounds the runs are cut into")
	flag.StringVar(&o.Nginx, "nginx", "nginx", "(a) nginx binary")
	flag.IntVar(&o.ImageBytes, "image-bytes", 0, "(a) add a PNG screenshot of this many bytes to each request (0: a text-only turn)")
	// On two CPUs pinning leaves the generator and fakellm one CPU, which
	// then limits every target alike; it pays from four up.
	flag.BoolVar(&o.Pin, "pin", runtime.NumCPU() >= 4, "(a) run nginx and the gateway on the upper half of the CPUs, the load generator and fakellm on the rest (default: with 4 CPUs or more)")
	flag.IntVar(&o.Sessions, "sessions", 64, "(b) concurrent sessions")
	flag.IntVar(&o.Turns, "turns", 10, "(b) turns per session")
	flag.IntVar(&o.Backends, "backends", 4, "(b) fakellm backends")
	flag.DurationVar(&o.MissTTFT, "miss-ttft", 40*time.Millisecond, "(b) fakellm time to first token on a prefix-cache miss")
	flag.DurationVar(&o.HitTTFT, "hit-ttft", 8*time.Millisecond, "(b) fakellm time to first token on a prefix-cache hit")
	flag.DurationVar(&o.PerToken, "per-token", time.Millisecond, "(b) fakellm time per token")
	flag.IntVar(&o.CacheKeys, "cache-keys", 24, "(b) sessions each fakellm's prefix cache holds")
	flag.StringVar(&o.Only, "only", "", "run only part a, b or c")
	flag.IntVar(&o.InstrRequests, "instr-requests", 1000, "(c) requests instructions per request are counted over under callgrind (0 skips c)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	child := flag.String(bench.ChildFlag, "", "internal: run as the named server process under test")
	policies := flag.String("policies", "sticky_least_loaded,round_robin", "(b) comma-separated routing policies, in run order")
	flag.Parse()
	if *child != "" {
		if err := bench.Child(context.Background(), *child, flag.Arg(0), os.Stdin, os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	o.Policies = strings.Split(*policies, ",")
	for _, r := range strings.Split(*rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n <= 0 {
			log.Fatalf("-rates: %q is not a positive number", r)
		}
		o.Rates = append(o.Rates, n)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := bench.Run(ctx, o, os.Stdout); err != nil {
		log.Print(err)
		stop()
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}
