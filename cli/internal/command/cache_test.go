package command

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCacheFetch: `rollout cache fetch` downloads each file a task set
// names once, says what it did, and fails naming a URL that cannot be
// fetched; `rollout cache import` takes an OSWorld cache folder.
func TestCacheFetch(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing.xlsx" {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		fmt.Fprintf(w, "content of %s", r.URL.Path)
	}))
	defer srv.Close()
	dir := t.TempDir()
	task := func(id string, files ...string) string {
		var fs []string
		for _, f := range files {
			fs = append(fs, fmt.Sprintf(`{"url": "%s/%s", "path": "/home/user/%s"}`, srv.URL, f, f))
		}
		// One line: the set is JSONL.
		return fmt.Sprintf(`{"id": "%s", "instruction": "x", "config": [{"type": "download", "parameters": {"files": [%s]}}], `+
			`"evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"}, `+
			`"expected": {"type": "cloud_file", "path": "%s/gold.xlsx", "dest": "gold.xlsx"}}}`, id, strings.Join(fs, ","), srv.URL)
	}
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte(task("t1", "a.xlsx")+"\n"+task("t2", "a.xlsx", "b.xlsx")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(dir, "cache")
	run := func(args ...string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"cache"}, args...), &stdout, &stderr)
		return stdout.String(), err
	}
	out, err := run("fetch", "--data", good, "--cache-dir", cacheDir)
	if err != nil {
		t.Fatalf("cache fetch: %v\n%s", err, out)
	}
	if !strings.Contains(out, "3 URLs for 2 tasks") || !strings.Contains(out, "3 downloaded, 0 cached already, 0 failed") {
		t.Errorf("first fetch said:\n%s", out)
	}
	if hits.Load() != 3 {
		t.Errorf("server saw %d downloads, want 3 (a.xlsx, b.xlsx, gold.xlsx once each)", hits.Load())
	}
	out, err = run("fetch", "--data", good, "--cache-dir", cacheDir)
	if err != nil || !strings.Contains(out, "0 downloaded, 3 cached already") || hits.Load() != 3 {
		t.Errorf("second fetch: %v, %d downloads in all, said:\n%s", err, hits.Load(), out)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(task("t3", "missing.xlsx")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run("fetch", "--data", bad, "--cache-dir", cacheDir)
	if err == nil || !strings.Contains(out, srv.URL+"/missing.xlsx") {
		t.Errorf("fetch of a 404: err %v, want an error naming the URL; said:\n%s", err, out)
	}

	// An OSWorld cache folder: cache/<task_id>/<uuid5(url)>_<name> for
	// download steps, cache/<task_id>/<dest> for cloud_file getters.
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(strings.ReplaceAll(task("t4", "c.xlsx"), srv.URL, "http://files.invalid")), 0o644); err != nil {
		t.Fatal(err)
	}
	osw := filepath.Join(dir, "osworld-cache", "t4")
	if err := os.MkdirAll(osw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(osw, "gold.xlsx"), []byte("gold"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run("import", "--data", other, "--cache-dir", cacheDir, filepath.Dir(osw))
	if err != nil || !strings.Contains(out, "imported 1 files") || !strings.Contains(out, "1 files the tasks name are not in") {
		t.Errorf("import: %v, said:\n%s", err, out)
	}
	if _, err := run("import", "--data", other); ExitCode(err) != 2 {
		t.Errorf("import without a folder: exit %d (%v), want 2", ExitCode(err), err)
	}
}
