package osworld

import "testing"

// TestBooleanIsPythonTruth: task files write "shell": "true" (a string)
// as often as true, and OSWorld's Python takes either as true; treating
// the string as false split shell commands such as `echo pw | sudo -S ...`
// into plain arguments.
func TestBooleanIsPythonTruth(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{nil, false}, {false, false}, {true, true}, {"true", true}, {"false", true}, {"", false},
		{0.0, false}, {1.0, true}, {[]any{}, false}, {[]any{"x"}, true},
	}
	for _, tt := range tests {
		if got := boolean(map[string]any{"shell": tt.v}, "shell"); got != tt.want {
			t.Errorf("boolean(shell=%#v) = %v, want %v", tt.v, got, tt.want)
		}
	}
}

// TestChromiumTitle: a window named by Chrome's title is looked for under
// Chromium's too; a class name is left alone.
func TestChromiumTitle(t *testing.T) {
	tests := []struct {
		name    string
		byClass bool
		want    string
	}{
		{"Google Chrome", false, "Chromium"},
		{"New Tab - Google Chrome", false, "New Tab - Chromium"},
		{"Google Chrome", true, "Google Chrome"},
		{"xterm", false, "xterm"},
	}
	for _, tt := range tests {
		if got := chromiumTitle(tt.name, tt.byClass); got != tt.want {
			t.Errorf("chromiumTitle(%q, %v) = %q, want %q", tt.name, tt.byClass, got, tt.want)
		}
	}
}
