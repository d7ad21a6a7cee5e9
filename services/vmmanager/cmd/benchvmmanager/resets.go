package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/rolloutmesh/rolloutmesh/serverkit/benchreport"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/docker"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/process"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/qemu"
)

// resetRun is one provider's measured resets.
type resetRun struct {
	provider string
	total    []time.Duration
	// parts are named spans of each reset, in the order first seen.
	parts     map[string][]time.Duration
	partOrder []string
	skip      string
}

func (r *resetRun) part(name string, d time.Duration) {
	if r.parts == nil {
		r.parts = map[string][]time.Duration{}
	}
	if _, ok := r.parts[name]; !ok {
		r.partOrder = append(r.partOrder, name)
	}
	r.parts[name] = append(r.parts[name], d)
}

// resetProviders picks the rows of the reset table (-reset-providers);
// declared here, beside the table, as main's flags are the other parts'.
var resetProviders = flag.String("reset-providers", "process,docker,qemu", "providers of the reset table, comma-separated: process, docker, qemu")

// resetTable resets one VM of each provider k times through the provider
// itself (what the pool calls after a release) and prints the reset time,
// its parts, and the VM busy share bound a 60 s episode leaves with it.
func resetTable(k int, qemuImage string) error {
	fmt.Printf("(c) reset time per provider, one VM reset %d times in a row (docker: at most 10) through the provider; load average %s\n", k, loadavg())
	dir, err := os.MkdirTemp("", "benchvmmanager-resets-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	var runs []resetRun
	for _, name := range strings.Split(*resetProviders, ",") {
		switch strings.TrimSpace(name) {
		case "process":
			runs = append(runs, resetProcess(ctx, dir, k))
		case "docker":
			runs = append(runs, resetDocker(ctx, min(k, 10)))
		case "qemu":
			runs = append(runs, resetQEMU(ctx, qemuImage, k))
		default:
			return fmt.Errorf("-reset-providers: %q is not process, docker or qemu", name)
		}
	}
	fmt.Printf("    %-30s %9s %9s %9s   %-24s %s\n", "provider", "p50", "p99", "max", "busy bound, 60 s episode", "parts (p50)")
	for _, r := range runs {
		if r.skip != "" {
			fmt.Printf("    %-30s skipped: %s\n", r.provider, r.skip)
			continue
		}
		p50, p99 := pct(r.total, 50), pct(r.total, 99)
		bound := func(d time.Duration) float64 { return 100 * 60 / (60 + d.Seconds()) }
		var parts []string
		for _, name := range r.partOrder {
			parts = append(parts, fmt.Sprintf("%s %s", name, fmtS(pct(r.parts[name], 50))))
		}
		fmt.Printf("    %-30s %9s %9s %9s   %5.1f %% (p50) %5.1f %% (p99)  %s\n", fmt.Sprintf("%s (%d resets)", r.provider, len(r.total)), fmtS(p50), fmtS(p99), fmtS(pct(r.total, 100)),
			bound(p50), bound(p99), strings.Join(parts, "; "))
	}
	for _, r := range runs {
		if r.skip != "" || len(r.partOrder) == 0 {
			continue
		}
		fmt.Printf("    parts of the %s reset, p50 / p99 / max (a span from the reset's start is marked \"at\"):\n", r.provider)
		for _, name := range r.partOrder {
			d := r.parts[name]
			fmt.Printf("      %-44s %9s %9s %9s\n", name, fmtS(pct(d, 50)), fmtS(pct(d, 99)), fmtS(pct(d, 100)))
		}
	}
	fmt.Println("    bound = 60 s / (60 s + reset) for a VM leased back to back without warm spares; with spares >= M × reset / episode a")
	fmt.Println("    ready VM replaces a resetting one and the bound is 100 %.")
	for _, r := range runs {
		if r.provider == "process" && r.skip == "" {
			verdict := "MET"
			if pct(r.total, 99) >= 500*time.Millisecond {
				verdict = "MISSED"
			}
			fmt.Printf("    verdict: process-VM reset p99 < 0.5 s: %s (p99 %s; load average %s)\n", verdict, fmtS(pct(r.total, 99)), loadavg())
			benchreport.Goal(os.Stdout, "process-reset-p99", "process-VM reset p99 < 0.5 s",
				fmt.Sprintf("%s p99, %s p50 (%d resets)", fmtS(pct(r.total, 99)), fmtS(pct(r.total, 50)), len(r.total)),
				benchreport.Judge(pct(r.total, 99) < 500*time.Millisecond))
		}
	}
	// The qemu provider's goal (issue #22): reset p99 under 1 s under
	// software emulation, and a busy share of ≥ 98 % for a 60 s episode
	// where docker's (container recreate) is lower.
	var dockerP99 time.Duration
	for _, r := range runs {
		if strings.HasPrefix(r.provider, "docker") && r.skip == "" {
			dockerP99 = pct(r.total, 99)
		}
	}
	for _, r := range runs {
		if !strings.HasPrefix(r.provider, "qemu") || r.skip != "" {
			continue
		}
		p99 := pct(r.total, 99)
		busy := 100 * 60 / (60 + p99.Seconds())
		fmt.Printf("    verdict: qemu reset p99 < 1 s: %s (p99 %s, %s; load average %s)\n", benchreport.Judge(p99 < time.Second), fmtS(p99), r.provider, loadavg())
		benchreport.Goal(os.Stdout, "qemu-reset-p99", "qemu reset p99 < 1 s, software emulation",
			fmt.Sprintf("%s p99, %s p50 (%d restores, %s)", fmtS(p99), fmtS(pct(r.total, 50)), len(r.total), r.provider), benchreport.Judge(p99 < time.Second))
		// The goal compares with docker's: without a docker row it is
		// not judged, whatever qemu's own share.
		figure := fmt.Sprintf("qemu %.1f %% at p99, docker not measured", busy)
		v := benchreport.NotJudged
		if dockerP99 > 0 {
			dockerBusy := 100 * 60 / (60 + dockerP99.Seconds())
			figure = fmt.Sprintf("qemu %.1f %% at p99, docker %.1f %%", busy, dockerBusy)
			v = benchreport.Judge(busy >= 98 && dockerBusy < busy)
		}
		benchreport.Goal(os.Stdout, "qemu-busy-share", "busy share of a 60 s episode with qemu's reset ≥ 98 %, above docker's", figure, v)
	}
	fmt.Println()
	return nil
}

func fmtS(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// workspaceRoot is the directory of the go.work this command runs in.
func workspaceRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	w := strings.TrimSpace(string(out))
	if w == "" || w == "off" {
		return "", errors.New("not inside the rolloutmesh Go workspace")
	}
	return filepath.Dir(w), nil
}

// resetProcess measures the process provider: desktopd on its own Xvfb
// with openbox, a fresh home at every reset. Its parts come from the
// provider's debug log (the stop, the port, the home) and from desktopd's
// log timestamps (each start-up stage, as a time from the reset's start).
func resetProcess(ctx context.Context, dir string, k int) resetRun {
	r := resetRun{provider: "process"}
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			r.skip = bin + " not installed (apt-get install xvfb openbox)"
			return r
		}
	}
	root, err := workspaceRoot(ctx)
	if err != nil {
		r.skip = err.Error()
		return r
	}
	desktopd := filepath.Join(dir, "desktopd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", desktopd, "./guest/desktopd/cmd/desktopd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		r.skip = fmt.Sprintf("go build desktopd: %v: %.300s", err, out)
		return r
	}
	// Ports and displays away from the defaults other tests use.
	core, logs := observer.New(zapcore.DebugLevel)
	p, err := process.New(process.Options{
		Config:      config.Process{Desktopd: desktopd, Host: "127.0.0.1", BasePort: 17851, BaseDisplay: 251},
		ScreenWidth: 1280, ScreenHeight: 720, Dir: filepath.Join(dir, "vms"), Logger: zap.New(core),
	})
	if err != nil {
		r.skip = err.Error()
		return r
	}
	const id = "bench-process-0"
	bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	inst, err := p.Create(bctx, id)
	if err != nil {
		r.skip = "create: " + err.Error()
		return r
	}
	defer func() { _ = p.Destroy(context.Background(), id, inst) }()
	logPath := filepath.Join(dir, "vms", id, "desktopd.log")
	for i := 0; i < k; i++ {
		logs.TakeAll()
		t0 := time.Now()
		ni, err := p.Reset(bctx, id, inst)
		d := time.Since(t0)
		if err != nil {
			r.skip = fmt.Sprintf("reset %d: %v", i, err)
			return r
		}
		inst = ni
		r.total = append(r.total, d)
		for _, e := range logs.TakeAll() {
			for _, f := range e.Context {
				if f.Type == zapcore.DurationType && f.Key != "start_to_ready" {
					r.part("provider: "+strings.ReplaceAll(f.Key, "_", " "), time.Duration(f.Integer))
				}
			}
		}
		// desktopd's log of this boot: each message's first time, from
		// the reset's start.
		first, events := logEvents(logPath)
		if !first.IsZero() {
			r.part("at desktopd's first log line", first.Sub(t0))
		}
		for _, e := range events {
			r.part("at desktopd: "+e.msg, e.at.Sub(t0))
		}
		r.part("at ready (probe answered)", d)
	}
	return r
}

type logEvent struct {
	msg string
	at  time.Time
}

// logEvents reads a zap JSON log and returns its first line's time and the
// first time of each message, in order (at most 8).
func logEvents(path string) (time.Time, []logEvent) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, nil
	}
	defer f.Close()
	var first time.Time
	var out []logEvent
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() && len(out) < 8 {
		var line struct {
			TS  any    `json:"ts"`
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg == "" {
			continue
		}
		var at time.Time
		switch ts := line.TS.(type) {
		case float64:
			sec, frac := math.Modf(ts)
			at = time.Unix(int64(sec), int64(frac*1e9))
		case string:
			at, _ = time.Parse(time.RFC3339Nano, ts)
		}
		if at.IsZero() {
			continue
		}
		if first.IsZero() {
			first = at
		}
		if !seen[line.Msg] {
			seen[line.Msg] = true
			out = append(out, logEvent{line.Msg, at})
		}
	}
	return first, out
}

// resetDocker measures the docker provider: a reset removes the container
// and creates a fresh one from the image (rolloutmesh/desktop:dev).
func resetDocker(ctx context.Context, k int) resetRun {
	r := resetRun{provider: "docker (rolloutmesh/desktop:dev)"}
	cli, err := docker.NewClient()
	if err != nil {
		r.skip = "docker client: " + err.Error()
		return r
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Ping(pctx)
	cancel()
	if err != nil {
		r.skip = "docker engine not reachable: " + err.Error()
		return r
	}
	const image = "rolloutmesh/desktop:dev"
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		r.skip = image + " not built (make guest-image): " + err.Error()
		return r
	}
	p, err := docker.New(docker.Options{
		Config: config.Docker{Image: image, Flavor: "desktopd", Host: "127.0.0.1", KVM: "off"},
		Pool:   "bench", InstanceID: fmt.Sprintf("benchvmmanager-%d", os.Getpid()),
		ScreenWidth: 1280, ScreenHeight: 720, Logger: zap.NewNop(), Client: cli,
	})
	if err != nil {
		r.skip = err.Error()
		return r
	}
	id := fmt.Sprintf("benchvmmanager-%d", os.Getpid())
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer bcancel()
	inst, err := p.Create(bctx, id)
	if err != nil {
		r.skip = "create: " + err.Error()
		return r
	}
	defer func() { _ = p.Destroy(context.Background(), id, inst) }()
	for i := 0; i < k; i++ {
		// Reset is exactly remove + Create; timed apart for the parts.
		t0 := time.Now()
		if err := p.Destroy(bctx, id, inst); err != nil {
			r.skip = fmt.Sprintf("reset %d: remove: %v", i, err)
			return r
		}
		t1 := time.Now()
		ni, err := p.Create(bctx, id)
		if err != nil {
			r.skip = fmt.Sprintf("reset %d: create: %v", i, err)
			return r
		}
		inst = ni
		r.part("remove container", t1.Sub(t0))
		r.part("create+start+guest ready", time.Since(t1))
		r.total = append(r.total, time.Since(t0))
	}
	return r
}

// resetQEMU measures the qemu provider: a reset loads the VM's internal
// snapshot "ready" over QMP and waits for the guest server. The image is
// deploy/guest/build-qcow2.sh's .cache/guest/desktop.qcow2 (-qemu-image).
func resetQEMU(ctx context.Context, image string, k int) resetRun {
	r := resetRun{provider: "qemu"}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		r.skip = "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)"
		return r
	}
	if image == "" {
		root, err := workspaceRoot(ctx)
		if err != nil {
			r.skip = err.Error()
			return r
		}
		image = filepath.Join(root, ".cache", "guest", "desktop.qcow2")
	}
	if _, err := os.Stat(image); err != nil {
		r.skip = fmt.Sprintf("image %s not built (deploy/guest/build-qcow2.sh): %v", image, err)
		return r
	}
	pools := []config.Pool{{Name: "bench-qemu", Provider: config.ProviderQEMU, Size: 1, ScreenWidth: 1280, ScreenHeight: 720,
		QEMU: &config.QEMU{Image: image}}}
	if err := config.Validate(pools); err != nil {
		r.skip = "config: " + err.Error()
		return r
	}
	spec := pools[0]
	// Short: QMP's unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "bq-")
	if err != nil {
		r.skip = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	p, err := qemu.New(qemu.Options{Config: *spec.QEMU, Snapshot: spec.SnapshotName, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB,
		ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, Dir: dir, Logger: zap.NewNop()})
	if err != nil {
		r.skip = err.Error()
		return r
	}
	r.provider = fmt.Sprintf("qemu (%s, %d MB, %d CPU)", p.Accel(), spec.MemoryMB, spec.CPUs)
	const id = "bq-0"
	bctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	inst, err := p.Create(bctx, id)
	if err != nil {
		r.skip = "create (boot + savevm): " + err.Error()
		return r
	}
	boot := time.Since(t0)
	defer func() { _ = p.Destroy(context.Background(), id, inst) }()
	for i := 0; i < k; i++ {
		t0 := time.Now()
		ni, err := p.Reset(bctx, id, inst)
		if err != nil {
			r.skip = fmt.Sprintf("reset %d: %v", i, err)
			return r
		}
		inst = ni
		r.total = append(r.total, time.Since(t0))
	}
	r.part("first boot + savevm (once)", boot)
	return r
}
