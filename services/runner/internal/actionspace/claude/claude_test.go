package claude

import (
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

func TestParse(t *testing.T) {
	scr := action.Screen{Width: 1920, Height: 1080}
	call := func(args string) []action.ToolCall {
		return []action.ToolCall{{ID: "t1", Name: "computer", Arguments: args}}
	}
	tests := []struct {
		name    string
		text    string
		calls   []action.ToolCall
		want    string
		wantErr bool
	}{
		{name: "no tool call is done", text: "All set.", want: "DONE:"},
		{name: "infeasible", text: "This is [INFEASIBLE].", calls: call(`{"action":"left_click","coordinate":[1,1]}`), want: "FAIL:"},
		{name: "scaled click", calls: call(`{"action":"left_click","coordinate":[640,360]}`), want: "CLICK:pyautogui.click(button='left', x=960, y=540)"},
		{name: "modifier click", calls: call(`{"action":"left_click","coordinate":[0,0],"text":"shift"}`), want: "CODE:pyautogui.keyDown('shift'); pyautogui.click(0, 0); pyautogui.keyUp('shift')"},
		{name: "key combo", calls: call(`{"action":"key","text":"ctrl+Page_Down"}`), want: "HOTKEY:pyautogui.hotkey('ctrl', 'pagedown')"},
		{name: "single key", calls: call(`{"action":"key","text":"Return"}`), want: "PRESS:pyautogui.press('enter')"},
		{name: "type", calls: call(`{"action":"type","text":"hi there"}`), want: "TYPING:pyautogui.typewrite('hi there')"},
		{name: "scroll", calls: call(`{"action":"scroll","coordinate":[10,10],"scroll_direction":"up","scroll_amount":2}`), want: "MOVE_TO:pyautogui.moveTo(15, 15, duration=0.5) | SCROLL:pyautogui.vscroll(2)"},
		{name: "drag", calls: call(`{"action":"left_click_drag","start_coordinate":[0,0],"coordinate":[1280,720]}`), want: "MOVE_TO:pyautogui.moveTo(0, 0, duration=0.5) | DRAG_TO:pyautogui.dragTo(1920, 1080, duration=1.0, button='left')"},
		{name: "screenshot", calls: call(`{"action":"screenshot"}`), want: "WAIT:"},
		{name: "zoom is invalid", calls: call(`{"action":"zoom"}`), wantErr: true},
		{name: "outside", calls: call(`{"action":"mouse_move","coordinate":[2000,10]}`), wantErr: true},
		{name: "bad json", calls: call(`{"action":`), wantErr: true},
		{name: "other tool", calls: []action.ToolCall{{Name: "bash", Arguments: "{}"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.text, tt.calls, scr)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var parts []string
			for _, a := range got {
				parts = append(parts, a.Type+":"+a.Code)
			}
			if g := strings.Join(parts, " | "); g != tt.want {
				t.Errorf("actions = %q\nwant      %q", g, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("", `{"action":"left_click","coordinate":[1,2]}`)
	f.Add("x", `{"action":"key","text":"ctrl+alt+t"}`)
	f.Add("", `{"action":"scroll","scroll_direction":"left","scroll_amount":1e309}`)
	scr := action.Screen{Width: 1280, Height: 720}
	f.Fuzz(func(t *testing.T, text, args string) {
		acts, err := Parse(text, []action.ToolCall{{ID: "1", Name: ToolName, Arguments: args}}, scr)
		if err == nil && len(acts) == 0 {
			t.Fatal("no error and no actions")
		}
	})
}

// TestParseBoundsActions: the actions of all calls together stay within
// action.MaxActions; 16 hold_key calls of 8 keys each gave 128.
func TestParseBoundsActions(t *testing.T) {
	var calls []action.ToolCall
	for range MaxCalls {
		calls = append(calls, action.ToolCall{ID: "t", Name: ToolName, Arguments: `{"action":"hold_key","text":"a+b+c+d+e+f+g+h"}`})
	}
	if got, err := Parse("", calls, action.Screen{Width: 1920, Height: 1080}); err == nil {
		t.Errorf("%d calls gave %d actions and no error, want an error past %d", len(calls), len(got), action.MaxActions)
	}
}
