package trajectory

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
)

// OSWorldWriter writes one task's results the way OSWorld's
// lib_run_single does: a traj.jsonl line per action with the screenshot
// taken after it (step_N_<timestamp>.png), then result.txt and
// recording.mp4. Writes happen on the agent's goroutine: they are local
// file writes of bounded size.
type OSWorldWriter struct {
	dir string

	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	err  error
	step int
}

// NewOSWorldWriter creates dir and traj.jsonl in it.
func NewOSWorldWriter(dir string) (*OSWorldWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "traj.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	return &OSWorldWriter{dir: dir, f: f, w: bufio.NewWriter(f)}, nil
}

var _ agent.StepSink = (*OSWorldWriter)(nil)

// Record writes the step's lines and screenshot. Steps without actions
// (unparsable answers) get a line with the error, as OSWorld's error lines.
func (o *OSWorldWriter) Record(_ context.Context, r agent.StepRecord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	o.step++
	ts := r.Time.UTC().Format("20060102@150405")
	shot := ""
	if len(r.After) > 0 {
		shot = "step_" + strconv.Itoa(o.step) + "_" + ts + ".png"
		if err := os.WriteFile(filepath.Join(o.dir, shot), r.After, 0o644); err != nil {
			o.err = err
			return
		}
	}
	resp := r.Step.GetModelCall().GetResponseText()
	if len(r.Actions) == 0 {
		o.line(map[string]any{"step_num": o.step, "action_timestamp": ts, "response": resp, "Error": r.Step.GetError()})
		return
	}
	for i, a := range r.Actions {
		info := map[string]any{}
		if i < len(r.Step.GetResults()) {
			res := r.Step.GetResults()[i]
			info["ok"] = res.GetOk()
			if res.GetError() != "" {
				info["error"] = res.GetError()
			}
			if res.GetOutput() != "" {
				info["output"] = res.GetOutput()
			}
		}
		if a.Type == "DONE" {
			info["done"] = true
		}
		if a.Type == "FAIL" {
			info["fail"] = true
		}
		o.line(map[string]any{
			"step_num":         o.step,
			"action_timestamp": ts,
			"action":           a.OSWorldDict(),
			"response":         resp,
			"reward":           0,
			"done":             r.Step.GetDone() && i == len(r.Actions)-1,
			"info":             info,
			"screenshot_file":  shot,
		})
	}
}

func (o *OSWorldWriter) line(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	b = append(b, '\n')
	if _, err := o.w.Write(b); err != nil {
		o.err = err
		return
	}
	o.err = o.w.Flush()
}

// WriteConversation writes conversation.json, seed 002's conversation log:
// the messages in OpenAI's shape, images replaced by a note of their size.
func (o *OSWorldWriter) WriteConversation(msgs []*rmv1.ChatMessage) error {
	type toolCall struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type message struct {
		Role       string     `json:"role"`
		Content    []any      `json:"content,omitempty"`
		ToolCalls  []toolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		mm := message{Role: m.GetRole(), ToolCallID: m.GetToolCallId()}
		for _, p := range m.GetContent() {
			if img := p.GetImage(); img != nil {
				// The agent drops the bytes of images older than its
				// window and keeps their size in blob.
				n := int64(len(img.GetData()))
				if n == 0 {
					n = img.GetBlob().GetSize()
				}
				mm.Content = append(mm.Content, map[string]any{"type": "image", "media_type": img.GetMediaType(), "bytes": n})
				continue
			}
			mm.Content = append(mm.Content, map[string]any{"type": "text", "text": p.GetText()})
		}
		for _, c := range m.GetToolCalls() {
			mm.ToolCalls = append(mm.ToolCalls, toolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArgumentsJson()})
		}
		out = append(out, mm)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.dir, "conversation.json"), b, 0o644)
}

// Finish writes result.txt (the score) and recording.mp4 when there is one,
// or an error line when the episode did not finish, and closes traj.jsonl.
func (o *OSWorldWriter) Finish(score float64, finished bool, errText string, recording []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !finished {
		o.line(map[string]any{"Error": errText})
	}
	if cerr := o.f.Close(); o.err == nil {
		o.err = cerr
	}
	if o.err != nil {
		return fmt.Errorf("write traj.jsonl: %w", o.err)
	}
	if finished {
		if err := os.WriteFile(filepath.Join(o.dir, "result.txt"), []byte(strconv.FormatFloat(score, 'f', -1, 64)+"\n"), 0o644); err != nil {
			return err
		}
	}
	if len(recording) > 0 {
		if err := os.WriteFile(filepath.Join(o.dir, "recording.mp4"), recording, 0o644); err != nil {
			return err
		}
	}
	return nil
}
