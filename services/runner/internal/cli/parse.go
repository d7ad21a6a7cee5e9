package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace"
)

// maxParseInput bounds what `runner parse` reads.
const maxParseInput = 4 << 20

// Parse runs `runner parse`: one model answer on stdin, its actions on
// stdout as JSON and as the pyautogui code OSWorld would run.
func Parse(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runner parse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("action-space", "pyautogui", "action space: "+strings.Join(actionspace.Names(), ", "))
	screen := fs.String("screen", "1920x1080", "screen size WIDTHxHEIGHT the coordinates refer to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	space, err := actionspace.Get(*name)
	if err != nil {
		return err
	}
	scr, err := action.ParseScreen(*screen)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxParseInput+1))
	if err != nil {
		return err
	}
	if len(in) > maxParseInput {
		return fmt.Errorf("input larger than %d bytes", maxParseInput)
	}
	acts, err := space.Parse(answerOf(in), scr)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	out := struct {
		Actions   []action.Action `json:"actions"`
		PyAutoGUI string          `json:"pyautogui"`
	}{Actions: acts, PyAutoGUI: Script(acts)}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "# pyautogui:")
	fmt.Fprintln(stdout, out.PyAutoGUI)
	return nil
}

// answerOf reads stdin as an assistant message: JSON with "content" and
// "tool_calls" (OpenAI's shape, or flat {id,name,arguments} calls) when it
// is such an object, else the raw text.
func answerOf(in []byte) actionspace.Answer {
	t := bytes.TrimSpace(in)
	if len(t) > 0 && t[0] == '{' {
		var msg struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				Function  *struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		}
		if json.Unmarshal(t, &msg) == nil && (msg.Content != nil || msg.ToolCalls != nil) {
			a := actionspace.Answer{}
			if msg.Content != nil {
				a.Text = *msg.Content
			}
			for _, c := range msg.ToolCalls {
				name, args := c.Name, c.Arguments
				if c.Function != nil {
					name, args = c.Function.Name, c.Function.Arguments
				}
				a.Calls = append(a.Calls, action.ToolCall{ID: c.ID, Name: name, Arguments: argString(args)})
			}
			return a
		}
	}
	return actionspace.Answer{Text: string(in)}
}

// argString accepts arguments as a JSON string (OpenAI) or an object.
func argString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Script is the pyautogui script OSWorld would run for the actions, with
// the verbs as comments.
func Script(acts []action.Action) string {
	lines := []string{"import pyautogui, time"}
	for i, a := range acts {
		if i > 0 {
			lines = append(lines, "time.sleep(0.5)")
		}
		code, err := action.Code(a)
		switch {
		case err != nil:
			lines = append(lines, "# "+a.Type+": "+err.Error())
		case a.Type == action.TypeTool:
			lines = append(lines, "# TOOL "+a.Tool.Name+"("+a.Tool.Arguments+")")
		case code == "":
			lines = append(lines, "# "+a.Type)
		default:
			lines = append(lines, code)
		}
	}
	return strings.Join(lines, "\n")
}
