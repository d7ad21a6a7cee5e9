package osworld

import (
	"context"
	"reflect"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

func TestRunsCode(t *testing.T) {
	tests := []struct {
		command any
		want    bool
	}{
		{[]any{"code"}, true},
		{[]any{"code", "-g", "/home/user/Desktop/doc_proc/"}, true},
		{[]any{"/usr/bin/code", "--install-extension", "ms-python.python"}, true},
		{[]any{"/bin/bash", "-c", "cd /home/user/Downloads && unzip -q vscodeEvalExtension.zip && code --install-extension gru.vscode-eval-0.0.1.vsix"}, true},
		{[]any{"bash", "-lc", "sudo code --version"}, true},
		{[]any{"sh", "-c", "echo code; grep -r code /tmp"}, false},
		{[]any{"bash", "--norc", "x"}, false},
		{[]any{"python", "-c", "import code"}, false},
		{[]any{"code-server"}, false},
		{[]any{"vscode"}, false},
		{[]any{"code", 3}, false},
		{[]any{}, false},
		{"code /home/user/project", true},
		{"(cd /tmp; code .)", true},
		{"x=$(code --list-extensions)", true},
		{"echo code | xcode", false},
		{"which vscode", false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := runsCode(tt.command); got != tt.want {
			t.Errorf("runsCode(%#v) = %v, want %v", tt.command, got, tt.want)
		}
	}
}

// TestMissingForVSCode: a task that runs VS Code is refused where the
// guest lacks it, first and with how to add it; it is not judged while the
// guest's applications are unknown, nor where the guest has it.
func TestMissingForVSCode(t *testing.T) {
	task, err := ParseTask([]byte(`{"id": "v", "instruction": "x", "config": [{"type": "launch", "parameters": {"command": ["code"]}},
		{"type": "googledrive", "parameters": {}}], "evaluator": {"func": "infeasible"}}`))
	if err != nil {
		t.Fatal(err)
	}
	drive := Missing{Kind: "step", Name: "googledrive", Reason: "needs a Google Drive account: give the runner --google-settings"}
	tests := []struct {
		name string
		apps *GuestApps
		want []Missing
	}{
		{"unknown", nil, []Missing{drive}},
		{"without VS Code", &GuestApps{}, []Missing{{Kind: "app", Name: "vscode", Reason: noVSCode}, drive}},
		{"with VS Code", &GuestApps{VSCode: true}, []Missing{drive}},
	}
	for _, tt := range tests {
		if got := task.MissingFor(Offer{Apps: tt.apps}); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: MissingFor = %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
	plain, err := ParseTask([]byte(`{"id": "p", "instruction": "x", "evaluator": {"func": "infeasible"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.MissingFor(Offer{Apps: &GuestApps{}}); len(got) != 0 {
		t.Errorf("a task without VS Code on a guest without it misses %+v", got)
	}
}

// TestProbeApps asks a loopback guest whether it has code, and only for a
// task that needs it.
func TestProbeApps(t *testing.T) {
	needs, err := ParseTask([]byte(`{"id": "v", "instruction": "x", "config": [{"type": "launch", "parameters": {"command": ["code"]}}], "evaluator": {"func": "infeasible"}}`))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ParseTask([]byte(`{"id": "p", "instruction": "x", "evaluator": {"func": "infeasible"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, has := range []bool{true, false} {
		g, gc := newTestGuest(t)
		g.exec = func(command any, _ bool) guest.ExecResult {
			if reflect.DeepEqual(command, []any{"sh", "-c", "command -v code"}) && has {
				return guest.ExecResult{Status: "success", Output: "/usr/bin/code\n"}
			}
			return guest.ExecResult{Status: "success", ReturnCode: 1}
		}
		apps, err := ProbeApps(context.Background(), gc, needs)
		if err != nil || apps.VSCode != has {
			t.Errorf("guest with code %v: ProbeApps = %+v, %v", has, apps, err)
		}
		if _, err := ProbeApps(context.Background(), gc, plain); err != nil || g.count("/setup/execute") != 1 {
			t.Errorf("a task without VS Code asked the guest (%d requests, %v)", g.count("/setup/execute"), err)
		}
	}
}
