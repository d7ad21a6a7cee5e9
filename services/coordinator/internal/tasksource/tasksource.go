// Package tasksource loads rollout tasks from the places training code keeps
// them: a JSONL file, a JSON array file, or an OSWorld evaluation_examples
// directory with a test_all.json-style index (domain → task ids). Every task
// is checked here so that a rollout never starts with a task it cannot run:
// ids are validated, and launch-wide settings (action_space,
// observation_type) are refused inside a task's env_config, as seed 001
// requires.
package tasksource

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// Limits bounding what a task source may hold. One StartRollout (or one
// service-mode poll) reads at most MaxTotalBytes in at most MaxFiles files.
const (
	MaxTasks      = 200_000
	MaxTaskBytes  = 1 << 20
	MaxFileBytes  = 256 << 20
	MaxTotalBytes = 1 << 30
	MaxFiles      = MaxTasks + 1 // an OSWorld tree: one file per task and the index
	MaxDirEntries = 10_000
)

// DefaultIndex is the OSWorld index file name.
const DefaultIndex = "test_all.json"

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,256}$`)

// nameRule says in errors what a task id or domain may be.
const nameRule = `1-256 characters of [A-Za-z0-9._:-], not "." and without ".."`

// SafeName reports whether s may be a task id or domain: both become path
// components (OSWorld task files, export directories), so besides the
// character set they must not be "." or hold "..".
func SafeName(s string) bool {
	return idPattern.MatchString(s) && s != "." && !strings.Contains(s, "..")
}

// envModes are the environment modes a task may name.
var envModes = map[string]bool{"": true, "desktop": true, "osworld": true, "math": true, "py": true, "rag": true, "web": true}

// ValidEnvMode reports whether m is a known env mode (empty is allowed and
// means the rollout default).
func ValidEnvMode(m string) bool { return envModes[m] }

// NeedsVM reports whether an episode in env mode m runs on a leased VM.
func NeedsVM(m string) bool { return m == "desktop" || m == "osworld" }

// Error is a problem with one task, naming where it is.
type Error struct {
	Where string // "line 3", "tasks[2]", "chrome/abc.json"
	Field string // "id", "env_config.action_space", ...
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Where + ": " + e.Msg
	}
	return e.Where + ": " + e.Field + ": " + e.Msg
}

// CheckTask validates a task given inline or loaded from a file.
func CheckTask(t *pb.Task) (field, msg string) {
	switch {
	case t == nil:
		return "", "missing"
	case !SafeName(t.GetId()):
		return "id", "must be " + nameRule
	case t.GetDomain() != "" && !SafeName(t.GetDomain()):
		return "domain", "must be " + nameRule
	case !ValidEnvMode(t.GetEnvMode()):
		return "env_mode", "must be one of desktop, osworld, math, py, rag, web"
	case len(t.GetSpecJson()) > MaxTaskBytes:
		return "spec_json", fmt.Sprintf("must be at most %d bytes", MaxTaskBytes)
	case len(t.GetInstruction()) > MaxTaskBytes:
		return "instruction", fmt.Sprintf("must be at most %d bytes", MaxTaskBytes)
	case len(t.GetAnswer()) > MaxTaskBytes:
		return "answer", fmt.Sprintf("must be at most %d bytes", MaxTaskBytes)
	case len(t.GetTags()) > 64:
		return "tags", "at most 64 tags"
	}
	for i, tag := range t.GetTags() {
		if len(tag) == 0 || len(tag) > 256 {
			return fmt.Sprintf("tags[%d]", i), "must be 1-256 bytes"
		}
	}
	if f, msg := CheckEnvConfig(t.GetEnvConfig()); msg != "" {
		return "env_config." + f, msg
	}
	return "", ""
}

// Bounds on environment overrides: a desktop episode's overrides (the
// task's merged over the rollout's) go to vmmanager with every lease, and
// vmmanager refuses an AcquireLease beyond these, so a task past them could
// never run.
const (
	MaxSnapshotBytes = 128
	MaxExtras        = 32
	MaxExtraBytes    = 1024 // key and value together
)

// CheckEnvConfig validates environment overrides (a task's or a rollout's);
// field is relative to the EnvConfig.
func CheckEnvConfig(ec *pb.EnvConfig) (field, msg string) {
	if len(ec.GetSnapshot()) > MaxSnapshotBytes {
		return "snapshot", fmt.Sprintf("must be at most %d bytes", MaxSnapshotBytes)
	}
	if len(ec.GetExtra()) > MaxExtras {
		return "extra", fmt.Sprintf("at most %d entries", MaxExtras)
	}
	for k, v := range ec.GetExtra() {
		switch {
		case launchWide(k):
			return "extra." + k, "is a launch-wide setting; set it in spec.agent"
		case len(k) == 0 || len(k) > 128 || len(k)+len(v) > MaxExtraBytes:
			return "extra", fmt.Sprintf("keys 1-128 bytes, key and value together at most %d bytes", MaxExtraBytes)
		}
	}
	return "", ""
}

// CheckMergedEnv checks a task's overrides merged over its rollout's, as
// they are sent to vmmanager: both valid alone, their extras together may
// still be too many. field is relative to the task's EnvConfig.
func CheckMergedEnv(rollout, task *pb.EnvConfig) (field, msg string) {
	n := len(rollout.GetExtra())
	for k := range task.GetExtra() {
		if _, ok := rollout.GetExtra()[k]; !ok {
			n++
		}
	}
	if n > MaxExtras {
		return "extra", fmt.Sprintf("at most %d entries together with spec.env_config.extra", MaxExtras)
	}
	return "", ""
}

func launchWide(k string) bool { return k == "action_space" || k == "observation_type" }

// Load reads tasks from path, a name the caller gave: path must lie inside
// one of roots (an absolute path under a root, or a relative path found in
// the first root holding it). It reads
//   - a directory with an index file (index, default test_all.json) as an
//     OSWorld evaluation_examples tree;
//   - a directory without one as a folder of task files, each read as below
//     (*.json and *.jsonl, in name order);
//   - a file whose first non-space byte is '[' as a JSON array;
//   - a file holding exactly one JSON object as one task (OSWorld's
//     per-task files are pretty-printed objects);
//   - anything else as JSONL.
//
// Every file is read through the root, so neither ".." nor a symbolic link
// leads outside it, with a size cap per file and in all, and only regular
// files and directories are read: a device or FIFO is refused before a byte
// of it is read. Errors name paths and JSON offsets, never file content.
// Reading stops when ctx ends.
func Load(ctx context.Context, roots *Roots, path, index string) ([]*pb.Task, error) {
	root, name, err := roots.resolve(path)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	l := &loader{ctx: ctx, root: root}
	fi, err := root.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("open task source: %w", err)
	}
	if err := boundedread.CheckMode(path, fi.Mode(), true); err != nil {
		return nil, err
	}
	if fi.IsDir() {
		if index != "" && !filepath.IsLocal(index) {
			return nil, &Error{Where: "task_index", Msg: "must be a relative path inside task_source"}
		}
		if _, err := root.Stat(filepath.Join(name, orDefaultIndex(index))); err == nil || index != "" {
			return l.loadOSWorld(name, index)
		}
		return l.loadDir(name)
	}
	data, err := l.read(name, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read task source: %w", err)
	}
	tasks, err := parseFile(data)
	if err != nil {
		return nil, err
	}
	return tasks, checkUnique(tasks)
}

// loader reads one task source's files inside its root, counting files and
// bytes against the caps.
type loader struct {
	ctx   context.Context
	root  *os.Root
	files int
	bytes int64
}

// read reads one regular file inside the root, up to max bytes and to what
// is left of the total cap.
func (l *loader) read(name string, max int64) ([]byte, error) {
	if err := l.ctx.Err(); err != nil {
		return nil, err
	}
	if l.files >= MaxFiles {
		return nil, fmt.Errorf("task source: more than %d files", MaxFiles)
	}
	l.files++
	left := MaxTotalBytes - l.bytes
	b, err := boundedread.ReadFileIn(l.root, name, min(max, left))
	if errors.Is(err, boundedread.ErrTooLarge) && left < max {
		return nil, fmt.Errorf("task source: more than %d bytes in all: %w", MaxTotalBytes, boundedread.ErrTooLarge)
	}
	if err != nil {
		return nil, err
	}
	l.bytes += int64(len(b))
	return b, nil
}

// readDir lists a directory inside the root, at most MaxDirEntries entries,
// in name order.
func (l *loader) readDir(name string) ([]fs.DirEntry, error) {
	if err := l.ctx.Err(); err != nil {
		return nil, err
	}
	f, err := l.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(MaxDirEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(entries) > MaxDirEntries {
		return nil, fmt.Errorf("%s: more than %d entries", name, MaxDirEntries)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, nil
}

// parseFile parses one task file's content; uniqueness is the caller's.
func parseFile(data []byte) ([]*pb.Task, error) {
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\ufeff")))
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return parseArray(trimmed)
	}
	if len(trimmed) > 0 && trimmed[0] == '{' && bytes.Contains(trimmed, []byte("\n")) && json.Valid(trimmed) {
		t, err := ParseTask(trimmed, "", "task")
		if err != nil {
			return nil, err
		}
		return []*pb.Task{t}, nil
	}
	return parseJSONL(data)
}

func orDefaultIndex(index string) string {
	if index == "" {
		return DefaultIndex
	}
	return index
}

// loadDir reads a folder of task files (*.json, *.jsonl) in name order; a
// bad file is named in the error. Entries that are not regular files
// (subdirectories, links, devices) are skipped.
func (l *loader) loadDir(dir string) ([]*pb.Task, error) {
	entries, err := l.readDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read task directory: %w", err)
	}
	var out []*pb.Task
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl")) {
			continue
		}
		data, err := l.read(filepath.Join(dir, name), MaxFileBytes)
		if err != nil {
			return nil, fmt.Errorf("read task file %s: %w", name, err)
		}
		tasks, err := parseFile(data)
		if err != nil {
			var te *Error
			if errors.As(err, &te) {
				te.Where = name + ": " + te.Where
				return nil, te
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(out)+len(tasks) > MaxTasks {
			return nil, fmt.Errorf("task source: more than %d tasks", MaxTasks)
		}
		out = append(out, tasks...)
	}
	if len(out) == 0 {
		return nil, &Error{Where: dir, Msg: "no task files (*.json, *.jsonl) and no " + DefaultIndex}
	}
	return out, checkUnique(out)
}

func parseArray(data []byte) ([]*pb.Task, error) {
	// Uniqueness is checked by the caller over everything it loads.
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf("parse JSON array: %s", jsonProblem(err))
	}
	if len(items) > MaxTasks {
		return nil, fmt.Errorf("task source: more than %d tasks", MaxTasks)
	}
	out := make([]*pb.Task, 0, len(items))
	for i, raw := range items {
		t, err := ParseTask(raw, "", fmt.Sprintf("item %d", i))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func parseJSONL(data []byte) ([]*pb.Task, error) {
	var out []*pb.Task
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxTaskBytes+1)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if len(out) >= MaxTasks {
			return nil, fmt.Errorf("task source: more than %d tasks", MaxTasks)
		}
		t, err := ParseTask(append([]byte(nil), b...), "", fmt.Sprintf("line %d", line))
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Where: fmt.Sprintf("line %d", line+1), Msg: fmt.Sprintf("longer than %d bytes", MaxTaskBytes)}
		}
		return nil, fmt.Errorf("read JSONL: %w", err)
	}
	return out, nil
}

func checkUnique(tasks []*pb.Task) error {
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if seen[t.Id] {
			return &Error{Where: "task " + t.Id, Field: "id", Msg: "duplicate task id"}
		}
		seen[t.Id] = true
	}
	return nil
}

// rawTask is the union of the task shapes seen in the wild: OSWorld's task
// JSON (id, snapshot, instruction, config, evaluator, proxy, fixed_ip) and
// benchmark JSONL items (id/task_id, question/prompt, answer, tags).
type rawTask struct {
	ID          json.RawMessage `json:"id"`
	TaskID      json.RawMessage `json:"task_id"`
	Domain      string          `json:"domain"`
	Instruction string          `json:"instruction"`
	Question    string          `json:"question"`
	Prompt      string          `json:"prompt"`
	EnvMode     string          `json:"env_mode"`
	Mode        string          `json:"mode"`
	Answer      json.RawMessage `json:"answer"`
	Proxy       bool            `json:"proxy"`
	FixedIP     bool            `json:"fixed_ip"`
	Tags        []string        `json:"tags"`
	Tag         string          `json:"tag"`
	EnvConfig   map[string]any  `json:"env_config"`
}

// ParseTask converts one task JSON object into a Task. defaultDomain is used
// when the object has none (the OSWorld index's domain); where names the
// object in errors.
func ParseTask(raw []byte, defaultDomain, where string) (*pb.Task, error) {
	if len(raw) > MaxTaskBytes {
		return nil, &Error{Where: where, Msg: fmt.Sprintf("larger than %d bytes", MaxTaskBytes)}
	}
	// encoding/json takes bytes that are not UTF-8 (as U+FFFD), but the raw
	// object becomes spec_json, a protobuf string: the task could not be
	// stored, nor sent to a runner.
	if !utf8.Valid(raw) {
		return nil, &Error{Where: where, Msg: "not valid UTF-8"}
	}
	var r rawTask
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&r); err != nil {
		return nil, &Error{Where: where, Msg: "not a JSON object: " + jsonProblem(err)}
	}
	t := &pb.Task{
		Id:          jsonScalar(r.ID),
		Domain:      r.Domain,
		Instruction: firstNonEmpty(r.Instruction, r.Question, r.Prompt),
		EnvMode:     firstNonEmpty(r.EnvMode, r.Mode),
		SpecJson:    string(raw),
		Answer:      jsonScalar(r.Answer),
		Tags:        r.Tags,
	}
	if t.Id == "" {
		t.Id = jsonScalar(r.TaskID)
	}
	if t.Domain == "" {
		t.Domain = defaultDomain
	}
	if r.Tag != "" {
		t.Tags = append(t.Tags, r.Tag)
	}
	// OSWorld's top-level "snapshot" names the image the task was written
	// for; OSWorld itself reverts to the environment's configured snapshot,
	// so it stays in spec_json and is not an override. An explicit
	// env_config.snapshot is one.
	ec := &pb.EnvConfig{Proxy: r.Proxy, FixedIp: r.FixedIP}
	for k, v := range r.EnvConfig {
		switch k {
		case "action_space", "observation_type":
			return nil, &Error{Where: where, Field: "env_config." + k, Msg: "is a launch-wide setting and cannot be set per task; set it in spec.agent"}
		case "snapshot":
			s, _ := v.(string)
			ec.Snapshot = s
		case "proxy":
			b, _ := v.(bool)
			ec.Proxy = b
		case "fixed_ip":
			b, _ := v.(bool)
			ec.FixedIp = b
		default:
			if ec.Extra == nil {
				ec.Extra = map[string]string{}
			}
			ec.Extra[k] = fmt.Sprint(v)
		}
	}
	if ec.Snapshot != "" || ec.Proxy || ec.FixedIp || len(ec.Extra) > 0 {
		t.EnvConfig = ec
	}
	if field, msg := CheckTask(t); msg != "" {
		return nil, &Error{Where: where, Field: field, Msg: msg}
	}
	return t, nil
}

// jsonScalar renders a JSON string or number as text ("" for null/absent).
func jsonScalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// loadOSWorld reads an evaluation_examples tree: the index maps each domain
// to task ids, and each task lives in examples/<domain>/<id>.json (or
// <domain>/<id>.json directly under the root).
func (l *loader) loadOSWorld(dir, index string) ([]*pb.Task, error) {
	if index == "" {
		index = DefaultIndex
	}
	data, err := l.read(filepath.Join(dir, index), MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read OSWorld index: %w", err)
	}
	var idx map[string][]string
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("parse OSWorld index %s: %s", index, jsonProblem(err))
	}
	domains := make([]string, 0, len(idx))
	for d := range idx {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	var out []*pb.Task
	for di, d := range domains {
		// The names become paths here and directory names in exports; a
		// bad one is named by position, not quoted.
		if !SafeName(d) {
			return nil, &Error{Where: index, Field: fmt.Sprintf("domain %d (in name order)", di), Msg: "not a valid domain name (" + nameRule + ")"}
		}
		for i, id := range idx[d] {
			if !SafeName(id) {
				return nil, &Error{Where: index, Field: fmt.Sprintf("%s[%d]", d, i), Msg: "not a valid task id (" + nameRule + ")"}
			}
			if len(out) >= MaxTasks {
				return nil, fmt.Errorf("task source: more than %d tasks", MaxTasks)
			}
			raw, err := l.read(filepath.Join(dir, "examples", d, id+".json"), MaxTaskBytes)
			if errors.Is(err, os.ErrNotExist) {
				raw, err = l.read(filepath.Join(dir, d, id+".json"), MaxTaskBytes)
			}
			if err != nil {
				return nil, fmt.Errorf("read OSWorld task %s/%s: %w", d, id, err)
			}
			t, err := ParseTask(raw, d, d+"/"+id+".json")
			if err != nil {
				return nil, err
			}
			if t.Id != id {
				return nil, &Error{Where: d + "/" + id + ".json", Field: "id", Msg: fmt.Sprintf("is %q but the index names %q", t.Id, id)}
			}
			t.Domain = d
			if t.EnvMode == "" {
				t.EnvMode = "desktop"
			}
			out = append(out, t)
		}
	}
	return out, checkUnique(out)
}

// jsonProblem describes a JSON decoding error without quoting the input:
// encoding/json's messages quote the offending byte ("invalid character
// 'r'"), and the input may be a file the caller should not see.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %s has the wrong JSON type", te.Field)
		}
		return fmt.Sprintf("wrong JSON type at byte %d", te.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of JSON"
	}
	return "invalid JSON"
}
