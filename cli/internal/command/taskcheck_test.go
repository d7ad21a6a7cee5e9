package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestTasksCheck: an OSWorld tree with a supported task, one whose metric
// does not exist, one needing a Google account and one that does not parse
// is reported per domain, with each missing name and its tasks.
func TestTasksCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("test_all.json", `{"os": ["ok", "nometric"], "chrome": ["drive", "broken"]}`)
	write("examples/os/ok.json", `{"id": "ok", "instruction": "x", "config": [{"type": "execute", "parameters": {"command": "true"}}],
		"evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "echo hi"}, "expected": {"type": "rule", "rules": {"expected": "hi\n"}}}}`)
	write("examples/os/nometric.json", `{"id": "nometric", "instruction": "x",
		"evaluator": {"func": "no_such_metric", "result": {"type": "no_such_getter"}}}`)
	write("examples/chrome/drive.json", `{"id": "drive", "instruction": "x", "config": [{"type": "googledrive", "parameters": {}}],
		"evaluator": {"func": "infeasible"}}`)
	write("examples/chrome/broken.json", `{"id": "broken", "instruction": "x", "evaluator": {"func": 3}}`)

	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"tasks", "check", "--data", dir, "--json"}, &stdout, &stderr); err != nil {
		t.Fatalf("tasks check: %v\n%s", err, stderr.String())
	}
	var rep checkReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, stdout.String())
	}
	if rep.Tasks != 4 || rep.Supported != 1 {
		t.Errorf("tasks, supported = %d, %d, want 4, 1", rep.Tasks, rep.Supported)
	}
	gotDomains := map[string][2]int{}
	for _, d := range rep.ByDomain {
		gotDomains[d.Domain] = [2]int{d.Tasks, d.Supported}
	}
	wantDomains := map[string][2]int{"os": {2, 1}, "chrome": {2, 0}}
	for d, want := range wantDomains {
		if gotDomains[d] != want {
			t.Errorf("domain %s (tasks, supported) = %v, want %v", d, gotDomains[d], want)
		}
	}
	gotMissing := map[string]string{}
	for _, m := range rep.Missing {
		gotMissing[m.Kind+" "+m.Name] = strings.Join(m.IDs, ",")
	}
	for k, want := range map[string]string{"metric no_such_metric": "nometric", "getter no_such_getter": "nometric", "step googledrive": "drive"} {
		if gotMissing[k] != want {
			t.Errorf("missing %s: tasks %q, want %q (all: %v)", k, gotMissing[k], want, gotMissing)
		}
	}
	invalid := 0
	for _, c := range rep.Details {
		if c.Invalid != "" {
			invalid++
			if c.ID != "broken" {
				t.Errorf("task %s reported invalid: %s", c.ID, c.Invalid)
			}
		}
	}
	if invalid != 1 {
		t.Errorf("%d invalid tasks, want 1 (broken)", invalid)
	}

	// The table form names the same things for a person.
	stdout.Reset()
	if err := Run(context.Background(), []string{"tasks", "check", "--data", dir}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"total", "no_such_metric", "needs a Google Drive account", "do not parse"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestTasksCheckUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"tasks", "check"}, &stdout, &stderr)
	if ExitCode(err) != 2 {
		t.Errorf("tasks check without --data: exit %d (%v), want 2", ExitCode(err), err)
	}
	err = Run(context.Background(), []string{"tasks", "frobnicate"}, &stdout, &stderr)
	if ExitCode(err) != 2 {
		t.Errorf("tasks frobnicate: exit %d (%v), want 2", ExitCode(err), err)
	}
}

// TestTasksCheckGoogleSettings: with a folder of OSWorld's Google settings
// a task that uses Google Drive counts as supported; a settings folder that
// does not parse is refused, naming the flag, before anything is loaded.
func TestTasksCheckGoogleSettings(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"tasks/drive.json": `{"id": "drive", "instruction": "x", "config": [{"type": "googledrive", "parameters": {"operation": ["delete"], "args": [{"query": "title = 'a'", "trash": false}]}}],
			"evaluator": {"func": "infeasible"}}`,
		"settings/googledrive/settings.yml": "client_config_backend: file\nclient_config_file: evaluation_examples/settings/googledrive/client_secrets.json\n" +
			"save_credentials: True\nsave_credentials_backend: file\nsave_credentials_file: evaluation_examples/settings/googledrive/credentials.json\n",
		"settings/googledrive/client_secrets.json": `{"installed": {"client_id": "c", "client_secret": "s"}}`,
		"settings/googledrive/credentials.json":    `{"refresh_token": "r", "token_uri": "http://127.0.0.1:1/token"}`,
		"bad/googledrive/settings.yml":             "client_config_file: [",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name          string
		settings      string
		wantSupported int
		wantErr       string
	}{
		{"without settings", "", 0, ""},
		{"with settings", filepath.Join(dir, "settings"), 1, ""},
		{"bad settings", filepath.Join(dir, "bad"), 0, "--google-settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"tasks", "check", "--data", filepath.Join(dir, "tasks"), "--json"}
			if tc.settings != "" {
				args = append(args, "--google-settings", tc.settings)
			}
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), args, &stdout, &stderr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("tasks check = %v, want an error naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("tasks check: %v\n%s", err, stderr.String())
			}
			var rep checkReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Tasks != 1 || rep.Supported != tc.wantSupported {
				t.Errorf("tasks, supported = %d, %d, want 1, %d (missing: %+v)", rep.Tasks, rep.Supported, tc.wantSupported, rep.Missing)
			}
		})
	}
}

// TestTasksCheckVSCode: tasks that run VS Code (`code` as a step's program
// or inside its shell script, or a getter that drives it) count as
// supported only with --vscode, the image having been built with
// VSCODE_DEB; without it they are refused with how to add it, as the
// runner refuses them on a guest without code.
func TestTasksCheckVSCode(t *testing.T) {
	dir := t.TempDir()
	tasks := map[string]string{
		"launch.json": `{"id": "launch", "instruction": "x", "config": [{"type": "launch", "parameters": {"command": ["code", "/home/user/project"]}},
			{"type": "activate_window", "parameters": {"window_name": "Visual Studio Code"}}], "evaluator": {"func": "infeasible"}}`,
		"script.json": `{"id": "script", "instruction": "x", "config": [{"type": "execute", "parameters": {"command": ["/bin/bash", "-c", "cd /home/user/Downloads && unzip -q ext.zip && code --install-extension ext.vsix"]}}],
			"evaluator": {"func": "infeasible"}}`,
		"getter.json": `{"id": "getter", "instruction": "x", "evaluator": {"func": "check_json_settings",
			"result": {"type": "vscode_config", "vscode_extension_command": "OpenProject", "path": "/home/user/OpenProject.txt", "dest": "OpenProject.txt"},
			"expected": {"type": "rule", "rules": {"expected": {"a": 1}}}}}`,
		"plain.json": `{"id": "plain", "instruction": "x", "config": [{"type": "execute", "parameters": {"command": "echo code > /tmp/x; which vscode", "shell": true}}],
			"evaluator": {"func": "infeasible"}}`,
	}
	for name, content := range tasks {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name          string
		args          []string
		wantSupported int
		wantRefused   string
	}{
		{"image without VS Code", nil, 1, "getter,launch,script"},
		{"image with VS Code", []string{"--vscode"}, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"tasks", "check", "--data", dir, "--json"}, tc.args...)
			if err := Run(context.Background(), args, &stdout, &stderr); err != nil {
				t.Fatalf("tasks check: %v\n%s", err, stderr.String())
			}
			var rep checkReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Tasks != 4 || rep.Supported != tc.wantSupported {
				t.Errorf("tasks, supported = %d, %d, want 4, %d (missing: %+v)", rep.Tasks, rep.Supported, tc.wantSupported, rep.Missing)
			}
			var refused []string
			for _, m := range rep.Missing {
				if m.Kind != "app" || m.Name != "vscode" {
					t.Errorf("missing %s %s, want only app vscode", m.Kind, m.Name)
					continue
				}
				if !strings.Contains(m.Reason, "VSCODE_DEB=") || !strings.Contains(m.Reason, "--vscode") {
					t.Errorf("reason %q does not say how to add VS Code", m.Reason)
				}
				refused = append(refused, m.IDs...)
			}
			sort.Strings(refused)
			if got := strings.Join(refused, ","); got != tc.wantRefused {
				t.Errorf("refused for want of VS Code: %q, want %q", got, tc.wantRefused)
			}
		})
	}
}
