package media

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// configPyDriver writes random gimprc and vlcrc files and scores them with
// the configuration checks of OSWorld's gimp.py and vlc.py, printing
// {"metric", "result", "rule", "score"} as JSON ({"raise": name} for a
// raise). argv: metrics directory, output directory, seed, number of
// cases. The imports these checks never call are stubbed.
const configPyDriver = `
import sys, types, json, random, importlib.util, os, io, contextlib, logging
logging.disable(logging.CRITICAL)
def stub(name, **attrs):
    m = sys.modules.setdefault(name, types.ModuleType(name))
    m.__dict__.update(attrs)
    return m
for name in ["acoustid", "cv2", "imagehash", "librosa", "numpy", "fastdtw", "scipy", "scipy.spatial",
             "scipy.spatial.distance", "skimage", "skimage.metrics"]:
    stub(name)
sys.modules["fastdtw"].fastdtw = None
sys.modules["scipy.spatial.distance"].cosine = None
sys.modules["skimage.metrics"].structural_similarity = None
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m
gimp = load("gimp", os.path.join(sys.argv[1], "gimp.py"))
vlc = load("vlc", os.path.join(sys.argv[1], "vlc.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

GIMP = ["# comment", "", " ", "(default-image-width 800)", "(show-tooltips no)", "(theme \"Dark\")",
        "(size-of-x 1 2)", "(show-tooltips yes) ", "(a b c d)", "()", "(single)"]
VLC = ["#qt-bgcone=1", "qt-bgcone=0", "qt-bgcone=1 ", "qt-max-volume=200", "#qt-max-volume=125", "qt-minimal-view=1",
       "qt-slider-colours=0;0;0;10;10;10;20;20;20;30;30;30", "qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29",
       "qt-slider-colours=1;2", "qt-slider-colours=a;b;c", "global-key-play-pause=", "global-key-play-pause=Space",
       "one-instance-when-started-from-file=0", "play-and-exit=1", "input-record-path=/home/user/Desktop",
       "#input-record-path=", "input-record-path = /home/user ", "", "[qt]", "a=b=c", "\xe9"]
CHECKS = {
    "check_qt_bgcone": ("expected_qt_bgcone", [0, 1, "0", "1", True]),
    "check_qt_max_volume": ("expected_qt_max_volume", [125, 200, "200", 0]),
    "check_qt_minimal_view": ("expected_qt_minimal_view", [0, 1, "1"]),
    "check_global_key_play_pause": ("expected_global_key_play_pause", [0, 1, "1"]),
    "check_one_instance_when_started_from_file": ("expected_one_instance_when_started_from_file", [0, 1, "0"]),
    "check_play_and_exit": ("expected_play_and_exit", [0, 1, "1", False]),
    "is_vlc_recordings_folder": ("recording_file_path", ["/home/user/Desktop", "/home/user", ""]),
}

cases = []
for i in range(n):
    m = rng.choice(["check_config_status"] * 3 + list(CHECKS) + ["check_qt_slider_colours"] * 2)
    p = os.path.join(out, "c%05d.txt" % i)
    lines = GIMP if m == "check_config_status" else VLC
    body = "".join(rng.choice(lines) + rng.choice(["\n", "\n", "\r\n"]) for _ in range(rng.randrange(6)))
    with open(p, "w", newline="") as f:
        f.write(body)
    if m == "check_config_status":
        rule = {"key": rng.choice(["default-image-width", "show-tooltips", ["size-of-x", "1"], ["theme", "x"], ["a"]]),
                "value": rng.choice(["800", "no", "yes", "2", "\"Dark\"", "d"])}
    elif m == "check_qt_slider_colours":
        rule = rng.choice([{"type": "blackish"}, {"type": "match", "expected_qt_slider_colours": "0;0;0;10;10;10;20;20;20;30;30;30"}, {"type": "x"}])
    else:
        key, values = CHECKS[m]
        rule = {key: rng.choice(values)}
    result = rng.choice([p, p, p, p, None])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = getattr(gimp if m == "check_config_status" else vlc, m)(result, rule)
            score = None if score is None else float(score)
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "rule": rule, "score": score})
print(json.dumps(cases))
`

// TestConfigChecksMatchPy scores random gimprc and vlcrc files with
// check_config_status (4 published tasks) and VLC's configuration checks
// here and in OSWorld's gimp.py and vlc.py, and wants the same scores (a
// raise, or a check that returns None, is a 0). It runs only when
// OSWORLD_REF names an OSWorld checkout (python3 or OSWORLD_PYTHON runs
// it).
func TestConfigChecksMatchPy(t *testing.T) {
	ref := os.Getenv("OSWORLD_REF")
	if ref == "" {
		t.Skip("OSWORLD_REF does not name an OSWorld checkout")
	}
	dir := t.TempDir()
	cmd := exec.Command(cmp.Or(os.Getenv("OSWORLD_PYTHON"), "python3"), "-c", configPyDriver,
		filepath.Join(ref, "desktop_env", "evaluators", "metrics"), dir, "1", "5000")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gimp.py and vlc.py: %v: %s", err, stderr.String())
	}
	var cases []struct {
		Metric       string
		Result, Rule any
		Score        any
	}
	if err := json.Unmarshal(out, &cases); err != nil {
		t.Fatalf("the answer: %v", err)
	}
	table := Metrics()
	bad, ones := 0, map[string]int{}
	for _, c := range cases {
		want, ok := c.Score.(float64)
		if !ok {
			want = 0 // a raise or None: OSWorld's run has no reward
		}
		if want == 1 {
			ones[c.Metric]++
		}
		got, err := table[c.Metric].Fn(context.Background(), c.Result, c.Rule, true, nil)
		if err != nil || math.Abs(got-want) > 1e-9 {
			if bad++; bad <= 10 {
				var a []byte
				if p, ok := c.Result.(string); ok {
					a, _ = os.ReadFile(p)
				}
				t.Errorf("%s(%v, %v) = %v, %v; OSWorld: %v\nfile %q", c.Metric, c.Result, c.Rule, got, err, c.Score, a)
			}
		}
	}
	t.Logf("%d cases; scored 1 by OSWorld: %v", len(cases), ones)
	if bad > 0 {
		t.Errorf("%d of %d scores differ from gimp.py and vlc.py", bad, len(cases))
	}
}
