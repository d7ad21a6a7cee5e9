package action

import "strings"

// keyboardKeys is pyautogui.KEYBOARD_KEYS, the key names computer_13 accepts
// (OSWorld's desktop_env/actions.py KEYBOARD_KEYS).
var keyboardKeys = func() map[string]bool {
	names := []string{
		"\t", "\n", "\r", " ", "!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/",
		"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ":", ";", "<", "=", ">", "?", "@", "[", "\\", "]", "^", "_", "`",
		"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
		"{", "|", "}", "~",
		"accept", "add", "alt", "altleft", "altright", "apps", "backspace", "browserback", "browserfavorites",
		"browserforward", "browserhome", "browserrefresh", "browsersearch", "browserstop", "capslock", "clear",
		"convert", "ctrl", "ctrlleft", "ctrlright", "decimal", "del", "delete", "divide", "down", "end", "enter",
		"esc", "escape", "execute", "f1", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "f17", "f18", "f19",
		"f2", "f20", "f21", "f22", "f23", "f24", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "final", "fn",
		"hanguel", "hangul", "hanja", "help", "home", "insert", "junja", "kana", "kanji", "launchapp1",
		"launchapp2", "launchmail", "launchmediaselect", "left", "modechange", "multiply", "nexttrack",
		"nonconvert", "num0", "num1", "num2", "num3", "num4", "num5", "num6", "num7", "num8", "num9", "numlock",
		"pagedown", "pageup", "pause", "pgdn", "pgup", "playpause", "prevtrack", "print", "printscreen",
		"prntscrn", "prtsc", "prtscr", "return", "right", "scrolllock", "select", "separator", "shift",
		"shiftleft", "shiftright", "sleep", "space", "stop", "subtract", "tab", "up", "volumedown", "volumemute",
		"volumeup", "win", "winleft", "winright", "yen", "command", "option", "optionleft", "optionright",
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}()

// IsKey reports whether name is a pyautogui key name (case-insensitive for
// named keys, as pyautogui lowercases them).
func IsKey(name string) bool {
	if keyboardKeys[name] {
		return true
	}
	if len(name) == 1 && name[0] >= 'A' && name[0] <= 'Z' {
		return true // pyautogui presses shift for capitals
	}
	return len(name) > 1 && keyboardKeys[strings.ToLower(name)]
}

// normKey lowercases named keys and keeps single characters as they are.
func normKey(s string) string {
	if len(s) > 1 {
		return strings.ToLower(s)
	}
	return s
}
