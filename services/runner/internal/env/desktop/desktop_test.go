package desktop

import "testing"

func TestFixLessThan(t *testing.T) {
	tests := []struct{ in, want string }{
		{`pyautogui.press('<')`, `pyautogui.hotkey("shift", ",")`},
		{`pyautogui.typewrite('a<b')`, `pyautogui.typewrite('a'); pyautogui.hotkey("shift", ","); pyautogui.typewrite('b')`},
		{`pyautogui.typewrite("<x")`, `pyautogui.hotkey("shift", ","); pyautogui.typewrite("x")`},
		{`pyautogui.typewrite('no angle')`, `pyautogui.typewrite('no angle')`},
		{`pyautogui.press('>')`, `pyautogui.press('>')`},
	}
	for _, tt := range tests {
		if got := FixLessThan(tt.in); got != tt.want {
			t.Errorf("FixLessThan(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
