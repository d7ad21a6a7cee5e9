package input

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// namedKeys maps pyautogui's key names (KEYBOARD_KEYS) and a few common
// aliases to X keysyms. pyautogui's own X11 backend leaves the media and
// browser keys unmapped; they are mapped here to their XF86 keysyms.
var namedKeys = withFunctionKeys(map[string]uint32{
	"backspace": 0xff08, "\b": 0xff08, "tab": 0xff09, "enter": 0xff0d, "return": 0xff0d,
	"shift": 0xffe1, "shiftleft": 0xffe1, "shiftright": 0xffe2,
	"ctrl": 0xffe3, "ctrlleft": 0xffe3, "ctrlright": 0xffe4, "control": 0xffe3,
	"alt": 0xffe9, "altleft": 0xffe9, "altright": 0xffea,
	"option": 0xffe9, "optionleft": 0xffe9, "optionright": 0xffea,
	"win": 0xffeb, "winleft": 0xffeb, "winright": 0xffec, "super": 0xffeb,
	"command": 0xffeb, "cmd": 0xffeb, "meta": 0xffe7,
	"pause": 0xff13, "capslock": 0xffe5, "esc": 0xff1b, "escape": 0xff1b,
	"pgup": 0xff55, "pgdn": 0xff56, "pageup": 0xff55, "pagedown": 0xff56,
	"page_up": 0xff55, "page_down": 0xff56,
	"end": 0xff57, "home": 0xff50, "left": 0xff51, "up": 0xff52, "right": 0xff53, "down": 0xff54,
	"arrowleft": 0xff51, "arrowup": 0xff52, "arrowright": 0xff53, "arrowdown": 0xff54,
	"select": 0xff60, "print": 0xff61, "execute": 0xff62,
	"prtsc": 0xff61, "prtscr": 0xff61, "prntscrn": 0xff61, "printscreen": 0xff61,
	"insert": 0xff63, "del": 0xffff, "delete": 0xffff, "help": 0xff6a, "apps": 0xff67,
	"menu": 0xff67, "clear": 0xff0b, "modechange": 0xff7e,
	"num0": 0xffb0, "num1": 0xffb1, "num2": 0xffb2, "num3": 0xffb3, "num4": 0xffb4,
	"num5": 0xffb5, "num6": 0xffb6, "num7": 0xffb7, "num8": 0xffb8, "num9": 0xffb9,
	"multiply": 0xffaa, "add": 0xffab, "separator": 0xffac, "subtract": 0xffad,
	"decimal": 0xffae, "divide": 0xffaf, "numlock": 0xff7f, "scrolllock": 0xff14,
	"space": 0x20, "convert": 0xff23, "nonconvert": 0xff22, "kanji": 0xff21, "kana": 0xff2e,
	"hangul": 0xff31, "hanguel": 0xff31, "hanja": 0xff34, "junja": 0xff38, "final": 0xff3c,
	"yen": 0xa5, "accept": 0xff23,
	"volumeup": 0x1008ff13, "volumedown": 0x1008ff11, "volumemute": 0x1008ff12,
	"playpause": 0x1008ff14, "stop": 0x1008ff15, "prevtrack": 0x1008ff16, "nexttrack": 0x1008ff17,
	"browserback": 0x1008ff26, "browserforward": 0x1008ff27, "browserrefresh": 0x1008ff29,
	"browserstop": 0x1008ff28, "browsersearch": 0x1008ff1b, "browserfavorites": 0x1008ff30,
	"browserhome": 0x1008ff18, "launchmail": 0x1008ff19, "launchmediaselect": 0x1008ff32,
	"launchapp1": 0x1008ff40, "launchapp2": 0x1008ff41, "sleep": 0x1008ff2f,
})

// withFunctionKeys adds F1..F24, which are consecutive keysyms.
func withFunctionKeys(m map[string]uint32) map[string]uint32 {
	for i := 1; i <= 24; i++ {
		m["f"+strconv.Itoa(i)] = 0xffbe + uint32(i-1)
	}
	return m
}

// CharKeysym returns the keysym that types r.
func CharKeysym(r rune) uint32 {
	switch r {
	case '\n', '\r':
		return 0xff0d
	case '\t':
		return 0xff09
	case '\b':
		return 0xff08
	case 0x1b:
		return 0xff1b
	}
	if (r >= 0x20 && r <= 0x7e) || (r >= 0xa0 && r <= 0xff) {
		return uint32(r) // Latin-1 keysyms equal their code points
	}
	return 0x01000000 | uint32(r)
}

// KeyKeysym resolves a pyautogui key name: a single character, or a name
// from pyautogui's KEYBOARD_KEYS (case-insensitive, as pyautogui lowercases
// names longer than one character).
func KeyKeysym(name string) (uint32, bool) {
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		if r == utf8.RuneError {
			return 0, false
		}
		if ks, ok := namedKeys[name]; ok && r < 0x20 {
			return ks, true
		}
		return CharKeysym(r), true
	}
	ks, ok := namedKeys[strings.ToLower(name)]
	return ks, ok
}
