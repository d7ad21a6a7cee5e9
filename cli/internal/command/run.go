package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/zaplog"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout run", flag.ContinueOnError)
	var f runFlags
	f.register(fs)
	if err := parse(fs, normalizeArgs(fs, args), stderr); err != nil {
		return err
	}
	if err := f.client.resolve(fs); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: rollout run takes flags only (the tasks are --data)", fs.Arg(0))}
	}
	if err := f.validate(); err != nil {
		return usageError{err}
	}
	// With --remote the path is the coordinator's to read, as it sees it,
	// and the model and the VMs are the mesh's.
	data := f.data
	var modes map[string]int
	if !f.remote {
		abs, err := filepath.Abs(f.data)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return usageError{fmt.Errorf("--data: %w", err)}
		}
		data = abs
		if f.taskRoots, err = runTaskRoots(f.taskRoots, data); err != nil {
			return err
		}
		if modes, err = modeCounts(data, f.envMode); err != nil {
			// The coordinator reads the tasks again and says what is
			// wrong with them; until then, assume they need everything.
			modes = nil
		}
		if err := f.checkModeData(modes); err != nil {
			return usageError{err}
		}
		if f.baseURL != "" {
			if f.model, err = checkModelServer(ctx, f.baseURL, os.Getenv("OPENAI_API_KEY"), f.model); err != nil {
				return err
			}
		}
	}
	if !f.usePool {
		// Without a shared pool every slot owns a VM, as in the seeds.
		f.numVMs = f.numRollouts
	}
	start := time.Now()

	coordAddr, storageAddr := f.coordinator, f.storageAddr
	if !f.remote {
		m, err := startEmbedded(ctx, &f, data, modes, stderr)
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(stderr, "stopping the mesh and its VMs...")
			_ = m.Close()
		}()
		coordAddr, storageAddr = m.Addr(mesh.Coordinator), m.Addr(mesh.Storage)
	}

	cconn, err := dial(coordAddr, f.client)
	if err != nil {
		return err
	}
	defer cconn.Close()
	sconn, err := dial(storageAddr, f.client)
	if err != nil {
		return err
	}
	defer sconn.Close()
	coord := pb.NewCoordinatorClient(cconn)

	spec := f.spec(data)
	ro, err := coord.StartRollout(ctx, &pb.StartRolloutRequest{Spec: spec})
	if err != nil {
		return fmt.Errorf("start rollout: %w", err)
	}
	id := ro.GetRolloutId()
	fmt.Fprintf(stderr, "rollout %s: %d tasks × group size %d\n", id, ro.GetNumTasks(), f.groupSize)

	final, err := watch(ctx, coord, id, stderr)
	if err != nil {
		// Ctrl+C: stop admission and running episodes; the deferred mesh
		// close then stops every VM.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, _ = coord.CancelRollout(cctx, &pb.CancelRolloutRequest{RolloutId: id, Reason: "interrupted"})
		cancel()
		return err
	}

	outDir, exported := filepath.Join(f.outputDir, id), true
	if _, err := export(ctx, sconn, id, outDir, bothFormats); status.Code(err) == codes.NotFound {
		// Every episode failed before a runner streamed a step: there is
		// nothing to write, but the summary below says why. The export
		// made the rollout's folder before storage answered; remove it
		// (only if empty) so that no empty result looks like a run.
		exported = false
		_ = os.Remove(outDir)
	} else if err != nil {
		return err
	}
	store := pb.NewStorageClient(sconn)
	stats, err := store.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{id}})
	if status.Code(err) == codes.NotFound {
		stats, err = &pb.GetStatsResponse{}, nil
	}
	if err != nil {
		return fmt.Errorf("get stats: %w", err)
	}
	fmt.Fprintln(stdout)
	if len(stats.GetRollouts()) == 0 {
		fmt.Fprintf(stdout, "rollout %s: no episode reached storage\n\n", id)
	}
	if err := writeStats(stdout, stats); err != nil {
		return err
	}
	p := final.GetProgress()
	// Storage holds what runners reported; episodes that failed before a
	// runner took them (e.g. no VM could be leased) are only counted here.
	fmt.Fprintf(stdout, "coordinator: %d done, %d failed for good, %d aborted, %d requeued; groups %d/%d complete\n",
		p.GetDone(), p.GetFailed(), p.GetAborted(), p.GetRequeued(), p.GetGroupsComplete(), p.GetGroupsTotal())
	infra, err := infraFailures(ctx, coord, store, id, stats)
	if err != nil {
		return err
	}
	total := int64(p.GetDone() + p.GetFailed() + p.GetAborted())
	if len(stats.GetRollouts()) > 0 {
		zeros, err := zeroScores(ctx, store, id)
		if err != nil {
			return err
		}
		zeros.write(stdout)
	}
	infra.write(stdout, total)
	fmt.Fprintf(stdout, "rollout %s %s in %s\n", id, shortState(final.GetState(), "ROLLOUT_STATE_"), time.Since(start).Truncate(100*time.Millisecond))
	if exported {
		fmt.Fprintf(stdout, "results: %s (rollout.jsonl for training, <domain>/<task>/ in OSWorld's layout)\n", outDir)
	} else {
		fmt.Fprintln(stdout, "results: none written, as no episode reached storage")
	}
	if infra.over(total, f.failThreshold) {
		return fmt.Errorf("%d of %d episodes failed for infrastructure reasons (more than --fail-threshold %g allows): %s",
			infra.n, total, f.failThreshold, infra.example)
	}
	return nil
}

func (f *runFlags) spec(data string) *pb.RolloutSpec {
	envMode := f.envMode
	if envMode == "osworld" {
		envMode = "desktop"
	}
	return &pb.RolloutSpec{
		Name:       f.name,
		TaskSource: data,
		EnvMode:    envMode,
		Agent: &pb.AgentConfig{
			Model:            f.model,
			ActionSpace:      f.actionSpace,
			ObservationType:  f.observationType,
			MaxTurns:         int32(f.maxTurns),
			MaxRetries:       int32(f.maxRetries),
			EvaluationMetric: f.metric,
			ScreenWidth:      int32(f.screenW),
			ScreenHeight:     int32(f.screenH),
			Logprobs:         proto.Bool(f.tokenIDs),
			ReturnTokenIds:   proto.Bool(f.tokenIDs),
		},
		GroupSize:      int32(f.groupSize),
		MaxAttempts:    2,
		Mode:           pb.RolloutMode_ROLLOUT_MODE_ASYNC,
		EpisodeTimeout: durationpb.New(f.episodeTimeout),
	}
}

// runTaskRoots are the directories the embedded coordinator of `rollout
// run` may read task files from: the --task-root values, or the working
// directory when none is given, and always the directory of --data (the
// --data directory itself, or a task file's folder), which the user named.
func runTaskRoots(given []string, data string) ([]string, error) {
	roots := append([]string(nil), given...)
	if len(roots) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		roots = append(roots, wd)
	}
	dir := data
	if fi, err := os.Stat(data); err == nil && !fi.IsDir() {
		dir = filepath.Dir(data)
	}
	if !slices.Contains(roots, dir) {
		roots = append(roots, dir)
	}
	return roots, nil
}

// startEmbedded starts the all-in-one mesh for `rollout run`. VMs start
// only when some task runs on a desktop, or when modes (the tasks per env
// mode) is nil because the tasks could not be read.
func startEmbedded(ctx context.Context, f *runFlags, data string, modes map[string]int, stderr io.Writer) (*mesh.Mesh, error) {
	logger, err := zaplog.New(zaplog.Config{Level: f.logLevel, Format: "console"})
	if err != nil {
		return nil, usageError{err}
	}
	var pools []vmmanager.PoolSpec
	switch n := modes["desktop"]; {
	case n > 0:
		p, err := f.pool()
		if errors.Is(err, errNoDesktopd) {
			// The coordinator would refuse the rollout for want of a
			// pool, once everything had started.
			return nil, fmt.Errorf("%s on a desktop, which the process provider starts with desktopd: %w", tasksRun(n), err)
		}
		if err != nil {
			return nil, err
		}
		// More VMs than desktop episodes would only boot and idle.
		p.Size = min(p.Size, n*f.groupSize)
		p.WarmSpares = f.spares(p.Size, n*f.groupSize)
		pools = []vmmanager.PoolSpec{p}
	case modes == nil:
		if pools, err = f.pools(stderr); err != nil {
			return nil, err
		}
	}
	opts := f.options(data)
	opts.Pools = pools
	opts.Logger = logger
	switch {
	case f.serve.launching():
		fmt.Fprintf(stderr, "model: %s, %d server(s) launched by the gateway (logs in %s)\n",
			f.model, f.serve.replicas, opts.Backends[0].Launch.LogDir)
	case f.baseURL != "":
		fmt.Fprintf(stderr, "model: %s at %s\n", f.model, f.baseURL)
	default:
		if f.model == "" {
			f.model = opts.Model
		}
		fmt.Fprintf(stderr, "model: no OPENAI_BASE_URL set, so a SCRIPTED STAND-IN POLICY (fakellm, %s) answers, not a model\n", orDash(opts.FakeScript))
	}
	switch {
	case len(pools) == 0 && modes != nil:
		fmt.Fprintf(stderr, "starting the embedded mesh (data in %s, no VMs: no task runs on a desktop)...\n", f.dataDir)
	case len(pools) == 0:
		fmt.Fprintf(stderr, "starting the embedded mesh (data in %s, no VMs)...\n", f.dataDir)
	case pools[0].WarmSpares > 0:
		fmt.Fprintf(stderr, "starting the embedded mesh (data in %s, %d %s VMs + %d warm spare(s))...\n", f.dataDir, pools[0].Size, f.provider, pools[0].WarmSpares)
	default:
		fmt.Fprintf(stderr, "starting the embedded mesh (data in %s, %d %s VMs)...\n", f.dataDir, pools[0].Size, f.provider)
	}
	m, err := mesh.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := waitModels(ctx, m, &f.meshFlags, stderr); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// waitModels waits for the model servers the gateway launched to load
// (no episode starts before, as the seeds' run_model.py waits), within
// --serve-startup-timeout and a little more for the gateway's own start.
func waitModels(ctx context.Context, m *mesh.Mesh, f *meshFlags, stderr io.Writer) error {
	if !f.serve.launching() {
		return nil
	}
	fmt.Fprintf(stderr, "waiting for %d model server(s) to load %s...\n", f.serve.replicas, f.model)
	wctx, cancel := context.WithTimeout(ctx, f.serve.startupTimeout+30*time.Second)
	defer cancel()
	if err := m.WaitModels(wctx); err != nil {
		return fmt.Errorf("--serve-cmd: %w", err)
	}
	return nil
}

// options are the mesh options both run and up derive from the mesh
// flags; near is where to look for the stand-in's script.
func (f *meshFlags) options(near string) mesh.Options {
	opts := mesh.Options{
		DataDir: f.dataDir, TaskRoots: f.taskRoots, RunnerSlots: f.numRollouts, Model: f.model,
		RAGCorpus: f.ragCorpus, WebDocs: f.webDocs, WebSearchURL: f.webSearchURL,
		CacheDir: f.cacheDir, Offline: f.offline, GoogleSettings: f.googleSettings,
	}
	if f.serve.checkpointDir != "" {
		opts.Checkpoints = &modelgateway.CheckpointsConfig{Dir: f.serve.checkpointDir, Pattern: f.serve.checkpointPattern}
	}
	if f.serve.launching() {
		f.model = f.serve.servedName(f.model)
		opts.Model = f.model
		lc := f.serve.launch(f.dataDir)
		opts.Backends = []modelgateway.BackendConfig{{
			ID: "model", Kind: modelgateway.KindVLLM, Model: f.model, MaxConcurrent: 64, Launch: &lc,
		}}
		return opts
	}
	if f.baseURL != "" {
		opts.Backends = []modelgateway.BackendConfig{{
			ID: "model", BaseURL: f.baseURL, Kind: modelgateway.KindOpenAI, Model: f.model,
			APIKey: os.Getenv("OPENAI_API_KEY"), MaxConcurrent: 64,
		}}
		return opts
	}
	opts.FakeScript = f.fakeScript
	if opts.FakeScript == "" {
		opts.FakeScript = findDemoScript(near)
	}
	if opts.Model == "" {
		opts.Model = "fake-model"
	}
	return opts
}

// pools returns the VM pool of the embedded mesh. Without a desktopd binary
// the process provider cannot run, so the mesh starts without VMs and says
// that desktop tasks will fail; tool tasks still run.
func (f *meshFlags) pools(stderr io.Writer) ([]vmmanager.PoolSpec, error) {
	p, err := f.pool()
	if errors.Is(err, errNoDesktopd) {
		fmt.Fprintf(stderr, "warning: %v; running without VMs, so desktop tasks will fail\n", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p.WarmSpares = f.spares(p.Size, -1)
	return []vmmanager.PoolSpec{p}, nil
}

// autoWarmSpares is --warm-spares' default: size them (warmSpares).
const autoWarmSpares = -1

// maxPoolVMs is vmmanager's bound on size + warm_spares of one pool.
const maxPoolVMs = 256

// spares is the pool's warm spares: --warm-spares, or, by default, sized
// for m VMs and the run's episodes desktop episodes (-1: not known).
func (f *meshFlags) spares(m, episodes int) int {
	if f.warmSpares != autoWarmSpares {
		return f.warmSpares
	}
	return warmSpares(f.numRollouts, m, episodes, resetTime[f.provider])
}

// nominalEpisode is the desktop episode the sizing assumes: an OSWorld
// task of up to 15 turns with a served model takes minutes; a shorter one
// (the scripted stand-in's take seconds) gets at least one spare anyway.
const nominalEpisode = 60 * time.Second

// resetTime is each provider's reset time at p99: measured in
// docs/benchmarks.md for process (0.5-1.4 s on a loaded machine), docker
// (10-14 s) and qemu (2.5 s without KVM); assumed for vmware and
// virtualbox, which revert a snapshot and wait for the guest.
var resetTime = map[string]time.Duration{
	"process":    time.Second,
	"docker":     15 * time.Second,
	"qemu":       3 * time.Second,
	"vmware":     30 * time.Second,
	"virtualbox": 30 * time.Second,
}

// warmSpares sizes the warm spares of a pool of m VMs shared by n runner
// slots (N) for a run of episodes desktop episodes (-1: not known), whose
// provider resets a VM in reset.
//
// A released VM resets before anyone gets it again, so an episode that
// needs a VM while every other one is leased or resetting waits for a
// reset. At most d = min(n, m) VMs are leased at once. In a steady state
// each is released once per episode, so on average d × reset / episode of
// them are resetting at any time (Little's law): that many ready VMs
// besides the leased ones hide the reset. When n < m, the m − d VMs no
// slot can lease are such VMs already, and only the rest need booting as
// spares; when n ≥ m there is always a backlog, nothing idles, and every
// release would make the next episode wait for the reset, so at least one
// spare is worth its boot. No spares when every episode gets a VM of its
// own (episodes ≤ m: no VM is used twice), never more spares than m (or
// than the episodes beyond m), and size + spares stays within vmmanager's
// 256.
func warmSpares(n, m, episodes int, reset time.Duration) int {
	if m < 1 || n < 1 || (episodes >= 0 && episodes <= m) {
		return 0
	}
	d := min(n, m)
	resetting := int(math.Ceil(float64(d) * reset.Seconds() / nominalEpisode.Seconds()))
	s := resetting - (m - d)
	if d == m {
		s = max(s, 1)
	}
	s = min(max(s, 0), m, maxPoolVMs-m)
	if episodes >= 0 {
		s = min(s, episodes-m)
	}
	return s
}

var errNoDesktopd = errors.New("desktopd not found next to rollout or on PATH (make build)")

func (f *meshFlags) pool() (vmmanager.PoolSpec, error) {
	p := vmmanager.PoolSpec{
		Name: "default", Provider: f.provider, Size: f.numVMs,
		ScreenWidth: f.screenW, ScreenHeight: f.screenH, Headless: &f.headless,
		CPUs: f.vmCPUs, MemoryMB: f.vmMemoryMB,
		ClientPassword: f.password, SnapshotName: f.snapshot, PathToVM: f.pathToVM,
	}
	switch f.provider {
	case "process":
		desktopd, ok := findBinary("desktopd")
		if !ok {
			return p, errNoDesktopd
		}
		p.Process = &vmmanager.ProcessSpec{Desktopd: desktopd}
	case "docker":
		image := f.pathToVM
		if image == "" {
			image = "rolloutmesh/desktop:dev"
		}
		p.Docker = &vmmanager.DockerSpec{Image: image}
	case "qemu":
		// The image `make guest-qcow2` builds, with its kernel beside it;
		// OSWorld's Ubuntu.qcow2 boots from its own bootloader.
		image := f.pathToVM
		if image == "" {
			image = filepath.Join(".cache", "guest", "desktop.qcow2")
		}
		if _, err := os.Stat(image); err != nil {
			return p, usageError{fmt.Errorf("--path-to-vm: qemu image %s: %v (make guest-qcow2 builds .cache/guest/desktop.qcow2)", image, err)}
		}
		p.PathToVM = ""
		p.QEMU = &vmmanager.QEMUSpec{Image: image}
	case "vmware":
		p.VMware = &vmmanager.VMwareSpec{}
	case "virtualbox":
		p.VirtualBox = &vmmanager.VirtualBoxSpec{}
	default:
		return p, usageError{fmt.Errorf("--provider %q: want process, docker, qemu, vmware or virtualbox", f.provider)}
	}
	return p, nil
}

// findBinary looks for a sibling binary next to this one (bin/), then on PATH.
func findBinary(name string) (string, bool) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}

// findDemoScript finds examples/fakellm/demo.jsonl above the data path.
func findDemoScript(data string) string {
	for dir := data; ; {
		p := filepath.Join(dir, "examples", "fakellm", "demo.jsonl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		p = filepath.Join(dir, "fakellm", "demo.jsonl")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// watch shows a progress line until the rollout finishes, and returns it.
func watch(ctx context.Context, coord pb.CoordinatorClient, id string, w io.Writer) (*pb.Rollout, error) {
	tty := isTerminal(w)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := ""
	lastPrint := time.Time{}
	for {
		ro, err := coord.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: id})
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(w)
				return nil, errors.New("interrupted: rollout cancelled")
			}
			return nil, fmt.Errorf("get rollout: %w", err)
		}
		line := progressLine(ro)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else if line != last && time.Since(lastPrint) > 5*time.Second {
			fmt.Fprintln(w, line)
			lastPrint = time.Now()
		}
		last = line
		switch ro.GetState() {
		case pb.RolloutState_ROLLOUT_STATE_FINISHED, pb.RolloutState_ROLLOUT_STATE_CANCELLED, pb.RolloutState_ROLLOUT_STATE_FAILED:
			if tty {
				fmt.Fprintln(w)
			} else {
				fmt.Fprintln(w, line)
			}
			if ro.GetState() == pb.RolloutState_ROLLOUT_STATE_FAILED {
				return ro, fmt.Errorf("rollout failed: %s", ro.GetError())
			}
			return ro, nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return nil, errors.New("interrupted: rollout cancelled")
		case <-tick.C:
		}
	}
}

func progressLine(ro *pb.Rollout) string {
	p := ro.GetProgress()
	total := p.GetQueued() + p.GetRunning() + p.GetDone() + p.GetFailed() + p.GetAborted()
	finished := p.GetDone() + p.GetFailed() + p.GetAborted()
	const width = 30
	filled := 0
	if total > 0 {
		filled = int(width * finished / total)
	}
	eta := "-"
	if p.GetEta() != nil && p.GetEta().AsDuration() > 0 {
		eta = p.GetEta().AsDuration().Truncate(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %d/%d episodes: %d done, %d running, %d failed, success %s, ETA %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), finished, total,
		p.GetDone(), p.GetRunning(), p.GetFailed()+p.GetAborted(), pct(p.GetSuccessRate()), eta)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

var bothFormats = []pb.ExportFormat{pb.ExportFormat_EXPORT_FORMAT_JSONL, pb.ExportFormat_EXPORT_FORMAT_OSWORLD}

// export writes the rollout under dir in each format and says how many
// files and bytes it wrote.
func export(ctx context.Context, conn *grpc.ClientConn, id, dir string, formats []pb.ExportFormat) (storage.ExportSummary, error) {
	client := pb.NewStorageClient(conn)
	var total storage.ExportSummary
	for _, format := range formats {
		stream, err := client.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: id, Format: format})
		if err != nil {
			return total, fmt.Errorf("export %s: %w", format, err)
		}
		sum, err := storage.WriteExport(ctx, stream, dir)
		if err != nil {
			return total, fmt.Errorf("export %s: %w", format, err)
		}
		total.Files += sum.Files
		total.Bytes += sum.Bytes
	}
	return total, nil
}

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout export", flag.ContinueOnError)
	var r remoteFlags
	r.register(fs)
	out := fs.String("output-dir", "", "directory to write (default results/<rollout id>)")
	format := fs.String("format", "both", "jsonl, osworld or both")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("usage: rollout export [--format jsonl|osworld|both] [--output-dir DIR] ROLLOUT_ID")}
	}
	id := fs.Arg(0)
	dir := *out
	if dir == "" {
		dir = filepath.Join("results", id)
	}
	formats, layout := bothFormats, "rollout.jsonl and <domain>/<task>/ in OSWorld's layout"
	switch *format {
	case "jsonl":
		formats, layout = formats[:1], "rollout.jsonl"
	case "osworld":
		formats, layout = formats[1:], "<domain>/<task>/ in OSWorld's layout"
	case "both":
	default:
		return usageError{fmt.Errorf("--format %q: want jsonl, osworld or both", *format)}
	}
	if err := r.client.resolve(fs); err != nil {
		return err
	}
	conn, err := dial(r.storage, r.client)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	stats, err := pb.NewStorageClient(conn).GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{id}})
	if err != nil {
		return fmt.Errorf("get stats: %w", err)
	}
	var episodes int64
	for _, rs := range stats.GetRollouts() {
		episodes += rs.GetOverall().GetEpisodes()
	}
	sum, err := export(ctx, conn, id, dir, formats)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rollout %s: %d episodes, %d files (%s) written to %s (%s)\n",
		id, episodes, sum.Files, byteSize(sum.Bytes), dir, layout)
	return nil
}

// byteSize renders n bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func cmdUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rollout up", flag.ContinueOnError)
	var f meshFlags
	f.register(fs, "bearer token every service and the OpenAI front require (off when empty)",
		"directory the coordinator may read task files from (repeatable); default tasks/ under the coordinator's data dir")
	host := fs.String("listen-host", "127.0.0.1", "host every service listens on; 0.0.0.0 opens the mesh to other machines (set --auth-token-file then)")
	openai := fs.String("openai-addr", "", "the gateway's OpenAI-compatible HTTP address (default: --listen-host, port 8000)")
	offset := fs.Int("port-offset", 0, "add this to every standard port (to run a second mesh beside one)")
	if err := parse(fs, normalizeArgs(fs, args), stderr); err != nil {
		return err
	}
	if err := f.client.resolve(fs); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q: rollout up takes flags only", fs.Arg(0))}
	}
	if err := f.validate(); err != nil {
		return usageError{err}
	}
	if f.baseURL != "" {
		var err error
		if f.model, err = checkModelServer(ctx, f.baseURL, os.Getenv("OPENAI_API_KEY"), f.model); err != nil {
			return err
		}
	}
	logger, err := zaplog.New(zaplog.Config{Level: f.logLevel, Format: "console"})
	if err != nil {
		return usageError{err}
	}
	pools, err := f.pools(stderr)
	if err != nil {
		return err
	}
	if *openai == "" {
		*openai = net.JoinHostPort(*host, "8000")
	}
	addrs, err := mesh.WithHost(mesh.StandardAddrs, *host)
	if err != nil {
		return usageError{fmt.Errorf("--listen-host: %w", err)}
	}
	if addrs, err = mesh.OffsetAddrs(addrs, *offset); err != nil {
		return usageError{err}
	}
	if *offset != 0 {
		if a, err := mesh.OffsetAddrs(map[string][2]string{"": {*openai, ""}}, *offset); err == nil {
			*openai = a[""][0]
		}
	}
	wd, _ := os.Getwd()
	opts := f.options(wd)
	opts.Addrs, opts.OpenAIAddr, opts.AuthToken = addrs, *openai, f.client.token
	opts.Pools, opts.Logger = pools, logger
	m, err := mesh.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := waitModels(ctx, m, &f, stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "rolloutmesh is up (all five services in this process):")
	for _, s := range []string{mesh.VMManager, mesh.Coordinator, mesh.Runner, mesh.ModelGateway, mesh.Storage} {
		fmt.Fprintf(stdout, "  %-13s grpc %-15s http %s\n", s, addrs[s][0], addrs[s][1])
	}
	fmt.Fprintf(stdout, "  %-13s OpenAI-compatible HTTP %s\n", "", *openai)
	if m.FakeLLM() {
		script := opts.FakeScript
		if script == "" {
			script = "no script found: a fixed reply to everything; give --fake-script examples/fakellm/demo.jsonl"
		}
		fmt.Fprintf(stdout, "  model: a SCRIPTED STAND-IN POLICY (fakellm, %s) answers; set OPENAI_BASE_URL for a real model\n", script)
	} else if f.serve.launching() {
		fmt.Fprintf(stdout, "  model: %s, %d server(s) launched by the gateway (logs in %s)\n", f.model, f.serve.replicas, opts.Backends[0].Launch.LogDir)
	} else {
		fmt.Fprintf(stdout, "  model: %s at %s\n", f.model, f.baseURL)
	}
	if len(opts.TaskRoots) > 0 {
		fmt.Fprintf(stdout, "  task files are read from %s\n", strings.Join(opts.TaskRoots, ", "))
	} else {
		fmt.Fprintf(stdout, "  task files are read from %s (give --task-root for others)\n", filepath.Join(f.dataDir, mesh.Coordinator, "tasks"))
	}
	fmt.Fprintln(stdout, "Ctrl+C stops it and every VM.")
	logger.Info("up", zap.String("data_dir", f.dataDir))
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping...")
	return nil
}
