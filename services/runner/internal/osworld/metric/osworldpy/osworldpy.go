// Package osworldpy runs OSWorld's own metric modules (Python, from an
// OSWorld checkout) for the tests that compare our metrics with them on
// random inputs. OSWorld's code is not ours to commit, so those tests run
// only when OSWORLD_REF names a checkout; OSWORLD_PYTHON picks the
// interpreter (default python3).
package osworldpy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// Prelude starts every script Run runs. It defines stub(name, **attrs),
// which puts an empty module (with attrs) in sys.modules for an import a
// metric module makes but the compared functions never call, and
// load(name, path), which imports a module file under a name. It stubs
// the imports of OSWorld's utils.py that are not in Debian, and makes
// desktop_env.evaluators.metrics a package whose modules load() can
// register, so that "from .utils import ..." finds them. It also quiets
// logging.
const Prelude = `
import sys, types, importlib.util, logging
logging.disable(logging.CRITICAL)
def stub(name, **attrs):
    m = sys.modules.setdefault(name, types.ModuleType(name))
    m.__dict__.update(attrs)
    return m
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m
stub("formulas"); stub("xmltodict")
import lxml
lxml.cssselect = stub("lxml.cssselect", CSSSelector=lambda *a, **k: None)
PKG = "desktop_env.evaluators.metrics"
for _p in ["desktop_env", "desktop_env.evaluators", PKG]:
    stub(_p)
`

// ChromeGetters loads OSWorld's getters/chrome.py, from the getters
// directory sys.argv[1], as g: its imports that the compared getters never
// call (requests, Playwright, PyDrive) are stubbed.
const ChromeGetters = `
import os
stub("requests")
stub("playwright"); stub("playwright.sync_api", sync_playwright=None, expect=None, TimeoutError=Exception)
stub("pydrive"); stub("pydrive.auth", GoogleAuth=None)
stub("pydrive.drive", GoogleDrive=None, GoogleDriveFileList=None, GoogleDriveFile=None)
g = load("osworld_chrome_getters", os.path.join(sys.argv[1], "chrome.py"))
`

// FuzzRatio defines, in Python, rapidfuzz's fuzz.ratio as a driver stubs
// it: 100 × 2·LCS / (len1 + len2) on code points, 100 for two empty
// strings and 0 when either is None.
const FuzzRatio = `
def ratio(a, b):
    if a is None or b is None:
        return 0.0
    if not a and not b:
        return 100.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return 100.0 * 2 * prev[-1] / (len(a) + len(b))
`

// MetricsDir is the checkout's desktop_env/evaluators/metrics; the test
// is skipped when OSWORLD_REF is not set.
func MetricsDir(t testing.TB) string {
	t.Helper()
	ref := os.Getenv("OSWORLD_REF")
	if ref == "" {
		t.Skip("OSWORLD_REF does not name an OSWorld checkout")
	}
	return filepath.Join(ref, "desktop_env", "evaluators", "metrics")
}

// GettersDir is the checkout's desktop_env/evaluators/getters; the test
// is skipped when OSWORLD_REF is not set.
func GettersDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(filepath.Dir(MetricsDir(t)), "getters")
}

// Run runs Prelude and script with args under OSWORLD_PYTHON (python3),
// with pythonPath (source trees of libraries Debian lacks) on PYTHONPATH,
// and returns its standard output; the test fails if Python does.
func Run(t testing.TB, script string, pythonPath []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(cmp.Or(os.Getenv("OSWORLD_PYTHON"), "python3"), append([]string{"-c", Prelude + script}, args...)...)
	if len(pythonPath) > 0 {
		cmd.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(pythonPath, string(os.PathListSeparator)))
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("OSWorld's Python: %v: %s", err, stderr.String())
	}
	return out
}

// Case is one metric call a driver script made and its score in OSWorld:
// a number, or {"raise": name} for an exception.
type Case struct {
	Metric   string         `json:"metric"`
	Result   any            `json:"result"`
	Expected any            `json:"expected"`
	Options  map[string]any `json:"options"`
	Score    any            `json:"score"`
}

// Want is the score ours must give: OSWorld's, and 0 where it raised (its
// run has no reward, which the metrics here score 0); raised says which.
func (c Case) Want() (score float64, raised bool) {
	f, ok := c.Score.(float64)
	return f, !ok
}

// Cases decodes a driver's answer: a JSON list of Case.
func Cases(t testing.TB, out []byte) []Case {
	t.Helper()
	var cases []Case
	if err := json.Unmarshal(out, &cases); err != nil {
		t.Fatalf("OSWorld's answer: %v: %.300s", err, out)
	}
	return cases
}

// Compare scores each case with ours and fails the test where the score
// differs from OSWorld's (the first ten reported, with the result file's
// text when the result is a short text file), then logs how many each metric
// scored 1 in OSWorld, so that a test of only zeros shows.
func Compare(t testing.TB, cases []Case, ours func(Case) (float64, error)) {
	t.Helper()
	CompareWithin(t, cases, 1e-9, ours)
}

// CompareWithin is Compare for a metric whose scores are continuous and
// computed in floating point of another width (librosa's float32): a
// score within tol of OSWorld's agrees. It also logs the largest
// difference among those that agree.
func CompareWithin(t testing.TB, cases []Case, tol float64, ours func(Case) (float64, error)) {
	t.Helper()
	bad, ones, worst := 0, map[string]int{}, 0.0
	for _, c := range cases {
		want, _ := c.Want()
		if want == 1 {
			ones[c.Metric]++
		}
		got, err := ours(c)
		if d := math.Abs(got - want); err == nil && d <= tol {
			worst = max(worst, d)
			continue
		}
		if bad++; bad <= 10 {
			r, _ := json.Marshal(c.Result)
			e, _ := json.Marshal(c.Expected)
			msg := fmt.Sprintf("%s(%s, %s, %v) = %v, %v; OSWorld: %v", c.Metric, r, e, c.Options, got, err, c.Score)
			if p, ok := c.Result.(string); ok {
				if b, err := os.ReadFile(p); err == nil && len(b) < 2000 && utf8.Valid(b) {
					msg += fmt.Sprintf("\nresult file %q", b)
				}
			}
			t.Error(msg)
		}
	}
	t.Logf("%d cases; scored 1 by OSWorld: %v; largest difference of those that agree: %.3g", len(cases), ones, worst)
	if bad > 0 {
		t.Errorf("%d of %d scores differ from OSWorld's", bad, len(cases))
	}
}
