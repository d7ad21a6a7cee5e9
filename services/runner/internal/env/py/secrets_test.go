package py

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
)

// TestRunPassesNoSecrets runs a local Python program while the runner holds
// its tokens in its environment, the way the daemon reads them: neither the
// command line of any process below the test nor the program's environment
// carries them, so model-written code cannot print them.
func TestRunPassesNoSecrets(t *testing.T) {
	needSandbox(t)
	const token = "peer-token-7f3c9a"
	t.Setenv("ROLLOUTMESH_PEER_TOKEN", token)
	t.Setenv("ROLLOUTMESH_AUTH_TOKEN", token)
	t.Setenv("DESKTOPD_TOKEN", token)
	lim := DefaultLimits
	lim.Timeout = 20 * time.Second
	done := make(chan struct{})
	var out string
	go func() {
		defer close(done)
		res := Run(context.Background(), New(Config{}).cfg.Python,
			"import os, time\nprint(sorted(os.environ.items()))\ntime.sleep(1.5)", lim)
		out = res.Output + res.Error
	}()
	var seenPython bool
	for !seenPython {
		select {
		case <-done:
			t.Fatalf("the program ended before its processes were seen: %s", out)
		case <-time.After(20 * time.Millisecond):
		}
		for _, p := range proctest.CheckArgv(t, token) {
			if len(p.Argv) > 0 && strings.Contains(p.Argv[0], "python") {
				seenPython = true
			}
		}
	}
	<-done
	if strings.Contains(out, token) || !strings.Contains(out, "PATH") {
		t.Errorf("the program's environment %q holds a token (or was not printed)", out)
	}
}
