// Package sandboxtest is for tests that run Python in the py sandbox:
// Need skips them where the sandbox cannot run, and fails them in CI,
// where it must.
package sandboxtest

import (
	"os"
	"os/exec"
	"testing"
)

// Need skips t where prlimit and network namespaces (unshare --net), which
// the sandbox runs on, are not available; in CI (CI set) it fails t.
func Need(t testing.TB) {
	t.Helper()
	if err := exec.Command("prlimit", "--", "unshare", "--net", "--", "true").Run(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Python sandbox cannot run here (prlimit + unshare --net): %v", err)
		}
		t.Skipf("the Python sandbox cannot run here (prlimit + unshare --net): %v", err)
	}
}
