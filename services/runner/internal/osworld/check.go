package osworld

import "slices"

// Missing is one step, getter or metric that a task needs and this package
// cannot run, with why.
type Missing struct {
	// Kind is "app" (an application the guest lacks), "step", "getter",
	// "metric" or "option" (Name metric.key).
	Kind string
	Name string
	// Reason says why when the name is known but refused (an account the
	// mesh does not have); empty for a name this package does not
	// implement.
	Reason string
}

// accountOnly are the steps and getters that act on a Google account:
// OSWorld runs them with credentials from its settings files, and so does
// this package when the runner is given a folder of them
// (--google-settings); without it, the tasks using them are refused by
// name. needs says which part of the folder each one reads.
var accountOnly = map[string]struct{ reason, needs string }{
	"googledrive":      {"needs a Google Drive account", "googledrive/settings.yml"},
	"login":            {"needs a Google account login", "google/settings.json"},
	"googledrive_file": {"needs a Google Drive account", "googledrive/settings.yml"},
}

// accountMissing is why name cannot run with the settings g, or "" when
// it can (or name needs no account).
func accountMissing(name string, g *GoogleSettings) string {
	a, ok := accountOnly[name]
	switch {
	case !ok:
		return ""
	case g == nil:
		return a.reason + ": give the runner --google-settings"
	case a.needs == "google/settings.json" && g.Account == nil,
		a.needs == "googledrive/settings.yml" && g.Drive == nil:
		return a.reason + ": the Google settings folder has no " + a.needs
	}
	return ""
}

// Offer is what a runner and its guest offer that a task may need beyond
// this package's registry: an account, and applications an image may
// lack.
type Offer struct {
	// Google are the account settings (--google-settings); nil refuses the
	// steps and getter that act on a Google account.
	Google *GoogleSettings
	// Apps are the applications the guest has, of those an image may
	// lack; nil while they are not known (before the guest answers), which
	// refuses nothing.
	Apps *GuestApps
}

// GuestApps says which applications a guest image may lack it has.
type GuestApps struct {
	// VSCode is VS Code's `code` on the guest's PATH. Debian does not ship
	// it: the full image has it only when built with VSCODE_DEB.
	VSCode bool
}

// noVSCode is why a task that needs VS Code is refused where it is not.
const noVSCode = "needs VS Code (code), which the guest image lacks: build it with VSCODE_DEB=/path/to/code.deb make guest-image-full (rollout tasks check counts these tasks with --vscode)"

// Missing is MissingFor with nothing offered: the Google account steps and
// getter are refused, the guest's applications are not judged.
func (t Task) Missing() []Missing { return t.MissingFor(Offer{}) }

// MissingFor lists everything the task needs that cannot run here with
// what o offers: an application the guest lacks first, then in task order
// (config steps, postconfig steps, then each metric with its getters),
// each name once. The runner refuses a task with any before a step acts on
// the VM (see Unsupported), and `rollout tasks check` prints them all, so
// both say the same.
func (t Task) MissingFor(o Offer) []Missing {
	var out []Missing
	seen := map[Missing]bool{}
	add := func(m Missing) {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	if o.Apps != nil && !o.Apps.VSCode && t.NeedsVSCode() {
		add(Missing{Kind: "app", Name: "vscode", Reason: noVSCode})
	}
	g := o.Google
	for _, s := range append(append([]Step{}, t.Config...), t.Evaluator.Postconfig...) {
		if r := accountMissing(s.Type, g); r != "" {
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
		for _, cfg := range []map[string]any{t.Evaluator.Result[i], t.Evaluator.Expected[i]} {
			if cfg == nil {
				continue
			}
			typ, _ := cfg["type"].(string)
			if r := accountMissing(typ, g); r != "" {
				add(Missing{Kind: "getter", Name: typ, Reason: r})
			} else if _, ok := getters[typ]; !ok {
				add(Missing{Kind: "getter", Name: typ})
			}
		}
	}
	return out
}
