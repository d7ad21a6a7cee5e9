package pyautogui

import (
	"path"
	"regexp"
	"strings"
)

var pythonName = regexp.MustCompile(`^python(3(\.\d+)?)?$`)

// CodeFromCommand recognises OSWorld's way of running pyautogui code,
// ["python", "-c", "import pyautogui; ...; <code>"] (python3 and absolute
// interpreter paths too), and returns the code.
func CodeFromCommand(argv []string) (string, bool) {
	if len(argv) != 3 || argv[1] != "-c" || !pythonName.MatchString(path.Base(argv[0])) {
		return "", false
	}
	if !strings.Contains(argv[2], "pyautogui") {
		return "", false
	}
	return argv[2], true
}
