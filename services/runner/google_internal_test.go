package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoogleSettingsOption: --google-settings is loaded with the runner's
// options, a bad folder stops the runner with the file and field, and the
// task check counts the Google account tasks as supported with it.
func TestGoogleSettingsOption(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"googledrive/settings.yml":     "save_credentials_file: credentials.json\n",
		"googledrive/credentials.json": `{"refresh_token": "r", "client_id": "c", "client_secret": "s"}`,
		"google/settings.json":         `{"email": "a@example.com", "password": "p"}`,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := Config{GoogleSettings: dir}.episodeOptions()
	if err != nil || o.Google == nil || o.Google.Drive == nil || o.Google.Account == nil {
		t.Fatalf("episodeOptions with a good folder = %+v, %v", o.Google, err)
	}
	if missing, err := CheckOSWorldTaskWith([]byte(googleTaskSpec), TaskOffer{Google: o.Google}); err != nil || len(missing) != 0 {
		t.Errorf("CheckOSWorldTaskWith the settings = %+v, %v; want nothing missing", missing, err)
	}
	if missing, err := CheckOSWorldTask([]byte(googleTaskSpec)); err != nil || len(missing) != 3 {
		t.Errorf("CheckOSWorldTask without settings = %+v, %v; want the two steps and the getter", missing, err)
	}
	if o, err := (Config{}).episodeOptions(); err != nil || o.Google != nil {
		t.Errorf("episodeOptions without the flag = %+v, %v; want no settings", o.Google, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "google/settings.json"), []byte(`{"email": "a@example.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Config{GoogleSettings: dir}.episodeOptions()
	for _, w := range []string{"--google-settings", "google/settings.json", "password is missing"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("a folder without the password: %v, want an error saying %q", err, w)
		}
	}
}

const googleTaskSpec = `{"id": "gd", "instruction": "x", "config": [
  {"type": "googledrive", "parameters": {"operation": ["delete"], "args": [{"query": "title = 'emails'"}]}},
  {"type": "login", "parameters": {"platform": "googledrive"}}],
 "evaluator": {"func": "compare_pdfs", "result": {"type": "googledrive_file", "path": ["a.pdf"], "dest": "a.pdf"}, "expected": {"type": "googledrive_file", "path": ["b.pdf"], "dest": "b.pdf"}}}`
