package metric

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuleThatCannotRunFailsEvaluation: a rule's pattern that cannot be
// run to its end (catastrophic backtracking past pyre.MatchTimeout) fails
// the evaluation: it scored 0, a reward OSWorld would not give. A Python
// raise in _match_value_to_rule (re on a number) still scores 0.
func TestRuleThatCannotRunFailsEvaluation(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("a", 40) + "!"
	jsonFile := filepath.Join(dir, "settings.json")
	prefs := filepath.Join(dir, "prefs.js")
	for p, body := range map[string]string{
		jsonFile: `{"name": "` + long + `", "size": 3}`,
		prefs:    `user_pref("mail.name", "` + long + `");` + "\n" + `user_pref("mail.size", 3);` + "\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	backtracks := map[string]any{"method": "re", "ref": `^(a+)+$`}
	raises := map[string]any{"method": "re", "ref": `3`}
	tests := []struct {
		name     string
		metric   string
		result   string
		expected map[string]any
		wantErr  string // "" for a score of 0 without error
	}{
		{"check_json, a match past the timeout", "check_json", jsonFile,
			map[string]any{"expect": []any{map[string]any{"key": []any{"name"}, "method": "re", "ref": backtracks["ref"]}}}, "match timeout"},
		{"check_json, re on a number raises", "check_json", jsonFile,
			map[string]any{"expect": []any{map[string]any{"key": []any{"size"}, "method": "re", "ref": raises["ref"]}}}, ""},
		{"check_thunderbird_prefs, a match past the timeout", "check_thunderbird_prefs", prefs,
			map[string]any{"expect": map[string]any{"mail.name": backtracks}}, "match timeout"},
		{"check_thunderbird_prefs, re on a number raises", "check_thunderbird_prefs", prefs,
			map[string]any{"expect": map[string]any{"mail.size": raises}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := General()[tt.metric].Fn(context.Background(), tt.result, tt.expected, true, nil)
			switch {
			case tt.wantErr == "" && (err != nil || got != 0):
				t.Errorf("%s = %v, %v; want 0, nil (OSWorld's evaluator raises)", tt.metric, got, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("%s = %v, %v; want an evaluation failure naming %q", tt.metric, got, err, tt.wantErr)
			}
		})
	}
}
