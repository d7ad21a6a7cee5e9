package osworld

import (
	"context"
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// vscodeGetters read VS Code's state by driving its window.
var vscodeGetters = map[string]bool{"vscode_config": true}

// NeedsVSCode says whether the task runs VS Code: a config or postconfig
// step whose command starts `code` (as a program, or as a command of a
// shell script: "unzip x.zip && code --install-extension x.vsix"), an
// open step of the program `code`, or a getter that drives VS Code. Tasks
// that only name VS Code among their related apps are not counted: nothing
// in them fails on a guest without it, though the agent may.
func (t Task) NeedsVSCode() bool {
	for _, s := range append(append([]Step{}, t.Config...), t.Evaluator.Postconfig...) {
		var p map[string]any
		if len(s.Parameters) == 0 || json.Unmarshal(s.Parameters, &p) != nil {
			continue
		}
		switch s.Type {
		case "launch", "execute", "command", "execute_with_verification":
			if runsCode(p["command"]) {
				return true
			}
		case "open":
			if str(p, "path") == "code" {
				return true
			}
		}
	}
	for i := range t.Evaluator.Func {
		for _, cfg := range []map[string]any{t.Evaluator.Result[i], t.Evaluator.Expected[i]} {
			if typ, _ := cfg["type"].(string); vscodeGetters[typ] {
				return true
			}
		}
	}
	return false
}

// shellStartsCode matches `code` in the command position of a shell
// script: at its start or after ;, &, |, (, a backquote or a newline,
// optionally behind sudo and its options, and by any path.
var shellStartsCode = regexp.MustCompile("(?:^|[;&|(`\\n])\\s*(?:sudo\\s+(?:-\\S+\\s+)*)?(?:[^\\s;&|()`]*/)?code(?:$|[\\s;&|)`])")

// shells run the script after their -c.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true}

// runsCode says whether a step's command (a string, or a list of strings
// as OSWorld passes it to Popen) starts VS Code's `code`.
func runsCode(command any) bool {
	switch c := command.(type) {
	case string:
		return shellStartsCode.MatchString(c)
	case []any:
		var argv []string
		for _, e := range c {
			s, ok := e.(string)
			if !ok {
				return false
			}
			argv = append(argv, s)
		}
		if len(argv) == 0 {
			return false
		}
		if path.Base(argv[0]) == "code" {
			return true
		}
		if shells[path.Base(argv[0])] {
			for i := 1; i+1 < len(argv); i++ {
				if strings.HasPrefix(argv[i], "-") && !strings.HasPrefix(argv[i], "--") && strings.Contains(argv[i], "c") {
					return shellStartsCode.MatchString(argv[i+1])
				}
			}
		}
	}
	return false
}

// commandRunner is the guest's /setup/execute; *guest.Client has it.
type commandRunner interface {
	Execute(ctx context.Context, command any, shell, setup bool) (guest.ExecResult, error)
}

// ProbeApps asks the guest which of the applications t needs, of those an
// image may lack, it has: `command -v code` for a task that runs VS Code.
// It only reads, so the runner asks before any step acts on the VM and
// refuses such a task by name (MissingFor with the answer) instead of
// failing in the middle of its setup. Applications t does not need are
// not asked about and read false, which refuses nothing.
func ProbeApps(ctx context.Context, g commandRunner, t Task) (GuestApps, error) {
	var apps GuestApps
	if t.NeedsVSCode() {
		res, err := g.Execute(ctx, []string{"sh", "-c", "command -v code"}, false, true)
		if err != nil {
			return apps, err
		}
		apps.VSCode = res.ReturnCode == 0 && strings.TrimSpace(res.Output) != ""
	}
	return apps, nil
}
