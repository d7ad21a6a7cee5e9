package media

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// needTools skips a test whose external programs are missing, except in CI
// (CI set), where their absence is a failure: the runner needs them.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed", n)
			}
			t.Skipf("%s is not installed", n)
		}
	}
}

// run runs a fixture-making command and fails the test on error.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// execTimeout runs a command under a deadline and returns its output.
func execTimeout(d time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pdfDir != "" {
		os.RemoveAll(pdfDir)
	}
	os.Exit(code)
}

// TestMissingTools: without its programs a metric errs instead of scoring
// (two videos that cannot be read would otherwise count as equal).
func TestMissingTools(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, name := range []string{"compare_videos", "compare_audios", "compare_pdfs", "check_pdf_pages", "compare_pdf_images"} {
		exp := any(fixture("src.png"))
		if name == "check_pdf_pages" {
			exp = map[string]any{"relation": "eq", "ref_value": 1.0}
		}
		if _, err := Metrics()[name].Fn(context.Background(), fixture("src.png"), exp, true, nil); err == nil {
			t.Errorf("%s without its programs: no error", name)
		}
	}
}
