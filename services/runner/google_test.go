package runner_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/episode"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/taskfile"
)

// googleSettingsDir writes a --google-settings folder in OSWorld's shape
// whose saved credentials name tokenURL.
func googleSettingsDir(t *testing.T, tokenURL string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"googledrive/settings.yml": "client_config_backend: file\nclient_config_file: evaluation_examples/settings/googledrive/client_secrets.json\n" +
			"save_credentials: True\nsave_credentials_backend: file\nsave_credentials_file: evaluation_examples/settings/googledrive/credentials.json\nget_refresh_token: True\n",
		"googledrive/client_secrets.json": `{"installed": {"client_id": "c", "client_secret": "s"}}`,
		"googledrive/credentials.json":    fmt.Sprintf(`{"refresh_token": "revoked", "token_uri": %q, "token_expiry": "2024-01-01T00:00:00Z", "access_token": "old"}`, tokenURL),
		"google/settings.json":            `{"email": "a@example.com", "password": "p"}`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const googleTask = `{"id": "gd", "instruction": "x", "config": [
  {"type": "googledrive", "parameters": {"settings_file": "evaluation_examples/settings/googledrive/settings.yml", "operation": ["delete"], "args": [{"query": "title = 'emails' and 'root' in parents", "trash": false}]}},
  {"type": "login", "parameters": {"settings_file": "evaluation_examples/settings/google/settings.json", "platform": "googledrive"}}],
 "evaluator": {"func": "compare_pdfs", "result": {"type": "googledrive_file", "path": ["a.pdf"], "dest": "a.pdf"}, "expected": {"type": "googledrive_file", "path": ["b.pdf"], "dest": "b.pdf"}}}`

// TestGoogleTokenRefusedIsEnvError: a token endpoint that refuses the
// saved refresh token fails the episode's setup as env_error, with
// Google's reason, before any model call.
func TestGoogleTokenRefusedIsEnvError(t *testing.T) {
	guest := startDesktopd(t)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step", Reply: "DONE"}}})
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error": "invalid_grant", "error_description": "Token has been expired or revoked."}`)
	}))
	t.Cleanup(tokens.Close)
	g, err := runner.LoadGoogleSettings(googleSettingsDir(t, tokens.URL+"/token"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "task.json")
	if err := os.WriteFile(p, []byte(googleTask), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, err := taskfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	run := func(o episode.Options) *rmv1.Episode {
		o.CacheDir = dir
		return episode.Run(ctxT(t, time.Minute), episode.Deps{Chat: gw.Client, Log: zaptest.NewLogger(t)}, o, episode.Spec{
			Episode: &rmv1.Episode{EpisodeId: "gd"}, Task: tasks[0], Agent: &rmv1.AgentConfig{MaxTurns: 2}, Guest: guest.URL,
		}).Episode
	}
	ep := run(episode.Options{Google: g})
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "env_error" ||
		!strings.Contains(ep.GetError(), "invalid_grant: Token has been expired or revoked.") || !strings.Contains(ep.GetError(), "googledrive") {
		t.Errorf("episode %s reason %q error %q, want FAILED env_error with the token endpoint's reason", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
	}
	ep = run(episode.Options{})
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED || ep.GetFailureReason() != "unsupported_step:googledrive" || !strings.Contains(ep.GetError(), "--google-settings") {
		t.Errorf("without settings: episode %s reason %q error %q, want UNSUPPORTED naming the step and the flag", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
	}
	if n := gw.Fake.Stats().Requests; n != 0 {
		t.Errorf("%d model calls, want none: both episodes end before the first turn", n)
	}
}
