package osworld

import "slices"

// Missing is one step, getter or metric that a task needs and this package
// cannot run, with why.
type Missing struct {
	// Kind is "step", "getter", "metric" or "option" (Name metric.key).
	Kind string
	Name string
	// Reason says why when the name is known but refused (an account the
	// mesh does not have); empty for a name this package does not
	// implement.
	Reason string
}

// accountOnly are the steps and getters that act on a Google account:
// OSWorld runs them with credentials from its settings files, which a
// rollout does not carry, so the tasks using them are refused by name.
var accountOnly = map[string]string{
	"googledrive":      "needs a Google Drive account",
	"login":            "needs a Google account login",
	"googledrive_file": "needs a Google Drive account",
}

// Missing lists everything the task needs that cannot run here, in task
// order (config steps, postconfig steps, then each metric with its
// getters), each name once. The runner refuses a task with any (see
// Unsupported), and `rollout tasks check` prints them all, so both say the
// same.
func (t Task) Missing() []Missing {
	var out []Missing
	seen := map[Missing]bool{}
	add := func(m Missing) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, s := range append(append([]Step{}, t.Config...), t.Evaluator.Postconfig...) {
		if r, ok := accountOnly[s.Type]; ok {
			add(Missing{Kind: "step", Name: s.Type, Reason: r})
		} else if _, ok := stepHandlers[s.Type]; !ok {
			add(Missing{Kind: "step", Name: s.Type})
		}
	}
	for i, f := range t.Evaluator.Func {
		if f == "infeasible" {
			continue
		}
		if spec, ok := metrics[f]; !ok {
			add(Missing{Kind: "metric", Name: f})
		} else {
			// An option the function does not take: OSWorld's call
			// metric(result, expected, **options) raises on it, and a
			// typo must not be scored as if the option were honoured.
			for k := range t.Evaluator.Options[i] {
				if !slices.Contains(spec.Options, k) {
					add(Missing{Kind: "option", Name: f + "." + k, Reason: "the metric takes no option " + k})
				}
			}
		}
		for _, g := range []map[string]any{t.Evaluator.Result[i], t.Evaluator.Expected[i]} {
			if g == nil {
				continue
			}
			typ, _ := g["type"].(string)
			if r, ok := accountOnly[typ]; ok {
				add(Missing{Kind: "getter", Name: typ, Reason: r})
			} else if _, ok := getters[typ]; !ok {
				add(Missing{Kind: "getter", Name: typ})
			}
		}
	}
	return out
}
