package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
)

// DownloadDir is where a runner with cache directory cacheDir keeps its
// download cache: the files OSWorld tasks fetch, one per URL.
func DownloadDir(cacheDir string) string { return filepath.Join(cacheDir, "downloads") }

// TaskURLs lists, each once and in task order, the http(s) URLs the
// OSWorld tasks (their JSON) fetch on the host: download steps and
// cloud_file getters. A task that does not parse is an error naming it.
func TaskURLs(specs map[string][]byte, order []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, id := range order {
		t, err := osworld.ParseTask(specs[id])
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", id, err)
		}
		for _, u := range t.DownloadURLs() {
			if !seen[u] && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// FetchResult is the fate of one URL in FetchURLs.
type FetchResult struct {
	URL string
	// Cached is true when the file was in the cache already.
	Cached bool
	Err    error
}

// FetchURLs puts every URL in the download cache of cacheDir that is not
// there yet, one at a time (the store's limits apply: size cap, timeout,
// retries), and reports each as it finishes.
func FetchURLs(ctx context.Context, cacheDir string, urls []string, report func(i int, r FetchResult)) {
	c := &dlcache.Cache{Dir: DownloadDir(cacheDir)}
	for i, u := range urls {
		if ctx.Err() != nil {
			report(i, FetchResult{URL: u, Err: ctx.Err()})
			continue
		}
		if _, _, ok := c.Lookup(u); ok {
			report(i, FetchResult{URL: u, Cached: true})
			continue
		}
		_, err := c.Get(ctx, u)
		report(i, FetchResult{URL: u, Err: err})
	}
}

// ImportResult says what ImportOSWorldCache did.
type ImportResult struct {
	Imported, Present int
	// Absent are "task_id/name" of files the folder does not hold.
	Absent []string
}

// ImportOSWorldCache stores the files of an OSWorld cache folder
// (dir/<task_id>/<file>) in the download cache of cacheDir under the URLs
// the tasks name for them, so those tasks run with --offline.
func ImportOSWorldCache(ctx context.Context, cacheDir, dir string, specs map[string][]byte, order []string) (ImportResult, error) {
	var tasks []osworld.Task
	for _, id := range order {
		t, err := osworld.ParseTask(specs[id])
		if err != nil {
			return ImportResult{}, fmt.Errorf("task %s: %w", id, err)
		}
		if t.ID == "" {
			t.ID = id
		}
		tasks = append(tasks, t)
	}
	res, err := osworld.ImportOSWorldCache(ctx, &dlcache.Cache{Dir: DownloadDir(cacheDir)}, dir, tasks)
	out := ImportResult{Imported: len(res.Imported), Present: len(res.Present)}
	for _, a := range res.Absent {
		out.Absent = append(out.Absent, a.TaskID+"/"+a.Name)
	}
	return out, err
}
