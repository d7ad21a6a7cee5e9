package osworld

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// downloads is the store this session downloads through: Downloads, else
// one in <CacheDir>/../downloads (the same place as the runner's default,
// since a session's CacheDir is <cache-dir>/<task id>) with the session's
// limits.
func (s *Session) downloads() (*dlcache.Cache, error) {
	if s.Downloads != nil {
		return s.Downloads, nil
	}
	if s.CacheDir == "" {
		return nil, fmt.Errorf("no download cache: the session has no cache directory")
	}
	return &dlcache.Cache{
		Dir:     filepath.Join(filepath.Dir(filepath.Clean(s.CacheDir)), "downloads"),
		HTTP:    s.HTTP,
		MaxSize: s.maxDownload(),
		Timeout: s.DownloadTimeout,
	}, nil
}

// source returns a local file holding u's content: the download store's
// copy of an http(s) URL, or, for a file:// URL or a plain path (a local
// mirror), that file once checked to be a regular file.
func (s *Session) source(ctx context.Context, u string) (string, error) {
	if isHTTP(u) {
		c, err := s.downloads()
		if err != nil {
			return "", fmt.Errorf("download %s: %w", u, err)
		}
		return c.Get(ctx, u)
	}
	p := strings.TrimPrefix(u, "file://")
	f, err := boundedread.Open(p)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", u, err)
	}
	f.Close()
	return p, nil
}

// fileUploader is a guest client that streams an upload from a file.
type fileUploader interface {
	UploadFile(ctx context.Context, path string, src *os.File) error
}

// upload puts the local file src at dst in the guest, streamed when the
// client can (a task's file may be a large video, and slots upload at
// once).
func (s *Session) upload(ctx context.Context, dst, src string) error {
	up, ok := s.Guest.(fileUploader)
	if !ok {
		data, err := boundedread.ReadFile(src, s.maxDownload())
		if err != nil {
			return err
		}
		return s.Guest.Upload(ctx, dst, data)
	}
	f, err := boundedread.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > s.maxDownload() {
		return fmt.Errorf("%s: larger than %d bytes", src, s.maxDownload())
	}
	return up.UploadFile(ctx, dst, f)
}

func isHTTP(u string) bool {
	return strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")
}

// copyFile copies src to dst through a temporary file and a rename, so dst
// is complete or absent, and a dst that is a hard link into the download
// store is replaced rather than written through.
func copyFile(src, dst string, limit int64) error {
	in, err := boundedread.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomic(dst, io.LimitReader(in, limit+1), limit)
}

func writeAtomic(dst string, r io.Reader, limit int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	n, err := io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > limit {
		return fmt.Errorf("%s: larger than %d bytes", dst, limit)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// linkOrCopy puts the stored file src at dst: a hard link when both are on
// one file system (the store's files are read-only, and writeCache
// replaces rather than writes through), a copy otherwise.
func linkOrCopy(src, dst string, limit int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// A name of its own: two episodes of one task share its cache
	// directory.
	tmp := filepath.Join(filepath.Dir(dst), ".link-"+rand.Text())
	if err := os.Link(src, tmp); err == nil {
		if err := os.Rename(tmp, dst); err != nil {
			os.Remove(tmp)
			return err
		}
		return nil
	}
	return copyFile(src, dst, limit)
}

// DownloadURLs lists the URLs a task fetches on the host, in task order,
// each once: its config and postconfig download steps (and the database
// update_browse_history starts from) and its cloud_file getters, then the
// files its googledrive steps upload. The offline check and a cache
// warm-up read it.
func (t Task) DownloadURLs() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.cacheSources() {
		if !seen[s.URL] {
			seen[s.URL] = true
			out = append(out, s.URL)
		}
	}
	for _, u := range t.driveUploadURLs() {
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// cacheSources lists the task's host-fetched files with the name OSWorld
// gives each in cache/<task_id>/: <uuid5(url)>_<basename of the guest path>
// for a download step, dest for a cloud_file getter.
func (t Task) cacheSources() []dlcache.Source {
	var out []dlcache.Source
	for _, st := range append(append([]Step{}, t.Config...), t.Evaluator.Postconfig...) {
		if st.Type == "update_browse_history" {
			// Its empty History database, which OSWorld keeps as
			// cache/<task_id>/history_new.sqlite.
			out = append(out, dlcache.Source{TaskID: t.ID, Name: "history_new.sqlite", URL: emptyHistoryURL})
			continue
		}
		if st.Type != "download" {
			continue
		}
		var p struct {
			Files []struct {
				URL  string `json:"url"`
				Path string `json:"path"`
			} `json:"files"`
		}
		if json.Unmarshal(st.Parameters, &p) != nil {
			continue
		}
		for _, f := range p.Files {
			if f.URL != "" {
				out = append(out, dlcache.Source{TaskID: t.ID, Name: dlcache.UUID5URL(f.URL) + "_" + metric.PyBasename(f.Path), URL: f.URL})
			}
		}
	}
	for i := range t.Evaluator.Func {
		for _, g := range []map[string]any{t.Evaluator.Result[i], t.Evaluator.Expected[i]} {
			if g == nil || str(g, "type") != "cloud_file" {
				continue
			}
			paths, dests, err := pathDests(g)
			if err != nil {
				continue
			}
			for j := range paths {
				out = append(out, dlcache.Source{TaskID: t.ID, Name: dests[j], URL: paths[j]})
			}
		}
	}
	return out
}

// CheckOffline fails, naming the first missing URL, when the download
// store c is offline and lacks a URL the task fetches; the desktop
// environment calls it before an episode starts, so no VM or model call is
// spent on a task that would fail at its first download. A nil c is the
// per-session default store, which is never offline.
func CheckOffline(t Task, c *dlcache.Cache) error {
	if c == nil || !c.Offline {
		return nil
	}
	var missing []string
	for _, u := range t.DownloadURLs() {
		if !isHTTP(u) {
			continue
		}
		if _, _, ok := c.Lookup(u); !ok {
			missing = append(missing, u)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("offline: %s is not in the download cache %s", missing[0], c.Dir)
	}
	return fmt.Errorf("offline: %s and %d more URLs are not in the download cache %s", missing[0], len(missing)-1, c.Dir)
}

// ImportOSWorldCache stores the files of an OSWorld cache folder (dir,
// holding cache/<task_id>/<file>) under the URLs that tasks name, so those
// tasks run offline.
func ImportOSWorldCache(ctx context.Context, c *dlcache.Cache, dir string, tasks []Task) (dlcache.ImportResult, error) {
	var sources []dlcache.Source
	for _, t := range tasks {
		for _, s := range t.cacheSources() {
			// A name OSWorld could not have written (empty, or a path)
			// cannot be in the folder either.
			if s.TaskID != "" && s.Name != "" && filepath.Base(s.Name) == s.Name && isHTTP(s.URL) {
				sources = append(sources, s)
			}
		}
	}
	return c.Import(ctx, dir, sources)
}
