package osworld

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// pathDests reads the path and dest of a file getter (vm_file,
// cloud_file): single strings, or lists when multi is truthy, paired as
// Python's zip pairs them (the shorter list decides).
func pathDests(cfg map[string]any) (paths, dests []string, err error) {
	if !metric.Truthy(cfg["multi"]) {
		p, d := str(cfg, "path"), str(cfg, "dest")
		if p == "" || d == "" {
			return nil, nil, fmt.Errorf("path and dest are required strings")
		}
		return []string{p}, []string{d}, nil
	}
	pl, ok1 := cfg["path"].([]any)
	dl, ok2 := cfg["dest"].([]any)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("with multi, path and dest must be lists")
	}
	for i := range min(len(pl), len(dl)) {
		p, ok1 := pl[i].(string)
		d, ok2 := dl[i].(string)
		if !ok1 || !ok2 || p == "" || d == "" {
			return nil, nil, fmt.Errorf("path[%d] and dest[%d] must be non-empty strings", i, i)
		}
		paths, dests = append(paths, p), append(dests, d)
	}
	return paths, dests, nil
}

// gives is the set of indices a file getter hands to the metric: the
// "gives" list, [0] by default, as in OSWorld's get_vm_file and
// get_cloud_file.
func gives(cfg map[string]any) (map[int]bool, error) {
	raw, ok := cfg["gives"]
	if !ok {
		return map[int]bool{0: true}, nil
	}
	l, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("gives must be a list of indices")
	}
	out := map[int]bool{}
	for _, v := range l {
		f, ok := v.(float64)
		if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<20 {
			return nil, fmt.Errorf("gives must be a list of indices")
		}
		out[int(f)] = true
	}
	return out, nil
}

// given shapes a file getter's answer as OSWorld does: the one given
// value itself, else the list of them (empty when none was given).
func given(vals []any) any {
	if len(vals) == 1 {
		return vals[0]
	}
	if vals == nil {
		return []any{}
	}
	return vals
}

// Sources is a task's source field: where the task came from, one URL as
// a string in nearly every task, a list of them in a few
// (vs_code/ea98c5d7-...).
type Sources []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *Sources) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Sources{one}
		if one == "" {
			*s = nil
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("source must be a string or a list of strings")
	}
	*s = list
	return nil
}

// MarshalJSON writes one source back as the string it was.
func (s Sources) MarshalJSON() ([]byte, error) {
	if len(s) == 1 {
		return json.Marshal(s[0])
	}
	return json.Marshal([]string(s))
}
