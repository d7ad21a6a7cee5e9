package input

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseAction(t *testing.T) {
	tests := []struct {
		in      string
		want    Action
		wantErr string
	}{
		{`"DONE"`, Action{Type: "DONE"}, ""},
		{`{"action_type":"CLICK","parameters":{"x":10,"y":20.4,"button":"right","num_clicks":2}}`,
			Action{Type: "CLICK", At: &Point{10, 20}, Button: Right, Clicks: 2}, ""},
		{`{"action_type":"CLICK"}`, Action{Type: "CLICK", Button: Left, Clicks: 1}, ""},
		{`{"action_type":"move_to","x":5,"y":6}`, Action{Type: "MOVE_TO", At: &Point{5, 6}}, ""},
		{`{"action_type":"SCROLL","parameters":{"dy":-3}}`, Action{Type: "SCROLL", DY: -3}, ""},
		{`{"action_type":"HOTKEY","parameters":{"keys":["ctrl","c"]}}`, Action{Type: "HOTKEY", Keys: []string{"ctrl", "c"}}, ""},
		{`{"action_type":"TYPING","parameters":{"text":"é"}}`, Action{Type: "TYPING", Text: "é"}, ""},
		{`{"action_type":"MOVE_TO"}`, Action{}, "x and y are required"},
		{`{"action_type":"CLICK","parameters":{"x":1}}`, Action{}, "go together"},
		{`{"action_type":"CLICK","parameters":{"x":1000,"y":1}}`, Action{}, "off the"},
		{`{"action_type":"CLICK","parameters":{"button":"thumb"}}`, Action{}, "button"},
		{`{"action_type":"PRESS","parameters":{"key":"nokey"}}`, Action{}, "not a key name"},
		{`{"action_type":"TYPING"}`, Action{}, "text is required"},
		{`{"action_type":"FLY"}`, Action{}, "unknown action_type"},
		{`"JUMP"`, Action{}, "WAIT, FAIL or DONE"},
		{`42`, Action{}, "JSON object or string"},
	}
	for _, tt := range tests {
		got, err := ParseAction(json.RawMessage(tt.in), 640, 480)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAction(%s) error %v, want containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAction(%s) error %v", tt.in, err)
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(tt.want)
		if string(gb) != string(wb) {
			t.Errorf("ParseAction(%s) got %s, want %s", tt.in, gb, wb)
		}
	}
}

func TestKeyKeysym(t *testing.T) {
	tests := []struct {
		name string
		want uint32
		ok   bool
	}{
		{"a", 'a', true}, {"A", 'A', true}, {"enter", 0xff0d, true}, {"Enter", 0xff0d, true},
		{"\n", 0xff0d, true}, {"ctrl", 0xffe3, true}, {"f12", 0xffc9, true}, {"€", 0x010020ac, true},
		{"win", 0xffeb, true}, {"pagedown", 0xff56, true}, {"nokey", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, ok := KeyKeysym(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("KeyKeysym(%q) got %#x, %v; want %#x, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
