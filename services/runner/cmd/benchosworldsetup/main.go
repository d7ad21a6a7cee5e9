// Command benchosworldsetup measures how long OSWorld tasks take to set
// up on the full guest image (rolloutmesh/desktop:full), from the first
// config step until the task's application is ready for the agent:
//
//   - calc: a workbook downloaded into the guest and opened, until its
//     LibreOffice Calc window is listed;
//   - chrome: Chrome launched and three tabs opened (chrome_open_tabs),
//     until DevTools list them;
//   - vlc: a video downloaded and VLC launched on it, until VLC's HTTP
//     interface answers that it plays.
//
// The config steps are those of published tasks with their URLs pointing
// at a local HTTP server, run by the runner's osworld.Session on a VM
// leased over gRPC from a vmmanager process with a docker pool of the
// image; every run gets a fresh VM (release with reset). Each task runs
// with a cold download cache (empty) and a warm one (its files already
// cached), in rounds that alternate the cases so that neither gets the
// machine's quieter minutes.
//
// Run: cd services/runner && go run ./cmd/benchosworldsetup
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/benchstat"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
)

type options struct {
	runs       int
	image      string
	vmmanager  string
	dir        string
	cpus, memM int
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 5, "runs per task and cache state")
	flag.StringVar(&o.image, "image", "rolloutmesh/desktop:full", "guest image of the docker pool")
	flag.StringVar(&o.vmmanager, "vmmanager", "", "vmmanager binary (default: built from the workspace)")
	flag.StringVar(&o.dir, "dir", "", "work directory (default: a temporary one, removed)")
	flag.IntVar(&o.cpus, "cpus", 2, "CPUs of the guest container")
	flag.IntVar(&o.memM, "memory-mb", 4096, "memory of the guest container in MB")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchosworldsetup:", err)
		os.Exit(1)
	}
}

// sample is one measured setup.
type sample struct {
	steps, ready time.Duration // config steps; steps plus the wait for the app
	download     time.Duration // the download steps alone
	fetched      int64         // files served to the download cache
}

func run(ctx context.Context, o options) error {
	if o.runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "benchosworldsetup-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	start := time.Now()
	f, err := makeFiles(ctx, dir)
	if err != nil {
		return fmt.Errorf("make files: %w", err)
	}
	srv, err := serve(filepath.Dir(f.sheet))
	if err != nil {
		return err
	}
	defer srv.close()
	ts, err := tasks(srv, f)
	if err != nil {
		return err
	}
	// The warm cache is filled once, the way `rollout cache fetch` would.
	warm := &dlcache.Cache{Dir: filepath.Join(dir, "cache-warm")}
	for _, t := range ts {
		for _, u := range t.task.DownloadURLs() {
			if _, err := warm.Get(ctx, u); err != nil {
				return fmt.Errorf("fill the warm cache: %w", err)
			}
		}
	}
	v, err := startVMM(ctx, o.vmmanager, o.image, dir, o.cpus, o.memM)
	if err != nil {
		return err
	}
	defer v.stop()
	fmt.Printf("benchosworldsetup: image %s, guest %d CPUs / %d MB, %dx%d; host %d CPUs, load average %s\n",
		o.image, o.cpus, o.memM, screenW, screenH, runtime.NumCPU(), benchstat.LoadAverage())
	fmt.Printf("files: %s (%s), %s (%s), 3 pages; made and served in %s\n",
		sheetName, sizeOf(f.sheet), videoName, sizeOf(f.video), time.Since(start).Round(100*time.Millisecond))

	states := []string{"cold", "warm"}
	samples := map[string][]sample{}
	// Lease waits: the VM's reset after the previous run (the first, its
	// boot, is left out).
	var waits []time.Duration
	first := true
	for round := 1; round <= o.runs; round++ {
		for _, t := range ts {
			order := states
			if round%2 == 0 {
				// Alternate which state goes first, so that a drift in the
				// machine's load over a round favours neither.
				order = []string{states[1], states[0]}
			}
			for _, state := range order {
				cache := warm
				if state == "cold" {
					cache = &dlcache.Cache{Dir: filepath.Join(dir, fmt.Sprintf("cache-cold-%d-%s", round, t.task.ID))}
				}
				s, wait, err := once(ctx, v, t, cache, srv, filepath.Join(dir, "episodes"))
				if err != nil {
					return fmt.Errorf("round %d, %s, %s cache: %w\nvmmanager: %s", round, t.name, state, err, v.log.tail())
				}
				if !first {
					waits = append(waits, wait)
				}
				first = false
				samples[t.name+"/"+state] = append(samples[t.name+"/"+state], s)
				fmt.Fprintf(os.Stderr, "round %d %-34s %s: download %s, steps %s, ready %s\n", round, t.name, state, fmtD(s.download), fmtD(s.steps), fmtD(s.ready))
			}
		}
	}

	fmt.Printf("\n%d runs per task and cache state, each on a fresh VM (released with reset between runs).\n", o.runs)
	fmt.Printf("p99 is nearest-rank: with %d runs it is the slowest run.\n\n", o.runs)
	row := "%-34s | %9s %9s %9s %9s %7s | %9s %9s %9s %9s %7s\n"
	fmt.Printf("%-34s | %-47s | %s\n", "", "cold cache (empty)", "warm cache (files cached)")
	fmt.Printf(row, "task", "ready p50", "ready p99", "steps p50", "dl p50", "fetched", "ready p50", "ready p99", "steps p50", "dl p50", "fetched")
	for _, t := range ts {
		var cols []any
		for _, state := range states {
			ss := samples[t.name+"/"+state]
			var steps, ready, dl []time.Duration
			var fetched int64
			for _, s := range ss {
				steps, ready, dl, fetched = append(steps, s.steps), append(ready, s.ready), append(dl, s.download), fetched+s.fetched
			}
			dlCol := "-"
			if len(t.task.DownloadURLs()) > 0 {
				dlCol = fmtD(benchstat.Percentile(dl, 50))
			}
			cols = append(cols, fmtD(benchstat.Percentile(ready, 50)), fmtD(benchstat.Percentile(ready, 99)), fmtD(benchstat.Percentile(steps, 50)), dlCol,
				fmt.Sprintf("%d/run", fetched/int64(len(ss))))
		}
		fmt.Printf(row, append([]any{t.name}, cols...)...)
	}
	fmt.Println()
	fmt.Println("steps: the task's config steps through osworld.Session.Run (downloads through the download cache,")
	fmt.Println("uploads into the guest, launches, chrome_open_tabs); ready: from the first step until the application")
	fmt.Println("is ready (calc: its window in wmctrl -l; chrome: DevTools list the three tabs; vlc: status.xml says playing).")
	fmt.Println("dl: the download steps alone (fetch into the download cache when cold, then the upload into the guest).")
	fmt.Println("fetched: files the HTTP server sent to the download cache per run (cold: every download; warm: none).")
	fmt.Println("The chrome task downloads nothing, so its cold and warm rows differ by noise only.")
	fmt.Println("The tasks, modelled on published ones:")
	for _, t := range ts {
		fmt.Printf("  %-34s %s\n", t.name, t.modelOn)
	}
	fmt.Printf("VM hand-off before each run (release with reset until the next lease): p50 %s, p99 %s.\n",
		fmtD(benchstat.Percentile(waits, 50)), fmtD(benchstat.Percentile(waits, 99)))
	fmt.Printf("Load average at the end: %s; whole benchmark %s.\n", benchstat.LoadAverage(), time.Since(start).Round(time.Second))
	return nil
}

// once leases the VM, runs the task's config steps through a Session with
// the given download cache, waits for the application, and releases the
// VM with a reset. It returns the sample and how long the lease took.
func once(ctx context.Context, v *vmm, t benchTask, cache *dlcache.Cache, srv *server, episodes string) (sample, time.Duration, error) {
	var s sample
	t0 := time.Now()
	l, err := v.acquire(ctx)
	if err != nil {
		return s, 0, fmt.Errorf("acquire lease: %w", err)
	}
	wait := time.Since(t0)
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := v.release(rctx, l); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
	}()
	g, err := guest.New(l.Endpoint, l.GuestToken)
	if err != nil {
		return s, wait, err
	}
	g.Ports = l.Ports
	if err := g.Wait(ctx, 60, time.Second); err != nil {
		return s, wait, fmt.Errorf("wait for guest: %w", err)
	}
	if err := os.MkdirAll(episodes, 0o755); err != nil {
		return s, wait, err
	}
	epDir, err := os.MkdirTemp(episodes, "episode-")
	if err != nil {
		return s, wait, err
	}
	defer os.RemoveAll(epDir)
	sess := &osworld.Session{
		Guest: g, TaskID: t.task.ID, CacheDir: epDir, ClientPassword: l.ClientPassword, Downloads: cache,
		ScreenWidth: int(l.ScreenWidth), ScreenHeight: int(l.ScreenHeight),
	}
	before := srv.downloads.Load()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	// One step at a time, as Session.Run loops over them, to time the
	// downloads apart.
	for i, st := range t.task.Config {
		t0 := time.Now()
		if err := sess.Run(sctx, t.task.Config[i:i+1]); err != nil {
			return s, wait, fmt.Errorf("config step %d: %w", i, err)
		}
		if st.Type == "download" {
			s.download += time.Since(t0)
		}
	}
	s.steps = time.Since(start)
	if err := t.ready(sctx, g); err != nil {
		return s, wait, err
	}
	s.ready = time.Since(start)
	s.fetched = srv.downloads.Load() - before
	return s, wait, nil
}

func fmtD(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func sizeOf(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "?"
	}
	if st.Size() >= 1<<20 {
		return fmt.Sprintf("%.1f MB", float64(st.Size())/(1<<20))
	}
	return fmt.Sprintf("%d KB", (st.Size()+512)>>10)
}
