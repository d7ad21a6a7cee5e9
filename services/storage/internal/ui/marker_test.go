package ui

import (
	"reflect"
	"strings"
	"testing"
	"time"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func TestMarkers(t *testing.T) {
	code := func(c string) []*pb.Action { return []*pb.Action{{ActionType: "CODE", Code: c}} }
	c13 := func(typ, params string) []*pb.Action { return []*pb.Action{{ActionType: typ, ParametersJson: params}} }
	for _, tc := range []struct {
		name    string
		actions []*pb.Action
		want    []Marker
	}{
		{"pyautogui click", code("import pyautogui\npyautogui.click(300, 200)"),
			[]Marker{{Kind: "click", X: 300, Y: 200, HasPoint: true}}},
		{"named arguments", code("pyautogui.click(x=12.5, y=7, button='right')"),
			[]Marker{{Kind: "click", X: 12.5, Y: 7, HasPoint: true}}},
		{"drag from the pointer", code("pyautogui.moveTo(10, 20)\npyautogui.dragTo(110, 220, duration=0.5)"),
			[]Marker{{Kind: "move", X: 10, Y: 20, HasPoint: true}, {Kind: "drag", FromX: 10, FromY: 20, X: 110, Y: 220, HasPoint: true}}},
		{"typed text after a click", code("pyautogui.click(5, 6); pyautogui.typewrite('hi, there\\n', interval=0.1)"),
			[]Marker{{Kind: "click", X: 5, Y: 6, HasPoint: true}, {Kind: "text", X: 5, Y: 6, HasPoint: true, Label: "hi, there\n"}}},
		{"hotkey", code("pyautogui.hotkey('ctrl', 'c')"), []Marker{{Kind: "text", Label: "⌨ ctrl+c"}}},
		{"computer_13 click", c13("CLICK", `{"x":640,"y":360,"button":"left"}`), []Marker{{Kind: "click", X: 640, Y: 360, HasPoint: true}}},
		{"computer_13 double click", c13("DOUBLE_CLICK", `{"x":1,"y":2}`), []Marker{{Kind: "click", X: 1, Y: 2, HasPoint: true, Label: "double_click"}}},
		{"computer_13 typing", c13("TYPING", `{"text":"<b>x</b>"}`), []Marker{{Kind: "text", Label: "<b>x</b>"}}},
		{"computer_13 drag without a start", c13("DRAG_TO", `{"x":3,"y":4}`), []Marker{{Kind: "click", X: 3, Y: 4, HasPoint: true}}},
		{"expressions draw nothing", code("pyautogui.click(x + 1, y)"), nil},
		{"unbalanced call", code("pyautogui.click(1, 2"), nil},
		{"bad parameters JSON", c13("CLICK", `{"x":`), nil},
		{"wait", c13("WAIT", ``), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := markers(tc.actions); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("markers() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMarkersBounded(t *testing.T) {
	c := ""
	for range 1000 {
		c += "pyautogui.click(1, 1)\n"
	}
	if got := len(markers([]*pb.Action{{ActionType: "CODE", Code: c}})); got != maxMarkers {
		t.Errorf("markers of 1000 clicks = %d, want %d", got, maxMarkers)
	}
}

func TestLRUEvictsOldest(t *testing.T) {
	c := newLRU(10)
	c.put("a", make([]byte, 4))
	c.put("b", make([]byte, 4))
	c.get("a")
	c.put("c", make([]byte, 4)) // evicts b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Error("b still cached, want evicted")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.get(k); !ok {
			t.Errorf("%s evicted, want kept", k)
		}
	}
	if n, bytes := c.size(); n != 2 || bytes != 8 {
		t.Errorf("size = %d entries %d bytes, want 2 and 8", n, bytes)
	}
	c.put("huge", make([]byte, 11))
	if _, ok := c.get("huge"); ok {
		t.Error("an entry larger than the cache was kept")
	}
}

// TestMarkersBoundedWork: a step's actions are megabytes at most, and the
// page of an episode reads markers of 50 steps. Code with many unclosed
// pyautogui calls made each call scan to the end of its action (0.7 s for
// one 4 MB step, 35 s of CPU for one page view); the scan is bounded per
// step now, whatever the actions hold.
func TestMarkersBoundedWork(t *testing.T) {
	code := strings.Repeat("pyautogui.x(", 64) + strings.Repeat("a", 64<<10-64*12)
	params := `{"x":1,"y":2,"pad":"` + strings.Repeat("a", 64<<10) + `"}`
	var actions []*pb.Action
	for range 30 {
		actions = append(actions, &pb.Action{ActionType: "CODE", Code: code}, &pb.Action{ActionType: "MOVE_TO_X", ParametersJson: params})
	}
	start := time.Now()
	for range 5 {
		markers(actions)
	}
	if took := time.Since(start) / 5; took > 50*time.Millisecond {
		t.Errorf("markers of a %d-byte step took %v, want at most 50ms", 30*(len(code)+len(params)), took)
	}
}
