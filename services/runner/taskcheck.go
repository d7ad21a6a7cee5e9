package runner

import (
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
)

// MissingFeature is a setup step, getter or metric that an OSWorld task
// needs and this runner cannot run.
type MissingFeature struct {
	Kind   string `json:"kind"` // "app", "step", "getter", "metric" or "option"
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
}

// CheckOSWorldTask says what of an OSWorld task (its JSON, as a desktop
// task's spec) this runner cannot run with nothing offered (no Google
// settings, a guest image without VS Code): nothing when it is fully
// supported. It is the same check the runner makes before an episode, so
// `rollout tasks check` agrees with what a rollout does; an error means the
// task does not parse, which the episode would report too.
func CheckOSWorldTask(spec []byte) ([]MissingFeature, error) {
	return CheckOSWorldTaskWith(spec, TaskOffer{})
}

// TaskOffer is what a runner and its guest image offer to OSWorld tasks
// beyond the runner's steps, getters and metrics.
type TaskOffer struct {
	// Google are the settings of --google-settings; nil refuses the tasks
	// that act on a Google account.
	Google *GoogleSettings
	// VSCode says the guest image has VS Code (built with VSCODE_DEB);
	// false refuses the tasks that run `code` or read VS Code's state, as
	// the runner does on a guest without it.
	VSCode bool
}

// GoogleSettings are the Google account settings a runner is given with
// --google-settings.
type GoogleSettings = osworld.GoogleSettings

// LoadGoogleSettings reads a --google-settings folder: OSWorld's
// googledrive/settings.yml with the credentials it names, and
// google/settings.json. A bad file is an error naming it and the field.
func LoadGoogleSettings(dir string) (*GoogleSettings, error) {
	return osworld.LoadGoogleSettings(dir)
}

// CheckOSWorldTaskWith is CheckOSWorldTask for a runner and guest image
// offering o: with Google settings, the googledrive and login steps and
// the googledrive_file getter are supported; with VS Code, the tasks that
// run it. The runner judges a task with the same function
// (osworld.Task.MissingFor), asking the guest whether it has VS Code.
func CheckOSWorldTaskWith(spec []byte, o TaskOffer) ([]MissingFeature, error) {
	t, err := osworld.ParseTask(spec)
	if err != nil {
		return nil, err
	}
	var out []MissingFeature
	for _, m := range t.MissingFor(osworld.Offer{Google: o.Google, Apps: &osworld.GuestApps{VSCode: o.VSCode}}) {
		out = append(out, MissingFeature{Kind: m.Kind, Name: m.Name, Reason: m.Reason})
	}
	return out, nil
}

// OSWorldSupport lists the step, getter and metric names this runner has.
func OSWorldSupport() (steps, getters, metrics []string) {
	return osworld.SupportedSteps(), osworld.SupportedGetters(), osworld.SupportedMetrics()
}
