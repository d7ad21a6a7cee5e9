// Package taskfile loads task files: an OSWorld task JSON (one object, or a
// list of them), or a JSONL benchmark file with one item per line
// ({"id", "question"|"instruction"|"problem"|"prompt", "answer", "metric",
// "domain", "env_mode"}); a JSONL line holding an "evaluator" is an OSWorld
// task.
package taskfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// Limits of a task file.
const (
	MaxFileSize = 256 << 20
	MaxLineSize = 4 << 20
	MaxTasks    = 1 << 20
)

// Load reads every task of a file.
func Load(path string) ([]env.Task, error) {
	// Refuses FIFOs and devices, whose Stat size is 0 and whose reads may
	// never end.
	data, err := boundedread.ReadFile(path, MaxFileSize)
	if err != nil {
		return nil, err
	}
	domain := filepath.Base(filepath.Dir(path))
	tasks, err := Parse(data, strings.HasSuffix(path, ".jsonl"), domain)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tasks, nil
}

// Parse decodes a task file's content. jsonl selects the line format;
// otherwise the content is one JSON object or a list. defaultDomain is used
// for OSWorld tasks without a "domain" field (OSWorld's domain is the
// directory name).
func Parse(data []byte, jsonl bool, defaultDomain string) ([]env.Task, error) {
	var raws []json.RawMessage
	if jsonl {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), MaxLineSize)
		n := 0
		for sc.Scan() {
			n++
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] == '#' {
				continue
			}
			raws = append(raws, append(json.RawMessage(nil), line...))
			if len(raws) > MaxTasks {
				return nil, fmt.Errorf("more than %d tasks", MaxTasks)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("line %d: %v", n+1, err)
		}
	} else {
		t := bytes.TrimSpace(data)
		if len(t) > 0 && t[0] == '[' {
			if err := json.Unmarshal(t, &raws); err != nil {
				return nil, fmt.Errorf("task list: %v", err)
			}
		} else {
			raws = []json.RawMessage{t}
		}
	}
	out := make([]env.Task, 0, len(raws))
	for i, r := range raws {
		t, err := Item(r, defaultDomain)
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i+1, err)
		}
		if t.ID == "" {
			t.ID = "task-" + strconv.Itoa(i+1)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tasks")
	}
	return out, nil
}

// Item decodes one task object.
func Item(raw json.RawMessage, defaultDomain string) (env.Task, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return env.Task{}, fmt.Errorf("not a JSON object: %v", err)
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			v, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) == nil {
				return s
			}
			// Numbers and other scalars as their JSON text (answers like 42).
			return strings.TrimSpace(string(v))
		}
		return ""
	}
	t := env.Task{
		ID:          str("id", "task_id", "uid"),
		Domain:      str("domain"),
		Instruction: str("instruction", "question", "problem", "prompt", "query"),
		Answer:      str("answer", "expected_answer", "ground_truth"),
		Metric:      str("metric", "evaluation_metric"),
		Mode:        str("env_mode"),
		Spec:        raw,
	}
	if _, ok := m["evaluator"]; ok {
		if t.Mode == "" {
			t.Mode = env.ModeDesktop
		}
		if t.Domain == "" {
			t.Domain = defaultDomain
		}
	}
	if t.Instruction == "" {
		return env.Task{}, fmt.Errorf("no instruction (or question/problem/prompt)")
	}
	if len(t.ID) > 256 {
		return env.Task{}, fmt.Errorf("id longer than 256 bytes")
	}
	return t, nil
}

// FromProto converts an assigned task. metric is the rollout's
// evaluation_metric, used when the task names none.
func FromProto(t *rmv1.Task, metric string) (env.Task, error) {
	out := env.Task{
		ID: t.GetId(), Domain: t.GetDomain(), Instruction: t.GetInstruction(),
		Answer: t.GetAnswer(), Mode: t.GetEnvMode(), Spec: json.RawMessage(t.GetSpecJson()),
	}
	if len(out.Spec) > 0 {
		item, err := Item(out.Spec, t.GetDomain())
		if err == nil {
			if out.Instruction == "" {
				out.Instruction = item.Instruction
			}
			if out.Answer == "" {
				out.Answer = item.Answer
			}
			out.Metric = item.Metric
			if out.Mode == "" {
				out.Mode = item.Mode
			}
		}
	}
	if out.Metric == "" {
		out.Metric = metric
	}
	if out.Instruction == "" {
		return env.Task{}, fmt.Errorf("task %s has no instruction", t.GetId())
	}
	return out, nil
}
