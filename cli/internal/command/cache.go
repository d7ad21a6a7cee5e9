package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
)

const cacheUsage = `usage: rollout cache fetch --data TASKS [--data-dir DIR | --cache-dir DIR]
       rollout cache import --data TASKS [--data-dir DIR | --cache-dir DIR] OSWORLD_CACHE_DIR`

// cmdCache fills the runners' download cache, so that OSWorld tasks run
// without fetching their files for every episode, or with --offline behind
// a firewall.
func cmdCache(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "fetch" && args[0] != "import") {
		fmt.Fprintln(stderr, cacheUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil
		}
		return usageError{errors.New("rollout cache: the verbs are fetch and import")}
	}
	verb := args[0]
	fs := flag.NewFlagSet("rollout cache "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "task file or directory (an OSWorld evaluation_examples tree included) whose files to cache")
	index := fs.String("index", "", "the OSWorld index file inside --data (default test_all.json)")
	dataDir := fs.String("data-dir", ".rolloutmesh", "data directory of the embedded mesh whose runner uses the cache (rollout run --data-dir)")
	cacheDir := fs.String("cache-dir", "", "the runner's cache directory (its --cache-dir); default <data-dir>/runner/cache")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *data == "" {
		return usageError{fmt.Errorf("rollout cache %s: --data is required", verb)}
	}
	if verb == "import" && fs.NArg() != 1 {
		return usageError{errors.New("rollout cache import: give the OSWorld cache folder (holding <task_id>/<file>) as the one argument")}
	}
	if verb == "fetch" && fs.NArg() > 0 {
		return usageError{fmt.Errorf("rollout cache fetch: unexpected argument %q", fs.Arg(0))}
	}
	tasks, err := coordinator.LoadTasks(ctx, *data, *index)
	if err != nil {
		return fmt.Errorf("load tasks: %w", err)
	}
	specs := map[string][]byte{}
	var order []string
	for _, t := range tasks {
		if m := t.GetEnvMode(); m != "" && m != "desktop" && m != "osworld" {
			continue
		}
		specs[t.GetId()] = []byte(t.GetSpecJson())
		order = append(order, t.GetId())
	}
	dir := mesh.CacheDir(*dataDir, *cacheDir)
	if verb == "import" {
		res, err := runner.ImportOSWorldCache(ctx, dir, fs.Arg(0), specs, order)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "imported %d files into %s (%d were there already); %d files the tasks name are not in %s\n",
			res.Imported, runner.DownloadDir(dir), res.Present, len(res.Absent), fs.Arg(0))
		return nil
	}
	urls, err := runner.TaskURLs(specs, order)
	if err != nil {
		return err
	}
	bar := newProgressBar(stderr, len(urls))
	var fetched, cached int
	var failed []string
	runner.FetchURLs(ctx, dir, urls, func(i int, r runner.FetchResult) {
		switch {
		case r.Err != nil:
			failed = append(failed, r.URL+": "+r.Err.Error())
		case r.Cached:
			cached++
		default:
			fetched++
		}
		bar.set(i+1, r.URL)
	})
	bar.done()
	fmt.Fprintf(stdout, "%d URLs for %d tasks in %s: %d downloaded, %d cached already, %d failed\n",
		len(urls), len(order), runner.DownloadDir(dir), fetched, cached, len(failed))
	if len(failed) > 0 {
		fmt.Fprintf(stdout, "failed:\n  %s\n", strings.Join(failed, "\n  "))
		return fmt.Errorf("%d of %d files could not be fetched", len(failed), len(urls))
	}
	return nil
}

// progressBar draws "[#####     ] 12/40 url" on a terminal, redrawn in
// place; elsewhere (a log, a pipe) it prints nothing until done.
type progressBar struct {
	w     io.Writer
	total int
	tty   bool
}

func newProgressBar(w io.Writer, total int) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, total: total, tty: tty}
}

const barWidth = 30

func (b *progressBar) set(n int, what string) {
	if !b.tty || b.total == 0 {
		return
	}
	fill := barWidth * n / b.total
	if len(what) > 60 {
		what = "..." + what[len(what)-57:]
	}
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %d/%d %s", strings.Repeat("#", fill), strings.Repeat(" ", barWidth-fill), n, b.total, what)
}

func (b *progressBar) done() {
	if b.tty {
		fmt.Fprintln(b.w)
	}
}
