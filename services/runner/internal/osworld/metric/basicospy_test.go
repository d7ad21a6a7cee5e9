package metric

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// basicOSPyDriver scores random getter outputs with OSWorld's basic_os.py
// and prints them as osworldpy.Case JSON. argv: metrics directory, seed,
// number of cases.
const basicOSPyDriver = `
import json, random, os, io, contextlib
basic = load("basic_os", os.path.join(sys.argv[1], "basic_os.py"))
rng = random.Random(int(sys.argv[2]))

APPS = ["'a.desktop'", '"b.desktop"', "'c.desktop'", "'a.desktop'"]
def apps():
    k = rng.randrange(6)
    if k == 0:
        return rng.choice(["@as []", "[]", "", "None", "['a.desktop',]", "['a.desktop' 'b.desktop']", "[1, 2]"])
    return "[" + ", ".join(rng.sample(APPS, rng.randrange(4))) + "]" + rng.choice(["", "\n", " "])
def timedatectl():
    lines = ["               Local time: Thu 2024-01-25 12:56:06 WET", "           Universal time: Thu 2024-01-25 12:56:06 UTC",
             "                 RTC time: Thu 2024-01-25 12:56:05",
             rng.choice(["                Time zone: Etc/UTC (UTC, +0000)", "                Time zone: Asia/Hong_Kong (HKT, +0800)",
                         "Time zone: X (Y, +0000) ", "Time zone: X (Y, +0000)\r"]),
             "System clock synchronized: yes"]
    return "\n".join(lines[:rng.choice([2, 3, 4, 5, 5, 5])]) + rng.choice(["", "\n"])
NAMES = ["a.jpg", "b.jpg", "c.png"]

cases = []
for _ in range(int(sys.argv[3])):
    m = rng.choice(["check_gnome_favorite_apps", "is_utc_0", "check_moved_jpgs", "is_in_vm_clickboard"])
    expected = None
    if m == "check_gnome_favorite_apps":
        result = apps()
        expected = {"expected": rng.sample(["a.desktop", "b.desktop", "c.desktop"], rng.randrange(4))}
    elif m == "is_utc_0":
        result = timedatectl()
    elif m == "check_moved_jpgs":
        result = {"children": [{"name": n} for n in rng.sample(NAMES + ["a.jpg"], rng.randrange(5))]}
        expected = {"expected": rng.sample(NAMES, rng.randrange(4))}
    else:
        result = {"expected": rng.choice(["a b", "x", ["a", "b"], ["x"], [], ""])}
        expected = rng.choice(["a b c", "x\n", "", "b a"])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = [result] if m == "is_utc_0" else [result, expected]
            score = float(getattr(basic, m)(*args))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": expected, "score": score})
print(json.dumps(cases))
`

// TestOSMetricsMatchBasicOSPy scores random getter outputs with
// check_gnome_favorite_apps, is_utc_0, check_moved_jpgs and
// is_in_vm_clickboard here and in OSWorld's basic_os.py (eval() of a
// Python list, timedatectl's fourth line, directory trees), and wants the
// same scores. The favourites are what gsettings prints (a list literal or
// "@as []") and lists cut or joined wrong; a tuple, which eval() also
// takes, gsettings never prints. It runs only when OSWORLD_REF names an
// OSWorld checkout.
func TestOSMetricsMatchBasicOSPy(t *testing.T) {
	out := osworldpy.Run(t, basicOSPyDriver, nil, osworldpy.MetricsDir(t), "1", "20000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return General()[c.Metric].Fn(context.Background(), c.Result, c.Expected, c.Expected != nil, nil)
	})
}
