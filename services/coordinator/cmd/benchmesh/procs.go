package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// binaries are the commands the benchmark builds, by output name, as
// package paths relative to the workspace root.
var binaries = map[string]string{
	"coordinator":  "./services/coordinator/cmd/coordinator",
	"runner":       "./services/runner/cmd/runner",
	"vmmanager":    "./services/vmmanager/cmd/vmmanager",
	"modelgateway": "./services/modelgateway/cmd/modelgateway",
	"storage":      "./services/storage/cmd/storage",
	"fakellm":      "./services/modelgateway/cmd/fakellm",
	"simguest":     "./services/coordinator/cmd/benchmesh/simguest",
}

// build compiles every binary into dir with `go build`, from the root of
// the Go workspace this command runs in.
func build(ctx context.Context, dir string) error {
	out, err := exec.CommandContext(ctx, "go", "env", "GOWORK").Output()
	if err != nil {
		return fmt.Errorf("go env GOWORK: %w", err)
	}
	gowork := strings.TrimSpace(string(out))
	if gowork == "" || gowork == "off" {
		return errors.New("not inside the rolloutmesh Go workspace (go env GOWORK is empty); run from the repository, or pass -bin")
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, pkg := range binaries {
		args = append(args, pkg)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Dir(gowork)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// proc is one started process.
type proc struct {
	name    string // e.g. "runner-2"
	service string // e.g. "runner": the row its CPU is added to
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	err     error
}

// start runs bin with args, its output to a log file in dir.
func start(dir, bin, name, service string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a signal to the benchmark does not
	// reach it before the benchmark has stopped it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, service: service, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// cpuTicks reads utime+stime of pid from /proc/PID/stat, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	// utime is field 14 of stat(5): f[11].
	f, err := statFields(pid, 13)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return u + s, nil
}

// statFields reads /proc/PID/stat and returns its fields after the
// command name, state (field 3 of stat(5)) first, at least n of them.
func statFields(pid, n int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name may hold spaces; fields start after its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < n {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitServing polls the gRPC health service of addr until it is SERVING.
func waitServing(ctx context.Context, p *proc, addr string) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s at %s not serving: %w (last: %v)\n%s", p.name, addr, ctx.Err(), err, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func runtimeCPUs() int { return runtime.NumCPU() }

// ioCounts are a process's kernel counters the benchmark reads per step:
// bytes and calls through read and write system calls (sockets and files
// alike, /proc/PID/io) and minor page faults (/proc/PID/stat).
type ioCounts struct {
	rchar, wchar, syscr, syscw, minflt int64
}

func (c ioCounts) sub(d ioCounts) ioCounts {
	return ioCounts{c.rchar - d.rchar, c.wchar - d.wchar, c.syscr - d.syscr, c.syscw - d.syscw, c.minflt - d.minflt}
}

func (c ioCounts) add(d ioCounts) ioCounts {
	return ioCounts{c.rchar + d.rchar, c.wchar + d.wchar, c.syscr + d.syscr, c.syscw + d.syscw, c.minflt + d.minflt}
}

// readIO reads pid's ioCounts.
func readIO(pid int) (ioCounts, error) {
	var c ioCounts
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return c, err
	}
	fields := map[string]*int64{"rchar": &c.rchar, "wchar": &c.wchar, "syscr": &c.syscr, "syscw": &c.syscw}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if p := fields[k]; ok && p != nil {
			if *p, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				return c, fmt.Errorf("/proc/%d/io: %s: %w", pid, k, err)
			}
		}
	}
	// minflt is field 10 of stat(5): f[7].
	f, err := statFields(pid, 8)
	if err != nil {
		return c, err
	}
	if c.minflt, err = strconv.ParseInt(f[7], 10, 64); err != nil {
		return c, fmt.Errorf("/proc/%d/stat: minflt: %w", pid, err)
	}
	return c, nil
}

// ioAll reads every live process's ioCounts, by process name.
func ioAll(procs []*proc) (map[string]ioCounts, error) { return readAll(procs, readIO) }

// readAll reads one figure of every live process, by process name.
func readAll[T any](procs []*proc, read func(pid int) (T, error)) (map[string]T, error) {
	out := map[string]T{}
	for _, p := range procs {
		v, err := read(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		out[p.name] = v
	}
	return out, nil
}

// peakRSS reads pid's peak resident set size (VmHWM of /proc/PID/status)
// in bytes.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: VmHWM: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// machineTicks is the machine's CPU time by kind, summed over its CPUs,
// from the first line of /proc/stat, in clock ticks.
type machineTicks struct {
	busy  int64 // user, nice, system, irq, softirq
	idle  int64 // idle and iowait
	steal int64 // time the hypervisor ran something else on our vCPUs
}

func (m machineTicks) sub(o machineTicks) machineTicks {
	return machineTicks{busy: m.busy - o.busy, idle: m.idle - o.idle, steal: m.steal - o.steal}
}

// shares is the busy, idle and steal shares of m's total.
func (m machineTicks) shares() (busy, idle, steal float64) {
	t := float64(m.busy + m.idle + m.steal)
	if t <= 0 {
		return 0, 0, 0
	}
	return float64(m.busy) / t, float64(m.idle) / t, float64(m.steal) / t
}

// readMachineTicks reads the "cpu" line of /proc/stat (proc(5)): user
// nice system idle iowait irq softirq steal guest guest_nice. Guest time
// is already counted in user and nice.
func readMachineTicks() (machineTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}, err
	}
	return parseMachineTicks(string(b))
}

func parseMachineTicks(stat string) (machineTicks, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{}, fmt.Errorf("/proc/stat: first line %.80q is not the cpu total with 8 counters", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return machineTicks{}, fmt.Errorf("/proc/stat: cpu counter %d: %w", i+1, err)
		}
		v[i] = n
	}
	return machineTicks{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7]}, nil
}
