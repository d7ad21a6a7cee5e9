// Command benchmesh measures the path a user runs: coordinator, runners,
// vmmanager, modelgateway and storage as separate processes (the real
// binaries, built with `go build`) talking over loopback gRPC, with N
// simulated desktop guests (simguest: one light process answering OSWorld's
// guest API on N ports, with a realistic 1280×720 screenshot and no X
// server) leased through vmmanager's static provider. Each episode leases a
// VM, takes 5 screenshot steps with a zero-latency model (fakellm behind the
// gateway, answering a pyautogui click), streams every step and screenshot
// to storage and releases the VM, which vmmanager resets (a health probe)
// before it is leased again.
//
// It reports episodes/min, steps/s, the CPU each service spent per step
// (utime+stime from /proc/PID/stat before and after the run) and the VMs'
// busy share (leased VMs, sampled through ListPools), at each N in -n.
//
//	cd services/coordinator && go run ./cmd/benchmesh -n 64,256,1024
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/benchreport"
)

// options are the benchmark's flags.
type options struct {
	ns            []int
	runners       int
	episodesPerVM int
	minEpisodes   int
	groupSize     int
	batch         int
	steps         int
	logLevel      string
	binDir        string
	keep          bool
	perfSeconds   int
	perfDir       string
	goal          float64
	goalN         int
	batchTimeout  time.Duration
	paceOnly      bool
}

func main() {
	var o options
	ns := flag.String("n", "64,256,1024", "comma-separated numbers of simulated VMs (= runner slots)")
	flag.IntVar(&o.runners, "runners", 4, "runner processes; the N slots are split between them")
	flag.IntVar(&o.episodesPerVM, "episodes-per-vm", 4, "episodes per VM in each run")
	flag.IntVar(&o.minEpisodes, "min-episodes", 512, "at least this many episodes per run")
	flag.IntVar(&o.groupSize, "group-size", 8, "episodes per task (GRPO group)")
	flag.IntVar(&o.batch, "batch", 64, "episodes per GetBatch")
	flag.IntVar(&o.steps, "steps", 5, "screenshot steps per episode (the agent's max_turns)")
	flag.StringVar(&o.logLevel, "log-level", "info", "the services' --log-level (info is what a deployment runs)")
	flag.StringVar(&o.binDir, "bin", "", "directory with prebuilt binaries (coordinator, runner, vmmanager, modelgateway, storage, fakellm, simguest); default: go build into a temporary directory")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, data)")
	flag.IntVar(&o.perfSeconds, "perf", 0, "at the largest N, record each service with `perf record -g` for this many seconds mid-run and print its hottest functions (0: off); `perf report -g` on the kept data shows the call paths")
	flag.StringVar(&o.perfDir, "perf-dir", "", "keep perf.data files here (default: the temporary directory)")
	flag.Float64Var(&o.goal, "goal", 5000, "goal in episodes/min at -goal-n VMs")
	flag.IntVar(&o.goalN, "goal-n", 1024, "the N the goal applies to")
	flag.DurationVar(&o.batchTimeout, "batch-timeout", 5*time.Minute, "fail the run when no whole group is done for this long")
	flag.BoolVar(&o.paceOnly, "pace", false, "print the machine's pace (the probe each run prints before and after itself) and exit")
	flag.Parse()
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4096 {
			log.Fatalf("-n: %q is not a number of VMs in 1..4096", s)
		}
		o.ns = append(o.ns, n)
	}
	if o.runners < 1 || o.groupSize < 1 || o.batch < 1 || o.steps < 1 || o.steps > 100 {
		log.Fatal("-runners, -group-size, -batch must be >= 1 and -steps in 1..100")
	}
	if o.paceOnly {
		p, err := probePace()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("machine pace: %s\n", p)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "benchmesh")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Printf("data and logs kept in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.binDir == "" {
		o.binDir = filepath.Join(dir, "bin")
		t := time.Now()
		if err := build(ctx, o.binDir); err != nil {
			return err
		}
		fmt.Printf("built the binaries with go build in %v\n", time.Since(t).Round(time.Second))
	}
	if o.perfDir == "" {
		o.perfDir = dir
	} else if o.perfSeconds > 0 {
		if err := os.MkdirAll(o.perfDir, 0o755); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	fmt.Printf("benchmesh: %s, %d CPUs, %s/%s %s; load average at start %s\n",
		host, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), benchreport.LoadAvg())
	fmt.Printf("separate processes over loopback gRPC: coordinator, %d runners, vmmanager (static pool of N simguest endpoints), modelgateway -> fakellm (zero latency), storage (SQLite + files)\n", o.runners)
	fmt.Printf("each episode: lease a VM, %d steps of (model call with the recent screenshots -> pyautogui click -> screenshot), every step and screenshot to storage, release (reset = health probe)\n\n", o.steps)
	largest := 0
	for _, n := range o.ns {
		largest = max(largest, n)
	}
	var results []result
	for _, n := range o.ns {
		perf := 0
		if n == largest {
			perf = o.perfSeconds
		}
		r, err := runOnce(ctx, o, filepath.Join(dir, fmt.Sprintf("n%d", n)), n, perf)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		// The kernel frees the stopped processes' memory for a moment.
		time.Sleep(2 * time.Second)
		if r.paceAfter, err = probePace(); err != nil {
			return err
		}
		r.print(o)
		results = append(results, r)
	}
	printSummary(o, results)
	return nil
}
