// Command benchviewer measures the trajectory viewer storage serves under
// /ui/: the server time of an episode page with 50 steps (real PNG
// screenshots written through AppendSteps), of the rollout page of a
// 100,000-episode rollout (first page, a deep page, a filtered page), of
// the rollouts page, and of screenshot thumbnails (shrunk on first use,
// then cached). It prints p50/p99 of wall and process CPU time and a
// verdict per goal.
//
//	go run ./cmd/benchviewer                   # 100,000 episodes
//	go run ./cmd/benchviewer --episodes 20000  # a smaller rollout
//	go run ./cmd/benchviewer --rollouts 1000   # and 999 more rollouts of 1,000 episodes each
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/benchreport"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

type options struct {
	dir               string
	episodes, perEp   int
	rollouts, perRo   int
	steps, requests   int
	shotW, shotH      int
	episodeGoal       time.Duration
	rolloutGoal       time.Duration
	firstViewGoal     time.Duration
	thumbCachedGoal   time.Duration
	keep, reuseSeeded bool
	cpuProfile        string
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "data directory (default: a temporary one, removed afterwards)")
	flag.IntVar(&o.episodes, "episodes", 100_000, "episodes of the big rollout")
	flag.IntVar(&o.perEp, "steps-per-episode", 2, "steps per seeded episode (index rows only)")
	flag.IntVar(&o.rollouts, "rollouts", 1, "rollouts seeded: the big one and this many less one beside it, which the rollouts page lists")
	flag.IntVar(&o.perRo, "rollout-episodes", 1000, "episodes of each rollout beside the big one")
	flag.IntVar(&o.steps, "steps", 50, "steps of the measured episode, each with its own PNG screenshot")
	flag.IntVar(&o.requests, "requests", 200, "requests per measured page")
	flag.IntVar(&o.shotW, "screenshot-width", 1280, "screenshot width")
	flag.IntVar(&o.shotH, "screenshot-height", 720, "screenshot height")
	flag.DurationVar(&o.episodeGoal, "episode-goal", 100*time.Millisecond, "goal for the episode page's p99")
	flag.DurationVar(&o.rolloutGoal, "rollout-goal", 500*time.Millisecond, "goal for the rollout page's p99")
	flag.DurationVar(&o.firstViewGoal, "first-view-goal", time.Second, "goal for the p99 of a rollout page's first view (statistics aggregated)")
	flag.DurationVar(&o.thumbCachedGoal, "thumb-goal", 5*time.Millisecond, "goal for a cached thumbnail's p99")
	flag.BoolVar(&o.reuseSeeded, "reuse-seed", false, "with --dir: measure what a previous run seeded")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, o options) error {
	if o.episodes < 1 || o.steps < 1 || o.requests < 1 || o.perEp < 0 || o.rollouts < 1 || o.perRo < 1 {
		return fmt.Errorf("--episodes, --steps, --requests, --rollouts and --rollout-episodes must be positive")
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "benchviewer-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	others := ""
	if o.rollouts > 1 {
		others = fmt.Sprintf(" and %d more of %d episodes", o.rollouts-1, o.perRo)
	}
	fmt.Printf("benchviewer: %d-episode rollout%s, %d-step episode with %dx%d PNGs; load average %s, %d CPUs\n\n",
		o.episodes, others, o.steps, o.shotW, o.shotH, loadavg(), runtime.NumCPU())
	if !o.reuseSeeded {
		start := time.Now()
		if err := seed(ctx, filepath.Join(dir, "index.db"), o); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		total := o.episodes + (o.rollouts-1)*o.perRo
		fmt.Printf("seeded %d episodes x %d steps (bulk index commits, not gRPC) in %s\n", total, o.perEp,
			time.Since(start).Round(time.Millisecond))
	}

	svc, client, stopSvc, err := serve(ctx, dir)
	if err != nil {
		return err
	}
	defer stopSvc()
	if !o.reuseSeeded {
		start := time.Now()
		if err := writeEpisode(ctx, client, o); err != nil {
			return fmt.Errorf("write the measured episode: %w", err)
		}
		fmt.Printf("wrote episode ep-bench (%d steps, %d distinct PNGs) through AppendSteps in %s\n\n", o.steps, o.steps,
			time.Since(start).Round(time.Millisecond))
	}

	// Server time: from the request reaching the handler to its last byte.
	// The process's CPU time over the same span is printed beside it: on a
	// shared machine the wall time mostly measures the other processes,
	// and requests here run one at a time.
	var mu sync.Mutex
	var last, lastCPU time.Duration
	timed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cpu0 := cpuTime()
		start := time.Now()
		svc.HTTPHandler().ServeHTTP(w, r)
		mu.Lock()
		last, lastCPU = time.Since(start), cpuTime()-cpu0
		mu.Unlock()
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: timed, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	base := "http://" + lis.Addr().String()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var cpus []time.Duration
	get := func(path string, check string) (time.Duration, error) {
		resp, err := hc.Get(base + path)
		if err != nil {
			return 0, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		if check != "" && !bytes.Contains(body, []byte(check)) {
			return 0, fmt.Errorf("GET %s: the page lacks %q", path, check)
		}
		mu.Lock()
		defer mu.Unlock()
		cpus = append(cpus, lastCPU)
		return last, nil
	}
	measure := func(path, check string, n int) ([]time.Duration, error) {
		if _, err := get(path, check); err != nil { // warm-up
			return nil, err
		}
		var ds []time.Duration
		cpus = cpus[:0]
		for range n {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			d, err := get(path, check)
			if err != nil {
				return nil, err
			}
			ds = append(ds, d)
		}
		return ds, nil
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	lastPage := (o.episodes + 49) / 50
	type page struct {
		id, name, path, check string
		goal                  time.Duration
	}
	pages := []page{
		{"viewer-episode-page", fmt.Sprintf("episode page, %d steps", o.steps), "/ui/episodes/ep-bench", `id="step-` + fmt.Sprint(min(o.steps, 50)-1) + `"`, o.episodeGoal},
		{"viewer-rollout-page", fmt.Sprintf("rollout page, %d episodes, page 1", o.episodes), "/ui/rollouts/big", `class="episode-row"`, o.rolloutGoal},
		{"viewer-rollout-last-page", fmt.Sprintf("rollout page, %d episodes, last page (%d)", o.episodes, lastPage), fmt.Sprintf("/ui/rollouts/big?page=%d", lastPage), `class="episode-row"`, o.rolloutGoal},
		{"viewer-rollout-filtered", fmt.Sprintf("rollout page, %d episodes, filtered (domain, status)", o.episodes), "/ui/rollouts/big?domain=chrome&status=failed", `class="episode-row"`, o.rolloutGoal},
		{"viewer-rollouts-page", "rollouts page", "/ui/", `class="rollout-row"`, o.rolloutGoal},
	}
	fmt.Printf("%-58s %8s %10s %10s %10s %10s %10s  %s\n", "page (server time)", "requests", "p50", "p99", "CPU p50", "CPU p99", "goal p99", "verdict")
	failed := false
	for _, p := range pages {
		n := o.requests
		if strings.HasPrefix(p.path, "/ui/rollouts") || p.path == "/ui/" {
			n = max(o.requests/4, 10) // each walks the 100,000-episode rollout
		}
		ds, err := measure(p.path, p.check, n)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		failed = verdict(p.id, p.name, ds, cpus, p.goal) || failed
	}

	// A first view aggregates the rollout's statistics (later views within
	// seconds share them): measured on a fresh viewer each time.
	var cold0, cold0CPU []time.Duration
	for range max(o.requests/10, 5) {
		v, err := storage.OpenViewer(ctx, storage.Config{}, dir, "", nil)
		if err != nil {
			return err
		}
		req := httptest.NewRequest(http.MethodGet, "/ui/rollouts/big", nil)
		rec := httptest.NewRecorder()
		cpu0 := cpuTime()
		start := time.Now()
		v.Handler().ServeHTTP(rec, req)
		d, c := time.Since(start), cpuTime()-cpu0
		v.Close()
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `class="episode-row"`) {
			return fmt.Errorf("first view of the rollout page: %d", rec.Code)
		}
		cold0, cold0CPU = append(cold0, d), append(cold0CPU, c)
	}
	failed = verdict("viewer-rollout-first-view", fmt.Sprintf("rollout page, %d episodes, first view", o.episodes), cold0, cold0CPU, o.firstViewGoal) || failed

	// Thumbnails: the first request shrinks the screenshot, later ones
	// come from the LRU.
	shas, err := screenshotHashes(ctx, client, o.steps)
	if err != nil {
		return err
	}
	var cold, warm []time.Duration
	cpus = cpus[:0]
	for _, sha := range shas {
		d, err := get("/ui/blobs/"+sha+"?scale=2", "")
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	coldCPU := slices.Clone(cpus)
	cpus = cpus[:0]
	for i := range o.requests {
		d, err := get("/ui/blobs/"+shas[i%len(shas)]+"?scale=2", "")
		if err != nil {
			return err
		}
		warm = append(warm, d)
	}
	warmCPU := slices.Clone(cpus)
	cpus = cpus[:0]
	var full []time.Duration
	for i := range min(o.requests, 100) {
		d, err := get("/ui/blobs/"+shas[i%len(shas)], "")
		if err != nil {
			return err
		}
		full = append(full, d)
	}
	verdict("", fmt.Sprintf("thumbnail, first request (decode+shrink %dx%d)", o.shotW, o.shotH), cold, coldCPU, 0)
	failed = verdict("viewer-thumbnail-cached", "thumbnail, cached", warm, warmCPU, o.thumbCachedGoal) || failed
	verdict("", "full screenshot (read + sha256 check)", full, cpus, 0)
	fmt.Printf("\nload average after: %s\n", loadavg())
	if failed {
		fmt.Println("some goals were missed")
	}
	return nil
}

// verdict prints one line, and the goal line of id for make bench, and
// reports whether a goal was missed (goal 0: measured only).
func verdict(id, name string, ds, cpus []time.Duration, goal time.Duration) bool {
	p50, p99 := percentile(ds, 0.50), percentile(ds, 0.99)
	v, g := "measured", "-"
	missed := false
	if goal > 0 {
		g = goal.String()
		v = "PASS"
		if p99 > goal {
			v, missed = "FAIL", true
		}
	}
	fmt.Printf("%-58s %8d %10s %10s %10s %10s %10s  %s\n", name, len(ds), round(p50), round(p99),
		round(percentile(cpus, 0.50)), round(percentile(cpus, 0.99)), g, v)
	if id != "" && goal > 0 {
		benchreport.Goal(os.Stdout, id, fmt.Sprintf("viewer: %s, server time p99 < %v", name, goal),
			fmt.Sprintf("p99 %s, p50 %s", round(p99), round(p50)), benchreport.Judge(!missed))
	}
	return missed
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// percentile is the nearest-rank percentile.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(q*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}

// seed writes the big rollout, and the rollouts beside it, straight into
// the index in large transactions, as benchstorage seeds its query index:
// the pages read only the index, so its steps reference blob records whose
// content is never read. The other rollouts start an hour apart from the
// big one's start on, so the rollouts page lists them newest first as a
// storage that ran for weeks would.
func seed(ctx context.Context, dsn string, o options) error {
	db, err := index.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	blobs := make([]index.BlobRecord, 16)
	for i := range blobs {
		blobs[i] = index.BlobRecord{SHA256: fmt.Sprintf("%064x", i+1), Size: 200 << 10, MediaType: "image/png"}
	}
	statuses := []pb.EpisodeStatus{pb.EpisodeStatus_EPISODE_STATUS_DONE, pb.EpisodeStatus_EPISODE_STATUS_DONE,
		pb.EpisodeStatus_EPISODE_STATUS_FAILED, pb.EpisodeStatus_EPISODE_STATUS_TIMEOUT}
	reasons := []string{"env_error", "model_error", "parse_error"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(b *index.Batch, rollout, id string, e int, start time.Time) {
		status := statuses[e%len(statuses)]
		ep := &pb.Episode{EpisodeId: id, RolloutId: rollout, GroupId: fmt.Sprintf("%s-g-%d", rollout, e/8), TaskId: fmt.Sprintf("task-%d", e/8%369),
			Domain: []string{"os", "chrome", "gimp", "vlc"}[e/8%4], Status: status, Score: float64(e%3) / 2,
			StartTime:   timestamppb.New(start),
			EndTime:     timestamppb.New(start.Add(time.Minute)),
			Instruction: "Open the file manager and rename report.txt to final.txt, then close every window."}
		if rollout == "big" {
			ep.GroupId = fmt.Sprintf("g-%d", e/8)
		}
		if status != pb.EpisodeStatus_EPISODE_STATUS_DONE {
			ep.FailureReason = reasons[e%len(reasons)]
		}
		b.Episodes = append(b.Episodes, index.EpisodeRecord{Episode: ep})
		for i := range o.perEp {
			sh := blobs[(e+i)%len(blobs)]
			b.Steps = append(b.Steps, index.StepRecord{Step: &pb.Step{EpisodeId: id, Index: int32(i),
				Observation: &pb.Observation{Screenshot: &pb.BlobRef{Sha256: sh.SHA256, MediaType: sh.MediaType, Size: sh.Size}},
				ModelCall:   &pb.ModelCall{ResponseText: "pyautogui.click(100, 200)", ModelVersion: int64(e / 25000)}},
				Blobs: []index.BlobRecord{sh}})
		}
	}
	const perTx = 500
	for first := 0; first < o.episodes; first += perTx {
		b := &index.Batch{}
		for e := first; e < min(first+perTx, o.episodes); e++ {
			add(b, "big", fmt.Sprintf("big-%07d", e), e, t0.Add(time.Duration(e)*time.Second))
		}
		if _, err := db.Commit(ctx, []*index.Batch{b}); err != nil {
			return err
		}
	}
	b := &index.Batch{}
	for r := 1; r < o.rollouts; r++ {
		rollout := fmt.Sprintf("r-%05d", r)
		for e := range o.perRo {
			add(b, rollout, fmt.Sprintf("%s-%06d", rollout, e), e, t0.Add(time.Duration(r)*time.Hour+time.Duration(e)*time.Second))
			if len(b.Episodes) == perTx {
				if _, err := db.Commit(ctx, []*index.Batch{b}); err != nil {
					return err
				}
				b = &index.Batch{}
			}
		}
	}
	if len(b.Episodes) > 0 {
		if _, err := db.Commit(ctx, []*index.Batch{b}); err != nil {
			return err
		}
	}
	return nil
}

// serve runs the storage service on dir with its gRPC server on loopback.
func serve(ctx context.Context, dir string) (*storage.Service, pb.StorageClient, func(), error) {
	env := daemon.Env{Logger: zap.NewNop(), Registry: daemon.NewRegistry(), DataDir: dir}
	svc, err := storage.New(ctx, storage.Config{}, env)
	if err != nil {
		return nil, nil, nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Serve(sctx, daemon.ServeConfig{GRPCListener: lis, Logger: env.Logger, Registry: env.Registry}, svc)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	stop := func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			log.Printf("serve: %v", err)
		}
	}
	return svc, pb.NewStorageClient(conn), stop, nil
}

// screenshotPNG draws a desktop-like screenshot: flat panels, a window
// and text-like noise, distinct per step, compressing like a real one.
func screenshotPNG(w, h, step int) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(uint64(step), 7))
	bg := color.RGBA{R: 40, G: 60, B: uint8(90 + step%100), A: 255}
	win := color.RGBA{R: 245, G: 245, B: 245, A: 255}
	for y := range h {
		for x := range w {
			c := bg
			if x > w/8 && x < w*7/8 && y > h/8 && y < h*7/8 {
				c = win
				if y%18 < 11 && x%9 < 6 && rng.IntN(3) > 0 { // rows of "glyphs"
					c = color.RGBA{R: uint8(rng.IntN(80)), G: uint8(rng.IntN(80)), B: uint8(rng.IntN(80)), A: 255}
				}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeEpisode stores the measured episode through AppendSteps.
func writeEpisode(ctx context.Context, c pb.StorageClient, o options) error {
	stream, err := c.AppendSteps(ctx)
	if err != nil {
		return err
	}
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	ep := &pb.Episode{EpisodeId: "ep-bench", RolloutId: "bench", GroupId: "g-bench", TaskId: "task-bench", Domain: "os",
		Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING, StartTime: timestamppb.New(t0),
		Instruction: "Open the file manager and rename report.txt to final.txt."}
	if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
		return err
	}
	for i := range o.steps {
		shot, err := screenshotPNG(o.shotW, o.shotH, i)
		if err != nil {
			return err
		}
		code := fmt.Sprintf("import pyautogui\npyautogui.click(%d, %d)\npyautogui.typewrite('step %d')", 100+i*10, 80+i*5, i)
		st := &pb.Step{EpisodeId: "ep-bench", Index: int32(i),
			Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: shot, MediaType: "image/png"},
				AccessibilityTree: &pb.BlobRef{Data: []byte(strings.Repeat("<node name=\"x\"/>", 500)), MediaType: "application/xml"}},
			ModelCall: &pb.ModelCall{ResponseText: "Thought: the file is in the list.\nAction: " + code, ModelVersion: 1,
				Latency: durationpb.New(800 * time.Millisecond), Usage: &pb.Usage{PromptTokens: 3500, CompletionTokens: 60},
				PromptTokenIds: make([]int32, 3500), CompletionTokenIds: make([]int32, 60)},
			Actions:   []*pb.Action{{ActionType: "CODE", Code: code}},
			Results:   []*pb.ActionResult{{Ok: true}},
			StartTime: timestamppb.New(t0.Add(time.Duration(i) * 3 * time.Second)), Done: i == o.steps-1}
		if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: st}}); err != nil {
			return err
		}
	}
	ep.Status, ep.Score, ep.EndTime = pb.EpisodeStatus_EPISODE_STATUS_DONE, 1, timestamppb.New(t0.Add(3*time.Minute))
	ep.EvaluatorDetailsJson = `{"metric":"exact_match","result":1}`
	if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
		return err
	}
	_, err = stream.CloseAndRecv()
	return err
}

func screenshotHashes(ctx context.Context, c pb.StorageClient, steps int) ([]string, error) {
	resp, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "ep-bench", IncludeSteps: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, st := range resp.GetSteps() {
		out = append(out, st.GetObservation().GetScreenshot().GetSha256())
	}
	if len(out) != steps {
		return nil, fmt.Errorf("episode has %d screenshots, want %d", len(out), steps)
	}
	return out, nil
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadavg is /proc/loadavg's first three fields: the machine is shared,
// so a figure comes with the load it was measured under.
func loadavg() string { return benchreport.LoadAvg() }
