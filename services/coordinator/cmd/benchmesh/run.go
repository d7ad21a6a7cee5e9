package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/benchreport"
)

// services are the rows of the CPU table, in order; "harness" is the
// simulated guests and fakellm, which stand in for VMs and GPUs.
var services = []string{"coordinator", "runner", "vmmanager", "modelgateway", "storage", "simguest", "fakellm", "benchmesh"}

// maxPool is vmmanager's largest pool (config.MaxPoolSize).
const maxPool = 256

// result is one run at one N.
type result struct {
	n, runners, pools int
	episodes, steps   int
	storedSteps       int64
	done, failed      int64
	elapsed, steady   time.Duration
	steadyEpisodes    int
	cpu               map[string]float64 // seconds per service
	// steadyCPU is each service's CPU seconds between the 10th and the
	// 90th percentile hand-out, and steadySteps the steps handed out in
	// that window: the cost per step without the start (connections
	// opened, heaps grown, the gateway's image ring written for the first
	// time) and the tail, as in a long rollout.
	steadyCPU   map[string]float64
	steadySteps int
	// io is each service's kernel counters per step over the steady
	// window (the whole run when there was none), ioSteps their steps.
	io      map[string]ioCounts
	ioSteps int
	// rss is each service's peak resident set size at the run's end, in
	// bytes (the runners summed).
	rss                map[string]int64
	busy               float64 // mean leased share of the N VMs
	busySamples        int
	loadStart, loadEnd string
	perf               map[string]string // service -> top functions
	// images is the gateway's image cache at the run's end: references
	// it resolved and missed (each miss makes a runner send the request
	// again with the bytes), and images it stored. ok is false when its
	// metrics could not be read.
	images imageCounts
	// machine is the whole machine's CPU time over the run (/proc/stat);
	// machineOK is false when it could not be read.
	machine   machineTicks
	machineOK bool
	// paceBefore and paceAfter are the machine's pace probed right
	// before the run's processes start and right after they stop.
	paceBefore, paceAfter pace
}

// script answers every desktop step with a click; the runner ends the
// episode at max_turns.
const script = `{"match": "(?s)Step \\d+ of at most", "reply": "I will click the button in the middle of the window.\n` + "```python\\npyautogui.click(640, 360)\\n```" + `"}
`

// task is an OSWorld-format task with no setup and the infeasible
// evaluator, so an episode is nothing but its steps.
func task(i int) string {
	b, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("bench-%d", i), "snapshot": "desktopd", "domain": "os",
		"instruction": fmt.Sprintf("Open the settings window and read the value in row %d.", i),
		"config":      []any{}, "evaluator": map[string]any{"func": "infeasible"},
	})
	return string(b)
}

func runOnce(ctx context.Context, o options, dir string, n, perfSeconds int) (r result, err error) {
	r = result{n: n, runners: min(o.runners, n), cpu: map[string]float64{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	if r.paceBefore, err = probePace(); err != nil {
		return r, err
	}
	bin := func(name string) string { return filepath.Join(o.binDir, name) }
	var procs []*proc
	defer func() {
		// Reverse start order: runners first, storage last.
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(10 * time.Second)
		}
	}()
	launch := func(binName, name, service string, args ...string) (*proc, error) {
		p, err := start(dir, bin(binName), name, service, args...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		return p, nil
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	common := []string{"--http-addr", "", "--log-level", o.logLevel, "--log-format", "json"}

	// The guests and the model.
	endpointsFile := filepath.Join(dir, "endpoints.txt")
	sg, err := launch("simguest", "simguest", "simguest", "-n", strconv.Itoa(n), "-endpoints", endpointsFile)
	if err != nil {
		return r, err
	}
	endpoints, err := waitEndpoints(sctx, sg, endpointsFile, n)
	if err != nil {
		return r, err
	}
	scriptFile := filepath.Join(dir, "script.jsonl")
	if err := os.WriteFile(scriptFile, []byte(script), 0o644); err != nil {
		return r, err
	}
	llmAddr, err := freeAddr()
	if err != nil {
		return r, err
	}
	llm, err := launch("fakellm", "fakellm", "fakellm", "-addr", llmAddr, "-script", scriptFile)
	if err != nil {
		return r, err
	}
	if err := waitTCP(sctx, llm, llmAddr); err != nil {
		return r, err
	}

	// The five services, in dependency order.
	addrs := map[string]string{}
	for _, s := range []string{"storage", "modelgateway", "vmmanager", "coordinator", "modelgateway-http"} {
		if addrs[s], err = freeAddr(); err != nil {
			return r, err
		}
	}
	gwConfig := filepath.Join(dir, "modelgateway.yaml")
	if err := os.WriteFile(gwConfig, []byte(fmt.Sprintf(
		"default_model: fake-model\nbackends:\n  - id: fakellm\n    base_url: http://%s\n    kind: vllm\n    model: fake-model\n    max_concurrent: 0\n", llmAddr)), 0o644); err != nil {
		return r, err
	}
	// vmmanager caps a pool at 256 VMs: N beyond that is several pools of
	// one vmmanager, each with its own rollout (a rollout names one pool).
	pools := (n + maxPool - 1) / maxPool
	r.pools = pools
	vmConfig := filepath.Join(dir, "vmmanager.yaml")
	var vb strings.Builder
	vb.WriteString("pools:\n")
	for i := 0; i < pools; i++ {
		eps := endpoints[i*n/pools : (i+1)*n/pools]
		fmt.Fprintf(&vb, "  - name: pool-%d\n    provider: static\n    size: %d\n    screen_width: 1280\n    screen_height: 720\n    static:\n      endpoints:\n", i, len(eps))
		for _, e := range eps {
			fmt.Fprintf(&vb, "        - %s\n", e)
		}
	}
	if err := os.WriteFile(vmConfig, []byte(vb.String()), 0o644); err != nil {
		return r, err
	}
	type svc struct {
		name string
		args []string
	}
	starts := []svc{
		{"storage", []string{"--data-dir", filepath.Join(dir, "storage")}},
		// Its metrics (the image cache's hits and misses) on loopback; the
		// last --http-addr wins over common's.
		{"modelgateway", []string{"--config", gwConfig, "--openai-addr", "", "--http-addr", addrs["modelgateway-http"]}},
		{"vmmanager", []string{"--config", vmConfig, "--data-dir", filepath.Join(dir, "vmmanager")}},
		{"coordinator", []string{"--data-dir", filepath.Join(dir, "coordinator"),
			"--vmmanager", addrs["vmmanager"], "--storage", addrs["storage"], "--gateway", addrs["modelgateway"]}},
	}
	for _, s := range starts {
		args := append([]string{"--grpc-addr", addrs[s.name]}, common...)
		p, err := launch(s.name, s.name, s.name, append(args, s.args...)...)
		if err != nil {
			return r, err
		}
		if err := waitServing(sctx, p, addrs[s.name]); err != nil {
			return r, err
		}
	}
	for i := 0; i < r.runners; i++ {
		slots := n / r.runners
		if i < n%r.runners {
			slots++
		}
		addr, err := freeAddr()
		if err != nil {
			return r, err
		}
		id := fmt.Sprintf("runner-%d", i)
		args := append([]string{"--grpc-addr", addr}, common...)
		p, err := launch("runner", id, "runner", append(args,
			"--data-dir", filepath.Join(dir, id), "--runner-id", id, "--advertise-addr", addr,
			"--coordinator", addrs["coordinator"], "--gateway", addrs["modelgateway"], "--storage", addrs["storage"],
			"--slots", strconv.Itoa(slots), "--env-modes", "desktop")...)
		if err != nil {
			return r, err
		}
		if err := waitServing(sctx, p, addr); err != nil {
			return r, err
		}
	}

	dial := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	vcc, err := dial(addrs["vmmanager"])
	if err != nil {
		return r, err
	}
	defer vcc.Close()
	vm := pb.NewVMManagerClient(vcc)
	if err := waitPoolReady(sctx, vm, n); err != nil {
		return r, err
	}
	ccc, err := dial(addrs["coordinator"])
	if err != nil {
		return r, err
	}
	defer ccc.Close()
	co := pb.NewCoordinatorClient(ccc)
	// The coordinator has no runner listing; a runner connects its Work
	// stream right after it serves, and episodes queue until it does.
	time.Sleep(500 * time.Millisecond)

	episodes := max(o.minEpisodes, n*o.episodesPerVM)
	tasks := (episodes + o.groupSize - 1) / o.groupSize
	total := tasks * o.groupSize
	ts := make([]*pb.Task, tasks)
	for i := range ts {
		ts[i] = &pb.Task{Id: fmt.Sprintf("bench-%d", i), Domain: "os", EnvMode: "desktop", SpecJson: task(i),
			Instruction: fmt.Sprintf("Open the settings window and read the value in row %d.", i)}
	}

	before, err := cpuAll(procs)
	if err != nil {
		return r, err
	}
	machineBefore, machineErr := readMachineTicks()
	ioBefore, err := ioAll(procs)
	if err != nil {
		return r, err
	}
	var self0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	r.loadStart = benchreport.LoadAvg()

	// Busy share: the leased share of the N VMs, sampled every 100 ms.
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var busyMu sync.Mutex
	var busySum float64
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			resp, err := vm.ListPools(rctx, &pb.ListPoolsRequest{})
			if err != nil || len(resp.Pools) == 0 {
				continue
			}
			leased := 0
			for _, p := range resp.Pools {
				leased += int(p.VmsByState["leased"])
			}
			busyMu.Lock()
			busySum += float64(leased) / float64(n)
			r.busySamples++
			busyMu.Unlock()
		}
	}()
	if perfSeconds > 0 {
		go func() {
			// Mid-run: after the first VMs' episodes have started.
			select {
			case <-rctx.Done():
				return
			case <-time.After(3 * time.Second):
			}
			r.perf = profile(rctx, o.perfDir, n, procs, perfSeconds)
		}()
	}

	t0 := time.Now()
	var ids []string
	for i := 0; i < pools; i++ {
		ro, err := co.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{
			Name: fmt.Sprintf("benchmesh-%d-%d", n, i), Tasks: ts[i*len(ts)/pools : (i+1)*len(ts)/pools],
			GroupSize: int32(o.groupSize), BatchSize: int32(o.batch), VmPool: fmt.Sprintf("pool-%d", i),
			EnvMode: "desktop", Mode: pb.RolloutMode_ROLLOUT_MODE_ASYNC, MaxStaleness: 1000,
			EpisodeTimeout: durationpb.New(5 * time.Minute),
			Agent: &pb.AgentConfig{Model: "fake-model", ActionSpace: "pyautogui", ObservationType: "screenshot",
				MaxTurns: int32(o.steps)},
		}})
		if err != nil {
			return r, fmt.Errorf("start rollout: %w", err)
		}
		ids = append(ids, ro.RolloutId)
	}
	var mu sync.Mutex
	var marks []time.Duration // when each episode was handed out
	// CPU snapshots at the 10th and the 90th percentile hand-out, for the
	// steady CPU per step.
	loMark, hiMark := total/10, total*9/10
	var cpuLo, cpuHi map[string]float64
	var ioLo, ioHi map[string]ioCounts
	var stepsLo, stepsHi int
	errs := make(chan error, pools)
	for _, id := range ids {
		go func() {
			errs <- trainer(ctx, co, id, o.batch, o.batchTimeout, func(eps []*pb.Episode) {
				at := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				for _, ep := range eps {
					r.episodes++
					r.steps += int(ep.NumSteps)
					marks = append(marks, at)
					if len(marks) == loMark || len(marks) == hiMark {
						// A process that already exited (nil, error) leaves
						// the window unmeasured.
						c, _ := cpuByService(procs)
						io, _ := ioAll(procs)
						if len(marks) == loMark {
							cpuLo, ioLo, stepsLo = c, io, r.steps
						} else {
							cpuHi, ioHi, stepsHi = c, io, r.steps
						}
					}
				}
			})
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			return r, err
		}
	}
	sort.Slice(marks, func(i, j int) bool { return marks[i] < marks[j] })
	r.elapsed = time.Since(t0)
	after, err := cpuAll(procs)
	if err != nil {
		return r, err
	}
	if m, err := readMachineTicks(); err == nil && machineErr == nil {
		r.machine, r.machineOK = m.sub(machineBefore), true
	}
	ioAfter, err := ioAll(procs)
	if err != nil {
		return r, err
	}
	r.rss = map[string]int64{}
	for _, p := range procs {
		b, err := peakRSS(p.cmd.Process.Pid)
		if err != nil {
			return r, fmt.Errorf("%s: %w", p.name, err)
		}
		r.rss[p.service] += b
	}
	var self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	r.loadEnd = benchreport.LoadAvg()
	r.images = readImageCounts(ctx, addrs["modelgateway-http"])
	rcancel()
	busyMu.Lock()
	if r.busySamples > 0 {
		r.busy = busySum / float64(r.busySamples)
	}
	busyMu.Unlock()
	for _, p := range procs {
		r.cpu[p.service] += float64(after[p.name]-before[p.name]) / clockTicks
	}
	r.io, r.ioSteps = map[string]ioCounts{}, r.steps
	if ioLo != nil && ioHi != nil && stepsHi > stepsLo {
		ioBefore, ioAfter, r.ioSteps = ioLo, ioHi, stepsHi-stepsLo
	}
	for _, p := range procs {
		r.io[p.service] = r.io[p.service].add(ioAfter[p.name].sub(ioBefore[p.name]))
	}
	if cpuLo != nil && cpuHi != nil && stepsHi > stepsLo {
		r.steadyCPU, r.steadySteps = map[string]float64{}, stepsHi-stepsLo
		for s, c := range cpuHi {
			r.steadyCPU[s] = c - cpuLo[s]
		}
	}
	r.cpu["benchmesh"] = rusageSeconds(self1) - rusageSeconds(self0)
	// Steady rate: between the 10th and 90th percentile hand-out, without
	// the ramp-up and the tail of the last groups.
	if len(marks) >= 10 {
		lo, hi := marks[len(marks)/10], marks[len(marks)*9/10]
		r.steady, r.steadyEpisodes = hi-lo, len(marks)*9/10-len(marks)/10
	}

	scc, err := dial(addrs["storage"])
	if err != nil {
		return r, err
	}
	defer scc.Close()
	stc := pb.NewStorageClient(scc)
	for _, id := range ids {
		g, err := co.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id})
		if err != nil {
			return r, err
		}
		r.done += int64(g.Progress.Done)
		r.failed += int64(g.Progress.Failed)
		st, err := stc.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{id}})
		if err == nil && len(st.Rollouts) > 0 {
			r.storedSteps += st.Rollouts[0].Steps
		}
	}
	if r.episodes != total {
		return r, fmt.Errorf("handed out %d episodes, want %d", r.episodes, total)
	}
	return r, nil
}

// trainer takes and acknowledges batches of one rollout until it is done.
func trainer(ctx context.Context, co pb.CoordinatorClient, id string, batch int, timeout time.Duration, got func([]*pb.Episode)) error {
	n := 0
	for {
		resp, err := co.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: id, BatchSize: int32(batch), Timeout: durationpb.New(timeout)})
		if err != nil {
			return fmt.Errorf("get batch: %w", err)
		}
		if resp.RolloutDone {
			return nil
		}
		if resp.BatchId == "" {
			g, _ := co.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id})
			return fmt.Errorf("rollout %s: no batch within %v after %d episodes (-batch-timeout): %v", id, timeout, n, g.GetProgress())
		}
		for _, g := range resp.Groups {
			n += len(g.Episodes)
			got(g.Episodes)
		}
		if _, err := co.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: id, BatchId: resp.BatchId}); err != nil {
			return fmt.Errorf("ack: %w", err)
		}
	}
}

// cpuAll reads every live process's CPU ticks.
func cpuAll(procs []*proc) (map[string]int64, error) { return readAll(procs, cpuTicks) }

// cpuByService reads every live process's CPU seconds, summed by service,
// with this process's own as "benchmesh".
func cpuByService(procs []*proc) (map[string]float64, error) {
	ticks, err := cpuAll(procs)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, p := range procs {
		out[p.service] += float64(ticks[p.name]) / clockTicks
	}
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return nil, fmt.Errorf("getrusage: %w", err)
	}
	out["benchmesh"] = rusageSeconds(self)
	return out, nil
}

// rusageSeconds is a rusage's user and system time.
func rusageSeconds(u syscall.Rusage) float64 {
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(u.Utime) + tv(u.Stime)
}

func waitEndpoints(ctx context.Context, p *proc, file string, n int) ([]string, error) {
	for {
		if b, err := os.ReadFile(file); err == nil {
			eps := strings.Fields(string(b))
			if len(eps) != n {
				return nil, fmt.Errorf("simguest wrote %d endpoints, want %d", len(eps), n)
			}
			return eps, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("simguest exited: %v\n%s", p.err, p.logTail())
		case <-ctx.Done():
			return nil, fmt.Errorf("simguest: no endpoints: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func waitTCP(ctx context.Context, p *proc, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s: %w", p.name, addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitPoolReady waits until every VM of the pool is ready.
func waitPoolReady(ctx context.Context, vm pb.VMManagerClient, n int) error {
	for {
		resp, err := vm.ListPools(ctx, &pb.ListPoolsRequest{})
		ready := 0
		for _, p := range resp.GetPools() {
			ready += int(p.VmsByState["ready"])
		}
		if err == nil && ready == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool not ready (%v, %v): %w", resp.GetPools(), err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// profile records every service process with perf for seconds and returns
// each service's hottest functions (self time), the runners merged.
func profile(ctx context.Context, dir string, n int, procs []*proc, seconds int) map[string]string {
	out := map[string]string{}
	if _, err := exec.LookPath("perf"); err != nil {
		out["-"] = "perf not installed (apt-get install linux-perf); no profile"
		return out
	}
	pids := map[string][]string{}
	for _, p := range procs {
		pids[p.service] = append(pids[p.service], strconv.Itoa(p.cmd.Process.Pid))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for svc, ps := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := filepath.Join(dir, fmt.Sprintf("perf-n%d-%s.data", n, svc))
			rec := exec.CommandContext(ctx, "perf", "record", "-g", "-F", "499", "-o", data, "-p", strings.Join(ps, ","), "--", "sleep", strconv.Itoa(seconds))
			if b, err := rec.CombinedOutput(); err != nil {
				mu.Lock()
				out[svc] = fmt.Sprintf("perf record: %v: %.300s", err, b)
				mu.Unlock()
				return
			}
			rep, err := exec.CommandContext(ctx, "perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none", "--sort", "symbol", "--percent-limit", "1.5").Output()
			var lines []string
			for _, l := range strings.Split(string(rep), "\n") {
				// Drop the empty columns perf pads each row with.
				l = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(l), " -"))
				if l != "" && !strings.HasPrefix(l, "#") && len(lines) < 14 {
					lines = append(lines, l)
				}
			}
			mu.Lock()
			if err != nil {
				out[svc] = fmt.Sprintf("perf report: %v", err)
			} else {
				out[svc] = strings.Join(lines, "\n") + "\n(" + data + ")"
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// servicesCPU is the CPU seconds of the five services, without the
// stand-ins for VMs (simguest) and GPUs (fakellm) and the trainer loop.
func (r result) servicesCPU() float64 {
	return r.cpu["coordinator"] + r.cpu["runner"] + r.cpu["vmmanager"] + r.cpu["modelgateway"] + r.cpu["storage"]
}

// printIO prints what each process asked of the kernel per step: bytes
// and calls through read and write (sockets and files), and page faults.
func (r result) printIO() {
	if len(r.io) == 0 || r.ioSteps == 0 {
		return
	}
	window := "the whole run"
	if r.ioSteps != r.steps {
		window = "steady"
	}
	per := func(v int64) float64 { return float64(v) / float64(r.ioSteps) }
	fmt.Printf("  | per step (%s) | KB read | KB written | read calls | write calls | page faults |\n  |---|---|---|---|---|---|\n", window)
	var all ioCounts
	for _, s := range services {
		c, ok := r.io[s]
		if !ok {
			continue
		}
		all = all.add(c)
		fmt.Printf("  | %s | %.0f | %.0f | %.1f | %.1f | %.1f |\n", s, per(c.rchar)/1000, per(c.wchar)/1000, per(c.syscr), per(c.syscw), per(c.minflt))
	}
	fmt.Printf("  | all but benchmesh | %.0f | %.0f | %.1f | %.1f | %.1f |\n", per(all.rchar)/1000, per(all.wchar)/1000, per(all.syscr), per(all.syscw), per(all.minflt))
}

// steadyAllCPU is the CPU seconds of every process in the steady window.
func (r result) steadyAllCPU() float64 {
	var t float64
	for _, s := range services {
		t += r.steadyCPU[s]
	}
	return t
}

// steadyPerStep is the steady window's CPU ms per step in all processes,
// or 0 when the window was not measured.
func (r result) steadyPerStep() float64 {
	if r.steadyCPU == nil || r.steadySteps == 0 {
		return 0
	}
	return 1000 * r.steadyAllCPU() / float64(r.steadySteps)
}

func (r result) print(o options) {
	fmt.Printf("N = %d VMs in %d pools/rollouts (%d runners × ~%d slots): %d episodes, %d steps (%d stored in storage), done %d, failed attempts %d; load average %s -> %s\n",
		r.n, r.pools, r.runners, r.n/r.runners, r.episodes, r.steps, r.storedSteps, r.done, r.failed, r.loadStart, r.loadEnd)
	epm := float64(r.episodes) / r.elapsed.Minutes()
	fmt.Printf("  whole run %v: %.0f episodes/min, %.0f steps/s", r.elapsed.Round(time.Millisecond), epm, float64(r.steps)/r.elapsed.Seconds())
	if r.steady > 0 {
		fmt.Printf("; steady (10th-90th percentile hand-out): %.0f episodes/min", float64(r.steadyEpisodes)/r.steady.Minutes())
	}
	fmt.Printf("\n  VM busy share (leased, sampled %d times): %.1f %%\n", r.busySamples, 100*r.busy)
	if r.machineOK {
		busy, idle, steal := r.machine.shares()
		fmt.Printf("  the machine's CPUs over the run (/proc/stat): busy %.1f %%, idle %.1f %%, steal %.1f %% (the hypervisor ran something else on them)\n",
			100*busy, 100*idle, 100*steal)
	}
	fmt.Printf("  the machine's pace (pace.go), before the run: %s\n", r.paceBefore)
	fmt.Printf("                                after the run: %s\n", r.paceAfter)
	fmt.Printf("  %s\n", r.images)
	var total float64
	for _, s := range services {
		total += r.cpu[s]
	}
	steady := func(s string) string {
		if r.steadyCPU == nil || r.steadySteps == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", 1000*r.steadyCPU[s]/float64(r.steadySteps))
	}
	rss := func(s string) string {
		if b, ok := r.rss[s]; ok {
			return fmt.Sprintf("%.0f", float64(b)/(1<<20))
		}
		return "-"
	}
	fmt.Printf("  | service | CPU s | CPU ms/step | steady CPU ms/step | share of CPU | cores used | peak RSS MiB |\n  |---|---|---|---|---|---|---|\n")
	var allRSS int64
	for _, s := range services {
		c := r.cpu[s]
		allRSS += r.rss[s]
		fmt.Printf("  | %s | %.1f | %.2f | %s | %.0f %% | %.2f | %s |\n", s, c, 1000*c/float64(max(r.steps, 1)), steady(s), 100*c/max(total, 1e-9), c/r.elapsed.Seconds(), rss(s))
	}
	steadyAll := "-"
	if v := r.steadyPerStep(); v > 0 {
		steadyAll = fmt.Sprintf("%.2f", v)
	}
	fmt.Printf("  | all | %.1f | %.2f | %s | 100 %% | %.2f | %.0f |\n", total, 1000*total/float64(max(r.steps, 1)), steadyAll, total/r.elapsed.Seconds(), float64(allRSS)/(1<<20))
	r.printIO()
	if r.steadyCPU != nil {
		fmt.Printf("  (steady: the %d steps handed out between the 10th and the 90th percentile episode, without the start, when connections open, heaps grow and the gateway's image ring is first written, nor the tail)\n", r.steadySteps)
	}
	if len(r.perf) > 0 {
		keys := make([]string, 0, len(r.perf))
		for k := range r.perf {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Printf("  perf record, %d s mid-run, hottest functions (self) per service:\n", o.perfSeconds)
		for _, k := range keys {
			fmt.Printf("  --- %s\n", k)
			for _, l := range strings.Split(r.perf[k], "\n") {
				fmt.Printf("      %s\n", l)
			}
		}
	}
	fmt.Println()
}

func printSummary(o options, rs []result) {
	fmt.Printf("| N VMs | episodes/min | steps/s | VM busy | CPU ms/step: coordinator | runner | vmmanager | modelgateway | storage | services | simguest | fakellm | all | all, steady | load avg |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		ms := func(s string) string { return fmt.Sprintf("%.2f", 1000*r.cpu[s]/float64(max(r.steps, 1))) }
		var total float64
		for _, s := range services {
			total += r.cpu[s]
		}
		steady := "-"
		if v := r.steadyPerStep(); v > 0 {
			steady = fmt.Sprintf("%.2f", v)
		}
		fmt.Printf("| %d | %.0f | %.0f | %.1f %% | %s | %s | %s | %s | %s | %.2f | %s | %s | %.2f | %s | %s |\n",
			r.n, float64(r.episodes)/r.elapsed.Minutes(), float64(r.steps)/r.elapsed.Seconds(), 100*r.busy,
			ms("coordinator"), ms("runner"), ms("vmmanager"), ms("modelgateway"), ms("storage"),
			1000*r.servicesCPU()/float64(max(r.steps, 1)), ms("simguest"), ms("fakellm"),
			1000*total/float64(max(r.steps, 1)), steady, r.loadStart)
	}
	for _, r := range rs {
		if r.n != o.goalN {
			continue
		}
		epm := float64(r.episodes) / r.elapsed.Minutes()
		verdict := "MET"
		if epm < o.goal {
			verdict = "MISSED"
		}
		var total float64
		for _, s := range services {
			total += r.cpu[s]
		}
		perEp := total / float64(max(r.episodes, 1))
		svcEp := r.servicesCPU() / float64(max(r.episodes, 1))
		cpus := float64(runtimeCPUs())
		fmt.Printf("\nverdict: %.0f episodes/min of %d screenshot steps at N = %d, goal >= %.0f: %s (load average %s)\n",
			epm, o.steps, r.n, o.goal, verdict, r.loadStart)
		fmt.Printf("  CPU per episode: %.1f ms in all processes, %.1f ms in the five services; %d cores bound them at %.0f and %.0f episodes/min\n",
			1000*perEp, 1000*svcEp, runtimeCPUs(), 60*cpus/max(perEp, 1e-9), 60*cpus/max(svcEp, 1e-9))
		perStep := 1000 * total / float64(max(r.steps, 1))
		figure := fmt.Sprintf("%.0f/min; %.2f ms CPU per step in all processes (services %.2f), which caps %d cores at %.0f/min",
			epm, perStep, 1000*r.servicesCPU()/float64(max(r.steps, 1)), runtimeCPUs(), 60*cpus/max(perEp, 1e-9))
		if v := r.steadyPerStep(); v > 0 {
			steadyEPM := 60 * 1000 * cpus / (v * float64(o.steps))
			fmt.Printf("  steady (10th-90th percentile hand-out): %.2f ms CPU per step in all processes; %d cores would run %.0f episodes/min at that cost\n",
				v, runtimeCPUs(), steadyEPM)
			figure += fmt.Sprintf(" (steady: %.2f ms, %.0f/min)", v, steadyEPM)
		}
		if r.machineOK {
			// Steal is CPU time the run could not have: on a shared host
			// the same mesh runs slower for it, so the goal line says it.
			_, _, steal := r.machine.shares()
			fmt.Printf("  the hypervisor took %.1f %% of the CPUs' time (steal): the mesh had %.2f of the %d cores\n",
				100*steal, cpus*(1-steal), runtimeCPUs())
			figure += fmt.Sprintf("; steal %.1f %%", 100*steal)
		}
		figure += fmt.Sprintf("; a fresh page %.1f µs, %d KiB over loopback %d µs (before the run)",
			float64(r.paceBefore.page.Nanoseconds())/1000, probeScreenshot>>10, r.paceBefore.socket.Microseconds())
		benchreport.Goal(os.Stdout, "mesh-episodes-per-min",
			fmt.Sprintf("mesh >= %.0f episodes/min of %d screenshot steps at N = %d", o.goal, o.steps, r.n),
			figure, benchreport.Judge(epm >= o.goal))
	}
}
