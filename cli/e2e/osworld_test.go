//go:build osworld

// The acceptance run of OSWorld-format tasks on the full desktop guest
// (`go test -tags osworld ./cli/e2e/ -run TestOSWorldFull`): the real
// rollout binary runs examples/osworld, one task per OSWorld domain but
// vs_code, on rolloutmesh/desktop:full through the docker provider, with the
// scripted model of examples/osworld/policy.jsonl answering DONE. Each task's
// setup leaves the state its evaluator asks for, so every episode must score
// 1: a lower score means a setup step, getter or metric misbehaved on the
// real application. Beside each task the test runs a variant whose expected
// side is wrong (another file, another URL, another value: wrongVariants),
// which must score 0, so that a 1 cannot come from a getter or metric that
// passes whatever the guest holds.
//
// The task files name their files on http://rolloutmesh-files.invalid:8000;
// the test serves examples/osworld/files on the docker bridge's gateway
// address, which both the runner on the host (download steps, cloud_file)
// and Chrome inside the guest (chrome_open_tabs) reach, and runs a copy of
// the tree with that address put in. Environment:
//
//	OSWORLD_IMAGE       guest image (default rolloutmesh/desktop:full)
//	OSWORLD_FILES_HOST  address the guest reaches the host on (default the
//	                    bridge network's gateway)
//	OSWORLD_KEEP=1      keep the output and data directories (logged)
//
// Without docker or the image the test skips, and fails when CI is set.

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// filesPlaceholder is the file server's address as the task files in
	// the repository write it; .invalid never resolves, so a task run
	// without the rewrite fails at its first download instead of fetching
	// from somewhere unexpected.
	filesPlaceholder = "http://rolloutmesh-files.invalid:8000"
	defaultImage     = "rolloutmesh/desktop:full"
	// runTimeout bounds the rollout itself; its 18 episodes (9 tasks and
	// their wrong variants) take about two and a half minutes on 2 cores.
	runTimeout = 9 * time.Minute
)

// episodeLine is the part of a rollout.jsonl line the test checks.
type episodeLine struct {
	EpisodeID string  `json:"episode_id"`
	TaskID    string  `json:"task_id"`
	Domain    string  `json:"domain"`
	Status    string  `json:"status"`
	Reward    float64 `json:"reward"`
}

func TestOSWorldFull(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	image := os.Getenv("OSWORLD_IMAGE")
	if image == "" {
		image = defaultImage
	}
	requireImage(t, image)

	src := filepath.Join(root, "examples", "osworld")
	want := indexTasks(t, filepath.Join(src, "test_all.json"))

	host := filesHost(t)
	srv := serveFiles(t, host, filepath.Join(src, "files"))

	work := t.TempDir()
	if os.Getenv("OSWORLD_KEEP") == "1" {
		if work, err = os.MkdirTemp("", "osworld-e2e-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("OSWORLD_KEEP=1: keeping %s", work)
	}
	tree := filepath.Join(work, "tree")
	copyTree(t, src, tree, filesPlaceholder, srv.url)
	wrong := addWrongVariants(t, tree, filesPlaceholder, srv.url)

	bin := filepath.Join(work, "rollout")
	build := exec.Command("go", "build", "-o", bin, "./cli/cmd/rollout")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cli/cmd/rollout: %v\n%s", err, out)
	}

	outDir := filepath.Join(work, "out")
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run",
		"--data", tree,
		"--provider", "docker",
		"--path-to-vm", image,
		"--num-vms", "2",
		"--num-rollouts", "2",
		"--fake-script", filepath.Join(src, "policy.jsonl"),
		"--output-dir", outDir,
		"--data-dir", filepath.Join(work, "data"),
	)
	cmd.Dir = work
	// On timeout, SIGTERM lets rollout stop its guest containers.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 45 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start).Truncate(time.Second)
	t.Logf("rollout run took %s; its output:\n%s", elapsed, tail(string(out), 40))
	if ctx.Err() != nil {
		t.Fatalf("rollout run did not finish within %s", runTimeout)
	}
	if err != nil {
		t.Fatalf("rollout run: %v", err)
	}

	got := readRollout(t, outDir)
	check := func(key string, reward float64) {
		t.Helper()
		e, ok := got[key]
		switch {
		case !ok:
			t.Errorf("%s: no episode in rollout.jsonl", key)
		case e.Status != "EPISODE_STATUS_DONE" || e.Reward != reward:
			t.Errorf("%s (episode %s): status %s, reward %v; want EPISODE_STATUS_DONE, %v", key, e.EpisodeID, e.Status, e.Reward, reward)
		}
		delete(got, key)
	}
	for _, key := range want {
		check(key, 1)
	}
	for _, key := range wrong {
		check(key, 0)
	}
	for key := range got {
		t.Errorf("%s: episode of a task the test did not write", key)
	}

	// The runner never fetches the Chrome pages itself: only Chrome in the
	// guest does, so their requests prove the guest reached the host.
	for _, p := range []string{"/chrome/harbour.html", "/chrome/lighthouse.html", "/chrome/ferry.html"} {
		if srv.hits(p) == 0 {
			t.Errorf("the file server saw no request for %s: Chrome in the guest did not load it", p)
		}
	}
}

// requireImage skips (fails under CI) without docker or the guest image.
func requireImage(t *testing.T, image string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		missing("docker not found: %v", err)
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput(); err != nil {
		missing("no image %s (make guest-image-full): %v: %s", image, err, strings.TrimSpace(string(out)))
	}
}

// indexTasks returns "domain/id" of every task the OSWorld index lists.
func indexTasks(t *testing.T, index string) []string {
	t.Helper()
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string][]string
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("%s: %v", index, err)
	}
	var keys []string
	for d, ids := range idx {
		for _, id := range ids {
			keys = append(keys, d+"/"+id)
		}
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		t.Fatalf("%s lists no task", index)
	}
	return keys
}

// filesHost is the address containers on the default bridge network reach
// the host on: the network's gateway, or docker0's address when the engine
// does not report one.
func filesHost(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("OSWORLD_FILES_HOST"); h != "" {
		return h
	}
	out, err := exec.Command("docker", "network", "inspect", "bridge",
		"--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}").Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if ip := net.ParseIP(f); ip != nil && ip.To4() != nil {
			return f
		}
	}
	iface, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("the bridge network names no gateway and there is no docker0 (set OSWORLD_FILES_HOST): %v", err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		t.Fatalf("docker0 addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address (set OSWORLD_FILES_HOST)")
	return ""
}

// fileServer serves examples/osworld/files and counts requests per path.
type fileServer struct {
	url string

	mu    sync.Mutex
	count map[string]int
}

func (s *fileServer) hits(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[path]
}

func serveFiles(t *testing.T, host, dir string) *fileServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on %s, the address the guest reaches the host on: %v", host, err)
	}
	s := &fileServer{url: "http://" + ln.Addr().String(), count: map[string]int{}}
	files := http.FileServer(http.Dir(dir))
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.count[r.URL.Path]++
			s.mu.Unlock()
			files.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	t.Logf("serving %s at %s", dir, s.url)
	return s
}

// copyTree copies the task tree, putting url in place of placeholder in
// every .json file.
func copyTree(t *testing.T, src, dst, placeholder, url string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".json") {
			data = []byte(strings.ReplaceAll(string(data), placeholder, url))
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
}

// edit sets the JSON value at path (object keys and list indices joined by
// dots) in a task.
type edit struct {
	path  string
	value any
}

// wrongVariants makes each domain's task expect what its setup does not
// leave: its variant must score 0. Files under files/wrong/ are the task's
// own with one value changed, made by the same applications.
var wrongVariants = map[string][]edit{
	// The closed tab is expected open.
	"chrome": {{"evaluator.expected.0.rules.urls", []any{
		filesPlaceholder + "/chrome/harbour.html",
		filesPlaceholder + "/chrome/lighthouse.html",
		filesPlaceholder + "/chrome/ferry.html",
	}}},
	// Another test picture (rgbtestsrc for testsrc).
	"gimp":                {{"evaluator.expected.0.path", filesPlaceholder + "/wrong/logo.png"}},
	"libreoffice_calc":    {{"evaluator.expected.path", filesPlaceholder + "/wrong/sales.xlsx"}},
	"libreoffice_impress": {{"evaluator.expected.path", filesPlaceholder + "/wrong/deck.pptx"}},
	"libreoffice_writer":  {{"evaluator.expected.0.path", filesPlaceholder + "/wrong/report.docx"}},
	"multi_apps":          {{"evaluator.expected.0.path", filesPlaceholder + "/wrong/sales.xlsx"}},
	"os":                  {{"evaluator.expected.0.rules.expected", "1.5\n"}},
	"thunderbird": {{"evaluator.expected.rules.1.selectors", []any{
		"application[name=Thunderbird] push-button[name=Nonexistent]",
	}}},
	"vlc": {{"evaluator.expected.0.rules.file_name", "other.mp4"}},
}

// addWrongVariants writes, beside each task of the tree's index, its
// wrongVariants copy with the id <id>-wrong, adds it to the index, and
// returns the variants' domain/id keys.
func addWrongVariants(t *testing.T, tree, placeholder, url string) []string {
	t.Helper()
	index := filepath.Join(tree, "test_all.json")
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string][]string
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("%s: %v", index, err)
	}
	var keys []string
	for d, ids := range idx {
		edits, ok := wrongVariants[d]
		if !ok {
			t.Fatalf("domain %s has no wrong variant: add one to wrongVariants", d)
		}
		for _, id := range ids {
			p := filepath.Join(tree, "examples", d, id+".json")
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var task map[string]any
			if err := json.Unmarshal(raw, &task); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			for _, e := range edits {
				if err := setPath(task, strings.Split(e.path, "."), e.value); err != nil {
					t.Fatalf("%s/%s: wrong variant: %s: %v", d, id, e.path, err)
				}
			}
			wid := id + "-wrong"
			task["id"] = wid
			task["instruction"] = fmt.Sprint(task["instruction"]) + " (wrong variant)"
			out, err := json.MarshalIndent(task, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out = []byte(strings.ReplaceAll(string(out), placeholder, url))
			if err := os.WriteFile(filepath.Join(tree, "examples", d, wid+".json"), out, 0o644); err != nil {
				t.Fatal(err)
			}
			idx[d] = append(idx[d], wid)
			keys = append(keys, d+"/"+wid)
		}
	}
	out, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, out, 0o644); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	return keys
}

// setPath replaces the value at path inside v, whose containers are
// decoded JSON.
func setPath(v any, path []string, value any) error {
	for i, k := range path {
		last := i == len(path)-1
		switch c := v.(type) {
		case map[string]any:
			// The key must exist even when it is the last: a typo in a
			// path would otherwise add a field nothing reads, and the
			// variant would score 1.
			next, ok := c[k]
			if !ok {
				return fmt.Errorf("no key %q", k)
			}
			if last {
				c[k] = value
				return nil
			}
			v = next
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("no index %q in a list of %d", k, len(c))
			}
			if last {
				c[n] = value
				return nil
			}
			v = c[n]
		default:
			return fmt.Errorf("%q: not an object or a list", k)
		}
	}
	return errors.New("empty path")
}

// readRollout reads the one rollout.jsonl under dir, keyed by domain/task.
func readRollout(t *testing.T, dir string) map[string]episodeLine {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*", "rollout.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("want one %s/*/rollout.jsonl, found %v (%v)", dir, paths, err)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]episodeLine{}
	sc := bufio.NewScanner(f)
	// A line holds the episode's messages and token ids.
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var e episodeLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", paths[0], err)
		}
		key := e.Domain + "/" + e.TaskID
		if _, dup := got[key]; dup {
			t.Errorf("%s: two episodes in rollout.jsonl, want one", key)
		}
		got[key] = e
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", paths[0], err)
	}
	return got
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
