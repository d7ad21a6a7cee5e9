package runner

import (
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
)

// MissingFeature is a setup step, getter or metric that an OSWorld task
// needs and this runner cannot run.
type MissingFeature struct {
	Kind   string `json:"kind"` // "step", "getter" or "metric"
	Name   string `json:"name"`
	Reason string `json:"reason,omitempty"`
}

// CheckOSWorldTask says what of an OSWorld task (its JSON, as a desktop
// task's spec) this runner cannot run: nothing when it is fully
// supported. It is the same check the runner makes before an episode, so
// `rollout tasks check` agrees with what a rollout does; an error means the
// task does not parse, which the episode would report too.
func CheckOSWorldTask(spec []byte) ([]MissingFeature, error) {
	return CheckOSWorldTaskWith(spec, nil)
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

// CheckOSWorldTaskWith is CheckOSWorldTask for a runner given the Google
// settings g (nil for none): with them, the googledrive and login steps
// and the googledrive_file getter are supported.
func CheckOSWorldTaskWith(spec []byte, g *GoogleSettings) ([]MissingFeature, error) {
	t, err := osworld.ParseTask(spec)
	if err != nil {
		return nil, err
	}
	var out []MissingFeature
	for _, m := range t.MissingFor(g) {
		out = append(out, MissingFeature{Kind: m.Kind, Name: m.Name, Reason: m.Reason})
	}
	return out, nil
}

// OSWorldSupport lists the step, getter and metric names this runner has.
func OSWorldSupport() (steps, getters, metrics []string) {
	return osworld.SupportedSteps(), osworld.SupportedGetters(), osworld.SupportedMetrics()
}
