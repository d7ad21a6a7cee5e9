package osworld

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// relativeTimeDriver runs OSWorld's get_rule_relativeTime (getters/misc.py
// in the getters directory argv[1]) on random configs at random instants,
// with datetime.now replaced by one that answers the case's instant in
// the zone asked. argv: getters directory, seed, number of cases. It
// prints each case: the instant (Unix seconds), the config, and the rules
// the getter answers, or {"raise": name}.
const relativeTimeDriver = `
import json, os, random, io, contextlib
from datetime import datetime, timezone, timedelta
stub("requests")
misc = load("osworld_misc_getters", os.path.join(sys.argv[1], "misc.py"))
rng, n = random.Random(int(sys.argv[2])), int(sys.argv[3])
NOW = [None]
class FixedDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW[0].astimezone(tz) if tz is not None else NOW[0].replace(tzinfo=None)
misc.datetime = FixedDatetime

SINGLE = list(misc.relativeTime_to_IntDay) + ["yesterday"]
PAIRS = [("this Saturday", "this Sunday"), ("10th next month", "11th next month"), ("next Monday", "next Friday"),
         ("next Monday split", "next Friday split"), ("next Friday", "next Sunday"), ("next Saturday", "next Sunday"),
         ("next week Friday", "next week Sunday"), ("next week Saturday", "next week Sunday"), ("tomorrow", "next Friday")]
FORMATS = ["{DoW}, {Month} {DayD}, {Year}", "{Year}-{Month0D}-{Day0D}", "{month} {DayD}", "{MonthFull} {Year}", "{MonthD}/{DayD}/{Year}",
           "{DayD}{DayD}", "plain", "{Month0D}{MonthD}"]
ZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Europe/Zurich", "Pacific/Kiritimati", "Etc/GMT+12", "Nope/Zone"]
cases = []
for _ in range(n):
    # instants from 2023 to 2030, many near a month's end or a year's
    t = datetime(2023, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(8 * 366 * 86400))
    if rng.random() < 0.3:
        t = t.replace(day=rng.choice([1, 28, 30] if t.month != 2 else [1, 28]), hour=rng.choice([0, 11, 23]))
    NOW[0] = t
    if rng.random() < 0.5:
        rel = {"from": rng.choice(SINGLE)}
        expected = {"time": rng.choice([rng.choice(FORMATS), [rng.choice(FORMATS), rng.choice(FORMATS)]])}
    else:
        a, b = rng.choice(PAIRS)
        rel = {"from": a, "to": b}
        if a == "next Monday split":
            expected = {k: rng.choice(FORMATS) for k in ["puDay", "puMonth", "puYear", "doDay", "doMonth", "doYear"]}
        else:
            expected = {"from": rng.choice(FORMATS), "to": rng.choice(FORMATS)}
    cfg = {"type": "rule_relativeTime", "rules": {"relativeTime": rel, "expected": expected, "timezone": rng.choice(ZONES)}}
    case = {"now": int(t.timestamp()), "config": json.loads(json.dumps(cfg))}
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            case["rules"] = misc.get_rule_relativeTime(None, cfg)
    except Exception as e:
        case["raise"] = type(e).__name__
    cases.append(case)
print(json.dumps(cases))
`

// TestRelativeTimeMatchesMiscPy fills random rule_relativeTime configs
// (10 published evaluator calls: every relative day OSWorld names, the
// task's pairs, every placeholder, every zone kind) at random instants
// here and with OSWorld's getters/misc.py, and wants the same rules, or
// a failure where Python raises. It runs only when OSWORLD_REF names an
// OSWorld checkout.
func TestRelativeTimeMatchesMiscPy(t *testing.T) {
	out := osworldpy.Run(t, relativeTimeDriver, nil, osworldpy.GettersDir(t), "1", "3000")
	var cases []struct {
		Now    int64          `json:"now"`
		Config map[string]any `json:"config"`
		Rules  map[string]any `json:"rules"`
		Raise  string         `json:"raise"`
	}
	if err := json.Unmarshal(out, &cases); err != nil {
		t.Fatalf("driver output: %v", err)
	}
	defer func(f func() time.Time) { timeNow = f }(timeNow)
	bad, raised := 0, 0
	for _, c := range cases {
		timeNow = func() time.Time { return time.Unix(c.Now, 0) }
		got, err := getRuleRelativeTime(context.Background(), &Session{}, c.Config)
		if from := c.Config["rules"].(map[string]any)["relativeTime"].(map[string]any)["from"]; c.Raise == "ValueError" && err == nil &&
			(from == "first monday four months later" || from == "first monday eight months later") {
			// A difference on purpose (the README's list): month 0
			// raises there, December here.
			continue
		}
		if c.Raise != "" {
			raised++
		}
		switch {
		case c.Raise != "" && err == nil:
			t.Errorf("at %s, %v: got %v; OSWorld raises %s", time.Unix(c.Now, 0).UTC(), c.Config["rules"], got, c.Raise)
		case c.Raise == "" && err != nil:
			t.Errorf("at %s, %v: %v; OSWorld gives %v", time.Unix(c.Now, 0).UTC(), c.Config["rules"], err, c.Rules)
		case c.Raise == "" && !reflect.DeepEqual(got, c.Rules):
			t.Errorf("at %s, %v:\ngot  %v\nwant %v", time.Unix(c.Now, 0).UTC(), c.Config["rules"], got, c.Rules)
		default:
			continue
		}
		if bad++; bad == 20 {
			t.Fatalf("stopping after %d differences", bad)
		}
	}
	if raised == 0 || raised == len(cases) {
		t.Errorf("%d of %d cases raise in OSWorld; want some of both", raised, len(cases))
	}
}
