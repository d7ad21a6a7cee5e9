package computer13

import (
	"encoding/json"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

var screen = action.Screen{Width: 1920, Height: 1080}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantType []string
		wantCode []string
		wantErr  bool
	}{
		{name: "bare verb", in: " DONE\n", wantType: []string{"DONE"}, wantCode: []string{""}},
		{name: "fenced verb", in: "It is done.\n```DONE```", wantType: []string{"DONE"}, wantCode: []string{""}},
		{name: "json fence", in: "Click it.\n```json\n{\"action_type\": \"CLICK\", \"parameters\": {\"button\": \"left\", \"x\": 100, \"y\": 200}}\n```",
			wantType: []string{"CLICK"}, wantCode: []string{"pyautogui.click(button='left', x=100, y=200)"}},
		{name: "flat form", in: "```json\n{\"action_type\": \"TYPING\", \"text\": \"it's\"}\n```", wantType: []string{"TYPING"}, wantCode: []string{`pyautogui.typewrite('it\'s')`}},
		{name: "list", in: "```json\n[{\"action_type\": \"HOTKEY\", \"parameters\": {\"keys\": [\"ctrl\", \"C\"]}}, {\"action_type\": \"PRESS\", \"parameters\": {\"key\": \"Enter\"}}]\n```",
			wantType: []string{"HOTKEY", "PRESS"}, wantCode: []string{"pyautogui.hotkey('ctrl', 'C')", "pyautogui.press('enter')"}},
		{name: "plain fence", in: "```\n{\"action_type\": \"SCROLL\", \"parameters\": {\"dy\": -3}}\n```", wantType: []string{"SCROLL"}, wantCode: []string{"pyautogui.vscroll(-3)"}},
		{name: "raw json", in: `{"action_type": "MOVE_TO", "parameters": {"x": 5, "y": 6}}`, wantType: []string{"MOVE_TO"}, wantCode: []string{"pyautogui.moveTo(5, 6, duration=0.5)"}},
		{name: "click without point", in: `{"action_type": "CLICK"}`, wantType: []string{"CLICK"}, wantCode: []string{"pyautogui.click()"}},
		{name: "drag", in: `{"action_type": "DRAG_TO", "parameters": {"x": 10.4, "y": "20"}}`, wantType: []string{"DRAG_TO"}, wantCode: []string{"pyautogui.dragTo(10, 20, duration=1.0, button='left')"}},
		{name: "outside screen", in: `{"action_type": "CLICK", "parameters": {"x": 5000, "y": 1}}`, wantErr: true},
		{name: "unknown key", in: `{"action_type": "PRESS", "parameters": {"key": "hyperdrive"}}`, wantErr: true},
		{name: "unknown type", in: `{"action_type": "TELEPORT"}`, wantErr: true},
		{name: "x without y", in: `{"action_type": "CLICK", "parameters": {"x": 1}}`, wantErr: true},
		{name: "bad clicks", in: `{"action_type": "CLICK", "parameters": {"num_clicks": 9}}`, wantErr: true},
		{name: "prose", in: "I think we should click the button.", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in, screen)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if len(got) != len(tt.wantType) {
				t.Fatalf("Parse(%q) gave %d actions, want %d", tt.in, len(got), len(tt.wantType))
			}
			for i, a := range got {
				if a.Type != tt.wantType[i] || a.Code != tt.wantCode[i] {
					t.Errorf("action %d = %s %q, want %s %q", i, a.Type, a.Code, tt.wantType[i], tt.wantCode[i])
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"DONE", "```json\n{\"action_type\": \"CLICK\", \"parameters\": {\"x\": 1, \"y\": 2}}\n```",
		`[{"action_type":"HOTKEY","keys":["ctrl","c"]}]`, `{"action_type":"SCROLL","dx":1e308}`, "```json\n[1,2]\n```"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		acts, err := Parse(s, screen)
		if err != nil {
			return
		}
		for _, a := range acts {
			if !action.IsComputer13(a.Type) {
				t.Fatalf("parsed an action of type %q", a.Type)
			}
			if _, err := json.Marshal(a); err != nil {
				t.Fatalf("action does not marshal: %v", err)
			}
		}
	})
}
