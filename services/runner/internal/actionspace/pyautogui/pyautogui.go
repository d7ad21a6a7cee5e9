// Package pyautogui parses model answers in OSWorld's pyautogui action
// space: Python code in ``` fences (mm_agents/agent.py
// parse_code_from_string) plus the verbs WAIT, DONE and FAIL. The code is
// passed on as it is; the guest runs it.
package pyautogui

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

// MaxInput bounds the answer size the parser looks at.
const MaxInput = 1 << 20

var fence = regexp.MustCompile("(?s)```(?:\\w+\\s+)?(.*?)```")

func verb(s string) (string, bool) {
	switch s {
	case action.TypeWait, action.TypeDone, action.TypeFail:
		return s, true
	}
	return "", false
}

// Parse returns the actions of one model answer: one CODE action per code
// block, and a verb where a block is (or ends with) WAIT, DONE or FAIL.
func Parse(text string) ([]action.Action, error) {
	if len(text) > MaxInput {
		return nil, fmt.Errorf("answer longer than %d bytes", MaxInput)
	}
	t := strings.TrimSpace(text)
	if v, ok := verb(t); ok {
		return []action.Action{{Type: v}}, nil
	}
	var out []action.Action
	for _, m := range fence.FindAllStringSubmatch(t, -1) {
		code := strings.TrimSpace(m[1])
		if code == "" {
			continue
		}
		lines := strings.Split(code, "\n")
		last := strings.TrimSpace(lines[len(lines)-1])
		if v, ok := verb(code); ok {
			out = append(out, action.Action{Type: v})
		} else if v, ok := verb(last); ok && len(lines) > 1 {
			out = append(out, codeAction(strings.Join(lines[:len(lines)-1], "\n")), action.Action{Type: v})
		} else {
			out = append(out, codeAction(code))
		}
		if len(out) > action.MaxActions {
			return nil, fmt.Errorf("more than %d actions", action.MaxActions)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no code found: answer with a ```python block of pyautogui code, or WAIT, DONE or FAIL")
	}
	for _, a := range out {
		if len(a.Code) > action.MaxCodeLen {
			return nil, fmt.Errorf("code block longer than %d bytes", action.MaxCodeLen)
		}
	}
	return out, nil
}

func codeAction(code string) action.Action {
	return action.Action{Type: action.TypeCode, Code: strings.TrimSpace(code)}
}

// SystemPrompt is the pyautogui system prompt, after OSWorld's
// SYS_PROMPT_IN_SCREENSHOT_OUT_CODE.
func SystemPrompt(width, height int) string {
	return fmt.Sprintf(`You are an agent which follow my instruction and perform desktop computer tasks as instructed.
You have good knowledge of computer and good internet connection and assume your code will run on a computer for controlling the mouse and keyboard.
For each step, you will get an observation of an image, which is the screenshot of the computer screen (%dx%d pixels), and you will predict the action of the computer based on the image.

You are required to use `+"`pyautogui`"+` to perform the action grounded to the observation, but DO NOT use the `+"`pyautogui.locateCenterOnScreen`"+` function to locate the element you want to operate with since we have no image of the element you want to operate with. DO NOT USE `+"`pyautogui.screenshot()`"+` to make screenshot.
Return one line or multiple lines of python code to perform the action each time, be time efficient. When predicting multiple lines of code, make some small sleep like `+"`time.sleep(0.5);`"+` interval so that the machine could take; Each time you need to predict a complete code, no variables or function can be shared from history.
You need to to specify the coordinates of by yourself based on your observation of current observation, but you should be careful to ensure that the coordinates are correct.
You ONLY need to return the code inside a code block, like this:
`+"```python\n# your code here\n```"+`
Specially, it is also allowed to return the following special code:
When you think you have to wait for some time, return `+"```WAIT```"+`;
When you think the task can not be done, return `+"```FAIL```"+`, don't easily say `+"```FAIL```"+`, try your best to do the task;
When you think the task is done, return `+"```DONE```"+`.

First give the current screenshot and previous things we did a short reflection, then RETURN ME THE CODE OR SPECIAL CODE I ASKED FOR. NEVER EVER RETURN ME ANYTHING ELSE.`, width, height)
}
