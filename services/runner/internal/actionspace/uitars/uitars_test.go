package uitars

import (
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

func TestSmartResize(t *testing.T) {
	tests := []struct{ h, w, wantH, wantW int }{
		{1080, 1920, 1092, 1932},
		{720, 1280, 728, 1288},
		{10, 10, 280, 280},
	}
	for _, tt := range tests {
		if h, w := SmartResize(tt.h, tt.w); h != tt.wantH || w != tt.wantW {
			t.Errorf("SmartResize(%d, %d) = %d, %d; want %d, %d", tt.h, tt.w, h, w, tt.wantH, tt.wantW)
		}
	}
}

func TestParse(t *testing.T) {
	scr := action.Screen{Width: 1920, Height: 1080}
	tests := []struct {
		name    string
		v       Version
		in      string
		want    string // actions as TYPE:code joined by " | "
		thought string
		wantErr bool
	}{
		{name: "1.0 click", v: V1, in: "Thought: click the icon\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')",
			want: "CLICK:pyautogui.click(button='left', x=960, y=540)", thought: "click the icon"},
		{name: "1.0 box centre", v: V1, in: "Action: left_double(start_box='(100,100,300,300)')", want: "DOUBLE_CLICK:pyautogui.doubleClick(x=384, y=216)"},
		{name: "1.5 point", v: V15, in: "Thought: open it\nAction: click(point='<point>966 546</point>')", want: "CLICK:pyautogui.click(button='left', x=960, y=540)", thought: "open it"},
		{name: "right single", v: V1, in: "Action: right_single(start_box='(0,0)')", want: "CLICK:pyautogui.click(button='right', x=0, y=0)"},
		{name: "drag", v: V1, in: "Action: drag(start_box='(0,0)', end_box='(1000,1000)')", want: "MOVE_TO:pyautogui.moveTo(0, 0, duration=0.5) | DRAG_TO:pyautogui.dragTo(1920, 1080, duration=1.0, button='left')"},
		{name: "hotkey", v: V15, in: "Action: hotkey(key='ctrl c')", want: "HOTKEY:pyautogui.hotkey('ctrl', 'c')"},
		{name: "hotkey arrow", v: V15, in: "Action: hotkey(key='arrowdown')", want: "PRESS:pyautogui.press('down')"},
		{name: "type submit", v: V15, in: `Action: type(content='hello\n')`, want: "TYPING:pyautogui.typewrite('hello') | PRESS:pyautogui.press('enter')"},
		{name: "type unescaped quote", v: V15, in: `Action: type(content='it's')`, want: `TYPING:pyautogui.typewrite('it\'s')`},
		{name: "scroll", v: V1, in: "Action: scroll(start_box='(500,500)', direction='down')", want: "MOVE_TO:pyautogui.moveTo(960, 540, duration=0.5) | SCROLL:pyautogui.vscroll(-5)"},
		{name: "think then two calls", v: V15, in: "<think>hmm</think>Thought: x\nAction: wait()\n\nfinished(content='all done')", want: "WAIT: | DONE:"},
		{name: "call user", v: V1, in: "Action: call_user()", want: "FAIL:"},
		{name: "call without closing parenthesis", v: V1, in: "Action: click(start_box='(100,200)'", want: "CLICK:pyautogui.click(button='left', x=192, y=216)"},
		{name: "box without closing parenthesis", v: V1, in: "Action: click(start_box='(100,200')", want: "CLICK:pyautogui.click(button='left', x=192, y=216)"},
		{name: "both parentheses missing", v: V1, in: "Thought: t\nAction: click(start_box='(100,200'", want: "CLICK:pyautogui.click(button='left', x=192, y=216)", thought: "t"},
		{name: "1.5 full precision", v: V15, in: "Action: click(start_box='(1931,1091)')", want: "CLICK:pyautogui.click(button='left', x=1919, y=1079)"},
		{name: "1.0 full precision", v: V1, in: "Action: click(start_box='(999.6,0.4)')", want: "CLICK:pyautogui.click(button='left', x=1919, y=0)"},
		{name: "no action", v: V1, in: "Thought: nothing", wantErr: true},
		{name: "unknown", v: V1, in: "Action: levitate()", wantErr: true},
		{name: "bad coordinates", v: V1, in: "Action: click(start_box='(1)')", wantErr: true},
		{name: "positional", v: V1, in: "Action: click('(1,2)')", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in, tt.v, scr)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			var parts []string
			for _, a := range got.Actions {
				parts = append(parts, a.Type+":"+a.Code)
			}
			if g := strings.Join(parts, " | "); g != tt.want {
				t.Errorf("actions = %q\nwant      %q", g, tt.want)
			}
			if tt.thought != "" && got.Thought != tt.thought {
				t.Errorf("thought = %q, want %q", got.Thought, tt.thought)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"Thought: a\nAction: click(start_box='(1,2)')", "Action: type(content='a\\'b')", "Action: drag(start_point='<point>1 2</point>', end_point='<point>3 4</point>')",
		"Action: scroll(point='(1,1)', direction='left')\n\nwait()", "Action: x(y='"} {
		f.Add(s)
	}
	scr := action.Screen{Width: 1280, Height: 720}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []Version{V1, V15} {
			p, err := Parse(s, v, scr)
			if err == nil && len(p.Actions) == 0 {
				t.Fatal("no error and no actions")
			}
		}
	})
}

// TestParseEscapedNonASCII: a backslash before a non-ASCII character
// keeps the character whole. The escape took its first byte for a
// character of its own (\é became "Ã\xa9"), which is not UTF-8: as the
// episode's final answer, protobuf refused the episode's result.
func TestParseEscapedNonASCII(t *testing.T) {
	scr := action.Screen{Width: 1920, Height: 1080}
	tests := []struct {
		name, in, want string
	}{
		{"finished", `Action: finished(content='prix \é')`, "prix é"},
		{"finished with stray quotes", `Action: finished(content='it's \€5')`, "it's €5"},
	}
	for _, tt := range tests {
		p, err := Parse(tt.in, V15, scr)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if got := p.Actions[0].Answer; got != tt.want {
			t.Errorf("%s: answer %q, want %q", tt.name, got, tt.want)
		}
	}
	p, err := Parse(`Action: type(content='\é')`, V15, scr)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Actions[0].Params["text"]; got != "é" {
		t.Errorf("type: text %q, want %q", got, "é")
	}
}
