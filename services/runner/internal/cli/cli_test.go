package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    []string
		wantErr bool
	}{
		{name: "pyautogui", args: []string{"--action-space", "pyautogui"}, stdin: "```python\npyautogui.click(1, 2)\n```",
			want: []string{`"action_type": "CODE"`, "import pyautogui, time\npyautogui.click(1, 2)"}},
		{name: "computer_13 with screen", args: []string{"--action-space", "computer_13", "--screen", "1280x720"}, stdin: `{"action_type":"CLICK","parameters":{"x":10,"y":20}}`,
			want: []string{`"action_type": "CLICK"`, "pyautogui.click(x=10, y=20)"}},
		{name: "uitars15", args: []string{"--action-space", "uitars15", "--screen", "1920x1080"}, stdin: "Thought: t\nAction: click(point='<point>966 546</point>')",
			want: []string{"pyautogui.click(button='left', x=960, y=540)"}},
		{name: "claude message", args: []string{"--action-space", "claude_computer_use", "--screen", "2560x1440"},
			stdin: `{"content":"","tool_calls":[{"id":"1","function":{"name":"computer","arguments":"{\"action\":\"left_click\",\"coordinate\":[640,360]}"}}]}`,
			want:  []string{"pyautogui.click(button='left', x=1280, y=720)"}},
		{name: "tool calls", args: []string{"--action-space", "tool_calls"}, stdin: `{"tool_calls":[{"name":"calculator","arguments":{"expression":"1+1"}}]}`,
			want: []string{"# TOOL calculator"}},
		{name: "unparsable", args: []string{"--action-space", "computer_13"}, stdin: "hmm", wantErr: true},
		{name: "unknown space", args: []string{"--action-space", "telepathy"}, stdin: "x", wantErr: true},
		{name: "bad screen", args: []string{"--screen", "big"}, stdin: "DONE", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Parse(context.Background(), tt.args, strings.NewReader(tt.stdin), &out, &errOut)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("runner parse %v gave no error:\n%s", tt.args, out.String())
				}
				return
			}
			if err != nil {
				t.Fatalf("runner parse %v: %v", tt.args, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
