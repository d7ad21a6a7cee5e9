package media

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// configPyDriver writes random gimprc and vlcrc files and scores them with
// the configuration checks of OSWorld's gimp.py and vlc.py, printing
// {"metric", "result", "expected", "score"} as JSON ({"raise": name} for a
// raise). argv: metrics directory, output directory, seed, number of
// cases. The imports these checks never call are stubbed.
const configPyDriver = `
import json, random, os, io, contextlib
for name in ["acoustid", "cv2", "imagehash", "librosa", "numpy", "scipy", "scipy.spatial", "skimage"]:
    stub(name)
stub("fastdtw", fastdtw=None); stub("scipy.spatial.distance", cosine=None); stub("skimage.metrics", structural_similarity=None)
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
    cases.append({"metric": m, "result": result, "expected": rule, "score": score})
print(json.dumps(cases))
`

// TestConfigChecksMatchPy scores random gimprc and vlcrc files with
// check_config_status (4 published tasks) and VLC's configuration checks
// here and in OSWorld's gimp.py and vlc.py, and wants the same scores (a
// raise, or a check that returns None, is a 0). It runs only when
// OSWORLD_REF names an OSWorld checkout (python3 or OSWORLD_PYTHON runs
// it).
func TestConfigChecksMatchPy(t *testing.T) {
	out := osworldpy.Run(t, configPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, nil)
	})
}
