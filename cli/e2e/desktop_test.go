//go:build desktop

// The fresh-VM desktop acceptance run (`go test -tags desktop ./cli/e2e/
// -run TestDesktopFreshVMs`): the real rollout binary runs two typing tasks
// in OSWorld's format, each DESKTOP_EPISODES times (default 100), on
// process VMs (desktopd + Xvfb on this host) and on docker VMs
// (rolloutmesh/desktop:dev), with the scripted model of
// examples/fakellm/demo.jsonl and testdata/desktop/policy.jsonl. The tasks:
//
//   - examples/tasks/desktop-xterm-file.json, the bundled demo task: type a
//     shell command into xterm that writes a file;
//   - testdata/desktop/desktop-mousepad-save.json: type a sentence into
//     Mousepad opened on a named file and save it with ctrl+s.
//
// Both are evaluated by reading the file back from the guest (exact_match;
// the Mousepad task's postconfig first waits up to 30 s for the file to be
// written, since a slow guest may still be drawing the typed text when the
// scripted model says DONE), so a keystroke lost anywhere (the desktop not taking input yet, the window
// not focused, typing racing the X server) is a failed episode. Every
// episode must score 1 on its first attempt, its evaluation must have read
// exactly the expected text, and every episode must run on a VM leased for
// it alone and reset since its previous lease (checked in vmmanager's log).
// Environment:
//
//	DESKTOP_EPISODES   episodes per task and provider (default 100)
//	DESKTOP_VMS        VMs per provider, also the parallel episodes (default 8)
//	DESKTOP_PROVIDERS  comma-separated subset of process,docker,qemu (default all three)
//	DESKTOP_IMAGE      docker guest image (default rolloutmesh/desktop:dev)
//	DESKTOP_QEMU_IMAGE qemu guest image (default .cache/guest/desktop.qcow2, make guest-qcow2)
//	DESKTOP_QEMU_EPISODES, DESKTOP_QEMU_VMS  the same for qemu (default 20 and 4:
//	                   its guests run under software emulation here, ~10x slower)
//	DESKTOP_PROCESS_EPISODES, DESKTOP_DOCKER_EPISODES  one provider's episodes
//	                   per task (default DESKTOP_EPISODES); CI runs fewer on
//	                   docker VMs (.ci/run)
//	DESKTOP_KEEP=1     keep the work directory (it is kept on failure anyway)
//
// Without Xvfb, openbox, xterm and mousepad (process), docker and the image
// (docker), or qemu and its image (qemu) the test skips, and fails when CI
// is set.

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// desktopTask is one task of the run and what its evaluation must read.
type desktopTask struct {
	id   string
	file string // relative to the repository
	want string // the file's content in the guest after a good episode
}

var desktopTasks = []desktopTask{
	{"desktop-xterm-file", "examples/tasks/desktop-xterm-file.json", "hello from rolloutmesh\n"},
	{"desktop-mousepad-save", "cli/e2e/testdata/desktop/desktop-mousepad-save.json", "The quick brown fox jumps over the lazy dog, 42 times!"},
}

// desktopLine is the part of a rollout.jsonl line the test checks.
type desktopLine struct {
	EpisodeID  string  `json:"episode_id"`
	TaskID     string  `json:"task_id"`
	Attempt    int     `json:"attempt"`
	Status     string  `json:"status"`
	Reward     float64 `json:"reward"`
	Reason     string  `json:"failure_reason"`
	NumSteps   int     `json:"num_steps"`
	Evaluation struct {
		Results []any `json:"results"`
	} `json:"evaluation"`
}

// succeeded says whether the episode scored 1 on its first attempt with
// its evaluation reading exactly what task wants, and what it read.
func (e desktopLine) succeeded(task desktopTask) (string, bool) {
	got := ""
	if len(e.Evaluation.Results) > 0 {
		got = fmt.Sprint(e.Evaluation.Results[0])
	}
	return got, e.TaskID == task.id && e.Status == "EPISODE_STATUS_DONE" && e.Reward == 1 && e.Attempt == 1 && got == task.want
}

func TestDesktopFreshVMs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	episodes := envInt(t, "DESKTOP_EPISODES", 100)
	vms := envInt(t, "DESKTOP_VMS", 8)
	image := os.Getenv("DESKTOP_IMAGE")
	if image == "" {
		image = "rolloutmesh/desktop:dev"
	}
	providers := []string{"process", "docker", "qemu"}
	if p := os.Getenv("DESKTOP_PROVIDERS"); p != "" {
		providers = strings.Split(p, ",")
	}

	work, err := os.MkdirTemp("", "desktop-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("DESKTOP_KEEP") == "1" {
			t.Logf("work directory kept: %s", work)
			return
		}
		os.RemoveAll(work)
	})

	// desktopd next to rollout, where the process provider looks first.
	bin := filepath.Join(work, "bin")
	for _, pkg := range []string{"./cli/cmd/rollout", "./guest/desktopd/cmd/desktopd"} {
		build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}

	data := filepath.Join(work, "tasks")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, task := range desktopTasks {
		raw, err := os.ReadFile(filepath.Join(root, task.file))
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &head); err != nil || head.ID != task.id {
			t.Fatalf("%s: id %q (%v), want %q", task.file, head.ID, err, task.id)
		}
		if err := os.WriteFile(filepath.Join(data, task.id+".json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// demo.jsonl answers the bundled task as `make demo` does; the
	// mousepad task's rules come after it.
	var policy []byte
	for _, f := range []string{"examples/fakellm/demo.jsonl", "cli/e2e/testdata/desktop/policy.jsonl"} {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		policy = append(append(policy, raw...), '\n')
	}
	policyFile := filepath.Join(work, "policy.jsonl")
	if err := os.WriteFile(policyFile, policy, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, provider := range providers {
		t.Run(provider, func(t *testing.T) {
			var extra []string
			episodes, vms := episodes, vms
			switch provider {
			case "process", "docker":
				episodes = envInt(t, "DESKTOP_"+strings.ToUpper(provider)+"_EPISODES", episodes)
			}
			switch provider {
			case "process":
				for _, prog := range []string{"Xvfb", "openbox", "xterm", "mousepad"} {
					if _, err := exec.LookPath(prog); err != nil {
						desktopMissing(t, "%s not found (scripts/install-deps.sh): %v", prog, err)
					}
				}
			case "docker":
				if _, err := exec.LookPath("docker"); err != nil {
					desktopMissing(t, "docker not found: %v", err)
				}
				if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", image).CombinedOutput(); err != nil {
					desktopMissing(t, "no image %s (make guest-image): %v: %s", image, err, strings.TrimSpace(string(out)))
				}
				extra = []string{"--path-to-vm", image}
			case "qemu":
				if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
					desktopMissing(t, "qemu-system-x86_64 not found (scripts/install-deps.sh): %v", err)
				}
				img := os.Getenv("DESKTOP_QEMU_IMAGE")
				if img == "" {
					img = filepath.Join(root, ".cache", "guest", "desktop.qcow2")
				}
				if _, err := os.Stat(img); err != nil {
					desktopMissing(t, "no qemu image (make guest-qcow2): %v", err)
				}
				extra = []string{"--path-to-vm", img}
				episodes = envInt(t, "DESKTOP_QEMU_EPISODES", 20)
				vms = envInt(t, "DESKTOP_QEMU_VMS", 4)
			default:
				t.Fatalf("DESKTOP_PROVIDERS: unknown provider %q (want process, docker or qemu)", provider)
			}
			runDesktop(t, filepath.Join(bin, "rollout"), filepath.Join(work, provider), data, policyFile, provider, extra, episodes, vms)
		})
	}
}

func runDesktop(t *testing.T, rollout, dir, data, policy, provider string, extra []string, episodes, vms int) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "out")
	// Episodes of 4-5 s on M VMs, plus boots; generous for a loaded
	// machine. A qemu guest under software emulation boots in 90 s to 4
	// min and runs an episode in 10-30 s when the host's cores are busy. A
	// docker VM's reset recreates its container: on a machine where
	// system calls cost more (session 15's, page-table isolation on) an
	// episode and its reset took 25 s per VM, against 9 s in CI before.
	perEpisode, boot := 20*time.Second, 2*time.Minute
	switch provider {
	case "qemu":
		// Boots took 3.5-4 min on a 2-core host also building Go, and the
		// first Mousepad of a fresh guest over 30 s (the runner waits for
		// it while it starts).
		perEpisode, boot = 40*time.Second, 5*time.Minute
	case "docker":
		perEpisode = 40 * time.Second
	}
	timeout := boot + time.Duration(episodes*len(desktopTasks))*perEpisode/time.Duration(vms)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{"run",
		"--data", data,
		"--provider", provider,
		"--num-vms", strconv.Itoa(vms),
		"--num-rollouts", strconv.Itoa(vms),
		"--group-size", strconv.Itoa(episodes),
		"--fake-script", policy,
		"--output-dir", outDir,
		"--data-dir", filepath.Join(dir, "mesh"),
		// vmmanager's lease log proves every episode had a fresh VM.
		"--log-level", "info",
	}, extra...)
	cmd := exec.CommandContext(ctx, rollout, args...)
	cmd.Dir = dir
	logPath := filepath.Join(dir, "rollout.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// On timeout, SIGTERM lets rollout stop its VMs.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 45 * time.Second
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	logFile.Close()
	summary := desktopSummary(t, logPath)
	t.Logf("%s: rollout run of %d tasks × %d episodes on %d VMs took %s\n%s",
		provider, len(desktopTasks), episodes, vms, elapsed.Truncate(100*time.Millisecond), summary)
	if ctx.Err() != nil {
		t.Fatalf("rollout run did not finish within %s (log: %s)", timeout, logPath)
	}
	if err != nil {
		t.Fatalf("rollout run: %v (log: %s)", err, logPath)
	}

	lines, rolloutDir := readDesktopRollout(t, outDir)
	want := map[string]desktopTask{}
	for _, task := range desktopTasks {
		want[task.id] = task
	}
	ok := map[string]int{}
	total := map[string]int{}
	var failed, failedIDs []string
	for _, e := range lines {
		task, known := want[e.TaskID]
		if !known {
			t.Errorf("episode %s of task %q, which the test did not write", e.EpisodeID, e.TaskID)
			continue
		}
		total[e.TaskID]++
		got, good := e.succeeded(task)
		if good {
			ok[e.TaskID]++
			continue
		}
		failedIDs = append(failedIDs, e.EpisodeID)
		failed = append(failed, fmt.Sprintf("%s (task %s, attempt %d): status %s, reward %v, %d steps, reason %q, evaluation read %q, want %q; screenshots: %s",
			e.EpisodeID, e.TaskID, e.Attempt, e.Status, e.Reward, e.NumSteps, e.Reason, got, task.want,
			strings.Join(screenshots(rolloutDir, e.EpisodeID), " ")))
	}
	for _, task := range desktopTasks {
		t.Logf("%s: %s: %d/%d episodes succeeded (%d in rollout.jsonl)", provider, task.id, ok[task.id], episodes, total[task.id])
		if ok[task.id] != episodes {
			t.Errorf("%s: %s: %d of %d episodes succeeded on the first attempt, want every one", provider, task.id, ok[task.id], episodes)
		}
	}
	sort.Strings(failed)
	for _, f := range failed {
		t.Errorf("failed episode %s", f)
	}
	if len(failed) > 0 {
		// CI keeps the test's output, not its work directory: the
		// services' lines about the failed episodes go with it.
		t.Logf("what the services logged about the failed episodes:\n%s", episodeLines(t, logPath, failedIDs))
	}
	checkFreshLeases(t, logPath, lines, vms)
}

// leaseEvent is a vmmanager pool log line about a VM.
type leaseEvent struct {
	msg    string
	VMID   string `json:"vm_id"`
	Holder string `json:"holder"`
	Reset  bool   `json:"reset"`
	Cause  string `json:"cause"`
	Error  string `json:"error"`
}

// checkFreshLeases reads vmmanager's log: every episode was granted exactly
// one lease, and a VM was granted again only after its previous lease ended
// with a reset (a reset VM is handed out only once it is clean again).
func checkFreshLeases(t *testing.T, logPath string, lines []desktopLine, vms int) {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []leaseEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		// zap's console encoding: time, level, logger, caller, message,
		// JSON fields, separated by tabs.
		fields := strings.Split(sc.Text(), "\t")
		if len(fields) < 6 || fields[2] != "vmmanager" {
			continue
		}
		msg := fields[4]
		if msg != "lease granted" && msg != "lease ended" && msg != "vm ready" && msg != "vm quarantined" {
			continue
		}
		ev := leaseEvent{msg: msg}
		if err := json.Unmarshal([]byte(fields[5]), &ev); err != nil {
			t.Fatalf("%s: vmmanager line %q: %v", logPath, sc.Text(), err)
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	leasesOf := map[string]int{}
	// state of each VM: "ready" (booted or reset), "leased", "released
	// without reset".
	state := map[string]string{}
	granted := 0
	var quarantined []string
	for _, ev := range events {
		switch ev.msg {
		case "vm quarantined":
			// The pool replaces the VM; the episodes are not affected, but
			// a provider whose resets fail costs boots: say so.
			state[ev.VMID] = "quarantined"
			quarantined = append(quarantined, fmt.Sprintf("%s (%s: %s)", ev.VMID, ev.Cause, ev.Error))
		case "vm ready":
			state[ev.VMID] = "ready"
		case "lease granted":
			granted++
			leasesOf[ev.Holder]++
			if s := state[ev.VMID]; s != "ready" {
				t.Errorf("VM %s leased to %s while %q, want ready (booted, or reset after its last lease)", ev.VMID, ev.Holder, s)
			}
			state[ev.VMID] = "leased"
		case "lease ended":
			if ev.Reset {
				state[ev.VMID] = "ready"
			} else {
				state[ev.VMID] = "released without reset"
			}
		}
	}
	for _, e := range lines {
		if n := leasesOf[e.EpisodeID]; n != 1 {
			t.Errorf("episode %s was granted %d leases, want 1", e.EpisodeID, n)
		}
	}
	t.Logf("vmmanager: %d leases granted on %d VMs (%d in the pool), each on a VM booted or reset since its previous lease; %d VMs quarantined and replaced",
		granted, len(state), vms, len(quarantined))
	for _, q := range quarantined {
		t.Logf("vmmanager: quarantined %s", q)
	}
}

// episodeLines are the log lines that name one of the episodes in ids (as
// the episode or as a lease's holder), at most 20 per episode, without
// the coordinator's retries of a lease while the VMs boot.
func episodeLines(t *testing.T, logPath string, ids []string) string {
	t.Helper()
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	printed := map[string]int{}
	var b strings.Builder
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Contains(l, "lease acquire failed") {
			continue
		}
		for _, id := range ids {
			if !strings.Contains(l, `"episode_id": "`+id+`"`) && !strings.Contains(l, `"holder": "`+id+`"`) {
				continue
			}
			if printed[id] < 20 {
				printed[id]++
				if len(l) > 600 {
					l = l[:600] + "..."
				}
				b.WriteString(l + "\n")
			}
			break
		}
	}
	return b.String()
}

// readDesktopRollout reads the one rollout.jsonl under dir.
func readDesktopRollout(t *testing.T, dir string) ([]desktopLine, string) {
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
	var lines []desktopLine
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	// A line holds the episode's messages and token ids.
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var e desktopLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: %v", paths[0], err)
		}
		if seen[e.EpisodeID] {
			t.Errorf("episode %s twice in rollout.jsonl", e.EpisodeID)
		}
		seen[e.EpisodeID] = true
		lines = append(lines, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", paths[0], err)
	}
	return lines, filepath.Dir(paths[0])
}

// screenshots lists an episode's step screenshots (OSWorld's layout:
// <domain>/<task>-<episode>/step_N_*.png), the evidence of a failure.
func screenshots(rolloutDir, episodeID string) []string {
	shots, _ := filepath.Glob(filepath.Join(rolloutDir, "*", "*-"+episodeID, "*.png"))
	if len(shots) == 0 {
		return []string{"(none)"}
	}
	sort.Strings(shots)
	return shots
}

// desktopSummary is the end of rollout's own report (its progress lines
// and result table), without the services' log lines.
func desktopSummary(t *testing.T, logPath string) string {
	t.Helper()
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.Count(l, "\t") >= 4 && strings.HasPrefix(l, "20") {
			continue // a service's log line
		}
		keep = append(keep, l)
	}
	if len(keep) > 20 {
		keep = keep[len(keep)-20:]
	}
	return strings.Join(keep, "\n")
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10000 {
		t.Fatalf("%s=%q: want a whole number from 1 to 10000", name, v)
	}
	return n
}

// desktopMissing skips without a dependency, and fails under CI.
func desktopMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (fails under CI)", args...)
}
