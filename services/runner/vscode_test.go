package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/episode"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/taskfile"
)

// pathWithout is $PATH without the directories holding an executable
// named prog, so a guest started with it lacks prog even where the host
// has it.
func pathWithout(prog string) string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if fi, err := os.Stat(filepath.Join(dir, prog)); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// TestVSCodeTaskNeedsCodeOnTheGuest: a task that runs VS Code, on a real
// desktopd whose PATH lacks `code`, ends UNSUPPORTED (unsupported_app:vscode,
// saying how to add it) before any setup step touches the VM and before a
// model call; with a `code` on the guest's PATH the same task's setup runs.
// `rollout tasks check`'s function says the same for an image without and
// with VS Code.
func TestVSCodeTaskNeedsCodeOnTheGuest(t *testing.T) {
	needX(t)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step", Reply: "DONE"}}})
	for _, withCode := range []bool{false, true} {
		name := map[bool]string{false: "guest without code", true: "guest with code"}[withCode]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := pathWithout("code")
			if withCode {
				// A stand-in for VS Code's launcher: it only says it ran.
				bin := filepath.Join(dir, "bin")
				if err := os.MkdirAll(bin, 0o755); err != nil {
					t.Fatal(err)
				}
				script := "#!/bin/sh\ntouch " + filepath.Join(dir, "code-ran") + "\n"
				if err := os.WriteFile(filepath.Join(bin, "code"), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
				path = bin + string(os.PathListSeparator) + path
			}
			t.Setenv("PATH", path)
			guest := startDesktopd(t)

			setupRan := filepath.Join(dir, "setup-ran")
			spec := `{"id": "vscode-task", "instruction": "open the project", "config": [
				{"type": "execute", "parameters": {"command": ["touch", "` + setupRan + `"]}},
				{"type": "launch", "parameters": {"command": ["code", "/home/user/project"]}}],
				"evaluator": {"func": "infeasible"}}`
			missing, err := runner.CheckOSWorldTaskWith([]byte(spec), runner.TaskOffer{VSCode: withCode})
			if err != nil || (len(missing) == 0) != withCode {
				t.Errorf("tasks check for an image with VS Code %v: missing %+v (%v)", withCode, missing, err)
			}
			p := filepath.Join(dir, "task.json")
			if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			tasks, err := taskfile.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			before := gw.Fake.Stats().Requests
			res := episode.Run(ctxT(t, time.Minute), episode.Deps{Chat: gw.Client, Log: zaptest.NewLogger(t)}, episode.Options{CacheDir: dir}, episode.Spec{
				Episode: &rmv1.Episode{EpisodeId: "vscode"}, Task: tasks[0], Agent: &rmv1.AgentConfig{MaxTurns: 1}, Guest: guest.URL,
			})
			ep := res.Episode
			_, statErr := os.Stat(setupRan)
			if !withCode {
				if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED || ep.GetFailureReason() != "unsupported_app:vscode" ||
					!strings.Contains(ep.GetError(), "VSCODE_DEB=") {
					t.Errorf("episode %s %q %q, want UNSUPPORTED unsupported_app:vscode saying how to add VS Code", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
				}
				if statErr == nil {
					t.Errorf("a setup step ran on the guest before the task was refused")
				}
				if n := gw.Fake.Stats().Requests - before; n != 0 {
					t.Errorf("%d model calls for a refused task", n)
				}
				return
			}
			if ep.GetStatus() == rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED || statErr != nil {
				t.Fatalf("episode %s %q %q (setup marker: %v), want the setup run", ep.GetStatus(), ep.GetFailureReason(), ep.GetError(), statErr)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, "code-ran")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the launch step did not run the guest's code")
				}
			}
		})
	}
}
