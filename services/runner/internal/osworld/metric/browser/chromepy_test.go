package browser

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// chromePyDriver draws random URLs and scores them with the URL metrics of
// OSWorld's chrome.py (through utils.py's compare_urls, urlparse and
// tldextract) and prints {"metric", "result", "expected", "score"} as
// JSON, {"raise": name} for a raise. argv: metrics directory, seed, number
// of cases. The imports these metrics never call are stubbed.
const chromePyDriver = `
import json, random, os
stub("bs4", BeautifulSoup=None, Tag=None); stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz"))
stub("fitz"); stub("imagehash"); stub("borb", pdf=stub("borb.pdf", Document=None, PDF=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
chrome = load("chrome", os.path.join(sys.argv[1], "chrome.py"))
rng = random.Random(int(sys.argv[2]))

def url():
    scheme = rng.choice(["http://", "https://", "HTTPS://", "", "", "ftp://", "chrome://"])
    user = rng.choice(["", "", "user:pw@"])
    host = rng.choice(["www.airbnb.com", "airbnb.com.sg", "WWW.Example.CO.UK", "example.co.uk", "a.b.example.com",
                       "foo.github.io", "github.io", "www.github.io", "127.0.0.1", "[::1]", "localhost", "settings",
                       "www.google.com", "google.com.hk", "xn--fiqs8s.cn", "www.", "", "example.notatld"])
    port = rng.choice(["", "", ":8080", ":"])
    path = rng.choice(["", "/", "/a", "/a/", "//x", "/A%20b", "/path;p", "/search"])
    query = rng.choice(["", "", "?q=1", "?", "?q=a&b=2", "?Q=1"])
    frag = rng.choice(["", "", "#f", "#"])
    return scheme + user + host + port + path + query + frag

cases = []
for _ in range(int(sys.argv[3])):
    m = rng.choice(["is_expected_active_tab", "is_expected_active_tab_approximate", "is_expected_tabs"])
    if m == "is_expected_tabs":
        got = [url() for _ in range(rng.randrange(3))]
        want = [rng.choice(got + [url()]) for _ in range(rng.randrange(3))]
        result, rule = [{"url": u} for u in got], {"type": "url", "urls": want}
    else:
        a = url()
        b = a if rng.random() < 0.2 else url()
        result, rule = rng.choice([{"url": b}, b]), {"type": "url", "url": a}
    try:
        score = float(getattr(chrome, m)(result, rule))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": rule, "score": score})
print(json.dumps(cases))
`

// TestURLMetricsMatchChromePy scores random URLs with is_expected_active_tab
// (5 published tasks), is_expected_active_tab_approximate and
// is_expected_tabs (4) here and in OSWorld's chrome.py, whose compare_urls
// normalises with urlparse and tldextract, and wants the same scores (a
// raise is a 0). OSWorld's code is not ours to commit, so it runs only when
// OSWORLD_REF names an OSWorld checkout, with OSWORLD_PYTHON (or python3)
// a Python with lxml, openpyxl and tldextract (Debian's
// python3-tldextract).
func TestURLMetricsMatchChromePy(t *testing.T) {
	out := osworldpy.Run(t, chromePyDriver, nil, osworldpy.MetricsDir(t), "1", "20000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, nil)
	})
}
