package command

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// modeCounts counts the tasks under path (as `rollout run --data` takes
// it) per env mode ("osworld" counts as "desktop"), so that VMs start only
// when some task needs one and a mode's data is asked for before anything
// starts. A task without env_mode (or mode) runs in defaultMode. The
// coordinator reads the tasks again and is the judge of their content: this
// reads only the modes, and an error means "cannot tell".
func modeCounts(path, defaultMode string) (map[string]int, error) {
	modes, err := taskModes(path)
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, m := range modes {
		if m == "" {
			m = defaultMode
		}
		if m == "osworld" {
			m = "desktop"
		}
		counts[m]++
	}
	return counts, nil
}

// taskModes returns the env mode of every task under path ("" for none):
// a JSONL file, a JSON array, a single JSON object, a directory of such
// files, or an OSWorld evaluation_examples tree with test_all.json.
func taskModes(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return fileModes(path)
	}
	if _, err := os.Stat(filepath.Join(path, "test_all.json")); err == nil {
		return osworldModes(path)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !(strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl")) {
			continue
		}
		modes, err := fileModes(filepath.Join(path, name))
		if err != nil {
			return nil, err
		}
		out = append(out, modes...)
	}
	return out, nil
}

// modeFields are the fields of a task that name its env mode.
type modeFields struct {
	EnvMode string `json:"env_mode"`
	Mode    string `json:"mode"`
}

func (m modeFields) mode() string {
	if m.EnvMode != "" {
		return m.EnvMode
	}
	return m.Mode
}

func fileModes(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\ufeff")))
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var tasks []modeFields
		if err := json.Unmarshal(trimmed, &tasks); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out := make([]string, len(tasks))
		for i, t := range tasks {
			out[i] = t.mode()
		}
		return out, nil
	}
	if len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(trimmed) {
		var t modeFields
		if err := json.Unmarshal(trimmed, &t); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return []string{t.mode()}, nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20+1)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var t modeFields
		if err := json.Unmarshal(line, &t); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, t.mode())
	}
	return out, sc.Err()
}

func osworldModes(dir string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "test_all.json"))
	if err != nil {
		return nil, err
	}
	var idx map[string][]string
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("test_all.json: %w", err)
	}
	domains := make([]string, 0, len(idx))
	for d := range idx {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	var out []string
	for _, d := range domains {
		for _, id := range idx[d] {
			if !filepath.IsLocal(d) || !filepath.IsLocal(id) {
				return nil, errors.New("test_all.json: a domain or task id is not a plain name")
			}
			raw, err := os.ReadFile(filepath.Join(dir, "examples", d, id+".json"))
			if errors.Is(err, os.ErrNotExist) {
				raw, err = os.ReadFile(filepath.Join(dir, d, id+".json"))
			}
			if err != nil {
				return nil, err
			}
			var t modeFields
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, fmt.Errorf("%s/%s.json: %w", d, id, err)
			}
			out = append(out, t.mode())
		}
	}
	return out, nil
}
