package action

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestNormalizeAndCode(t *testing.T) {
	scr := Screen{Width: 1280, Height: 720}
	tests := []struct {
		name    string
		in      Action
		want    string
		wantErr bool
	}{
		{name: "right click", in: Action{Type: "right_click", Params: map[string]any{"x": 1.0, "y": 2.0}}, want: "pyautogui.rightClick(x=1, y=2)"},
		{name: "double click here", in: Action{Type: "DOUBLE_CLICK"}, want: "pyautogui.doubleClick()"},
		{name: "mouse down", in: Action{Type: "MOUSE_DOWN", Params: map[string]any{"button": "right"}}, want: "pyautogui.mouseDown(button='right')"},
		{name: "typing escapes", in: Action{Type: "TYPING", Params: map[string]any{"text": "a'b\\c\nd"}}, want: `pyautogui.typewrite('a\'b\\c\nd')`},
		{name: "scroll both", in: Action{Type: "SCROLL", Params: map[string]any{"dx": 2.0, "dy": -1.0}}, want: "pyautogui.hscroll(2)\npyautogui.vscroll(-1)"},
		{name: "key down", in: Action{Type: "KEY_DOWN", Params: map[string]any{"key": "Shift"}}, want: "pyautogui.keyDown('shift')"},
		{name: "wait", in: Action{Type: "WAIT"}, want: ""},
		{name: "scroll nothing", in: Action{Type: "SCROLL"}, wantErr: true},
		{name: "typing not string", in: Action{Type: "TYPING", Params: map[string]any{"text": 3.0}}, wantErr: true},
		{name: "hotkey empty", in: Action{Type: "HOTKEY", Params: map[string]any{"keys": []any{}}}, wantErr: true},
		{name: "bad button", in: Action{Type: "CLICK", Params: map[string]any{"button": "thumb"}}, wantErr: true},
		{name: "negative", in: Action{Type: "MOVE_TO", Params: map[string]any{"x": -1.0, "y": 0.0}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in, scr)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Normalize(%+v) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize(%+v): %v", tt.in, err)
			}
			if got.Code != tt.want {
				t.Errorf("code = %q, want %q", got.Code, tt.want)
			}
		})
	}
}

func TestParseScreen(t *testing.T) {
	tests := []struct {
		in      string
		want    Screen
		wantErr bool
	}{
		{in: "1920x1080", want: Screen{1920, 1080}},
		{in: " 1280X720 ", want: Screen{1280, 720}},
		{in: "0x5", wantErr: true},
		{in: "abc", wantErr: true},
		{in: "99999x1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseScreen(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseScreen(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseScreen(f *testing.F) {
	f.Add("1920x1080")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		scr, err := ParseScreen(s)
		if err == nil && (scr.Width < 1 || scr.Height < 1) {
			t.Fatalf("ParseScreen(%q) = %v", s, scr)
		}
	})
}

// TestPasteCodeRoundTrip evaluates the string literal PasteCode gives
// pyperclip with a real Python: it must be the text, whatever it holds,
// and plain ASCII whatever the guest's locale.
func TestPasteCodeRoundTrip(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is required when CI is set: %v", err)
		}
		t.Skip("no python3 (apt-get install python3)")
	}
	tests := []string{"héllo wörld", "it's \"quoted\" \\ back", "two\nlines\ttab", "emoji 🙂 and 中文", "<less> than"}
	for _, text := range tests {
		code := PasteCode(text)
		lit := strings.TrimSuffix(strings.TrimPrefix(code, "import pyperclip; pyperclip.copy("), "); pyautogui.hotkey('ctrl', 'v'); time.sleep(0.5)")
		if lit == code || strings.ContainsFunc(lit, func(r rune) bool { return r > 0x7e }) {
			t.Errorf("PasteCode(%q) = %q, want pyperclip.copy of an ASCII literal then ctrl+v", text, code)
			continue
		}
		out, err := exec.Command(python, "-c", "import sys; sys.stdout.buffer.write(("+lit+").encode())").Output()
		if err != nil || string(out) != text {
			t.Errorf("PasteCode(%q): Python reads %q (%v), want the text", text, out, err)
		}
		if NeedsPaste(text) != strings.ContainsFunc(text, func(r rune) bool { return r > 0x7e }) {
			t.Errorf("NeedsPaste(%q) = %v", text, NeedsPaste(text))
		}
	}
}
