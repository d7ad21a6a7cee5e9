package pyautogui

import (
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // type:code
		wantErr bool
	}{
		{name: "verb", in: "WAIT", want: []string{"WAIT:"}},
		{name: "python fence", in: "Reflection.\n```python\npyautogui.click(10, 20)\n```", want: []string{"CODE:pyautogui.click(10, 20)"}},
		{name: "fence without language", in: "```\npyautogui.press('enter')\n```", want: []string{"CODE:pyautogui.press('enter')"}},
		{name: "fenced verb", in: "Done now.\n```DONE```", want: []string{"DONE:"}},
		{name: "code then verb", in: "```python\npyautogui.write('x')\nDONE\n```", want: []string{"CODE:pyautogui.write('x')", "DONE:"}},
		{name: "two blocks", in: "```python\na()\n```\nthen\n```python\nb()\n```", want: []string{"CODE:a()", "CODE:b()"}},
		{name: "one line with language", in: "```python pyautogui.click(1, 2); pyautogui.press('enter') ```", want: []string{"CODE:pyautogui.click(1, 2); pyautogui.press('enter')"}},
		{name: "no code", in: "I will click the button.", wantErr: true},
		{name: "empty fence", in: "``````", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Parse(%q) = %+v, want %v", tt.in, got, tt.want)
			}
			for i, a := range got {
				if g := a.Type + ":" + a.Code; g != tt.want[i] {
					t.Errorf("action %d = %q, want %q", i, g, tt.want[i])
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"DONE", "```python\nx()\n```", "```\nFAIL\n```", "```py\na\nWAIT```", "```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acts, err := Parse(s)
		if err == nil && len(acts) == 0 {
			t.Fatal("no error and no actions")
		}
	})
}

// TestParseBoundsActions: every kind of block counts toward
// action.MaxActions. Verb blocks, and code ending in a verb, were not
// counted: a 1 MB answer of "```WAIT```" gave 100000 actions.
func TestParseBoundsActions(t *testing.T) {
	tests := []struct {
		name  string
		block string
	}{
		{"verb blocks", "```WAIT```\n"},
		{"code ending in a verb", "```python\npyautogui.press('a')\nWAIT\n```\n"},
	}
	for _, tt := range tests {
		in := strings.Repeat(tt.block, action.MaxActions+1)
		if got, err := Parse(in); err == nil {
			t.Errorf("%s: %d blocks gave %d actions and no error, want an error past %d", tt.name, action.MaxActions+1, len(got), action.MaxActions)
		}
	}
}
