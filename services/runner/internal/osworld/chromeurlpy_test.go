package osworld

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// urlGettersDriver runs OSWorld's getters/chrome.py (in the getters
// directory argv[1]) on the jobs in the JSON file argv[2]: each names a
// getter that reads the active tab's URL, the URL (what
// get_active_url_from_accessTree would give, which is replaced by one
// that gives it) and the getter's config. It prints each answer as
// {"value": v} or {"raise": name}.
const urlGettersDriver = osworldpy.ChromeGetters + `
import json
out = []
for job in json.load(open(sys.argv[2])):
    g.get_active_url_from_accessTree = lambda env, config, u=job["url"]: u
    try:
        out.append({"value": getattr(g, "get_" + job["getter"])(None, job["config"])})
    except Exception as e:
        out.append({"raise": type(e).__name__})
print(json.dumps(out))
`

type urlGetterJob struct {
	Getter string         `json:"getter"`
	URL    string         `json:"url"`
	Config map[string]any `json:"config"`
}

// urlGetters are the getters compared, by OSWorld's name without "get_".
var urlGetters = map[string]func(string, map[string]any) (any, error){
	"active_tab_url_parse":    urlQueryFacts,
	"url_dashPart":            dashPart,
	"macys_product_url_parse": macysPathFacts,
}

// dashPart is urlDashPart without notes, shaped as the other URL getters.
func dashPart(u string, cfg map[string]any) (any, error) {
	return urlDashPart(context.Background(), u, cfg)
}

// TestURLGettersMatchChromePy gives random URLs to the getters that read
// the active tab's URL (active_tab_url_parse in 6 published tasks,
// url_dashPart and url_path_parse in one each) here and in OSWorld's
// getters/chrome.py, under the published tasks' configs and variations,
// and wants the same answer, or a failure where OSWorld's getter raises.
// The URLs mix what urlparse, parse_qs and unquote treat apart: escapes
// that are valid, invalid or not UTF-8, "+", ";" parameters, fragments,
// blank and repeated query pairs, and commas and "|" in Macy's filter
// segments. OSWorld's code is not ours to commit, so the test runs only
// when OSWORLD_REF names a checkout.
func TestURLGettersMatchChromePy(t *testing.T) {
	getters := osworldpy.GettersDir(t)
	rng := rand.New(rand.NewPCG(31, 37))
	pick := func(l ...string) string { return l[rng.IntN(len(l))] }
	escape := func() string {
		return pick("%20", "%2C", "%2F", "%3D", "%26", "%2B", "%C3%A9", "%E2%82%AC", "%E2%82", "%FF", "%FF%FE", "%C3", "%zz", "%", "%4", "%5B%5D", "%25")
	}
	text := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			switch rng.IntN(6) {
			case 0:
				b.WriteString(escape())
			case 1:
				b.WriteString(pick("+", " ", ",", "|", "é", ";", "-", "_", "\t", "~"))
			default:
				b.WriteString(pick("shirts", "Shirt", "short-sleeve", "Short Sleeve", "mens-clothing", "50_PERCENT_ off & more",
					"30_PERCENT_ off & more", "LAX", "2024", "a", "x"))
			}
		}
		return b.String()
	}
	segment := func() string {
		switch rng.IntN(5) {
		case 0:
			return pick("Men_regular_size_t", "Price_discount_range", "Product_department", "Sleeve_length", "k") + "," +
				pick("Price_discount_range", "Sleeve_length", "Product_department", " Men_regular_size_t ", "", "k")
		case 1:
			return text() + "," + text() + pick("", ","+text(), "|"+text())
		default:
			return text()
		}
	}
	keys := []string{"q", "locationName", "fuel_slugs[]", "fuel_slugs%5B%5D", "modelList", "departing", "zip", "puDay", "time", "k"}
	query := func() string {
		var pairs []string
		for range rng.IntN(5) {
			switch rng.IntN(6) {
			case 0:
				pairs = append(pairs, pick(keys...))
			case 1:
				pairs = append(pairs, pick(keys...)+"=")
			case 2:
				pairs = append(pairs, "")
			default:
				pairs = append(pairs, pick(keys...)+"="+text()+pick("", ","+text()))
			}
		}
		return strings.Join(pairs, pick("&", "&", "&", ";", "&amp;"))
	}
	randomURL := func() string {
		u := pick("https://www.", "https://", "http://www.", "https://www.", "") + pick("kayak.com", "macys.com", "rentalcars.com", "", "a.b:8080")
		for range rng.IntN(5) {
			u += "/" + segment()
		}
		if rng.IntN(4) == 0 {
			u += ";" + text()
		}
		if rng.IntN(3) != 0 {
			u += "?" + query()
		}
		if rng.IntN(5) == 0 {
			u += "#" + pick("", "frag", "x?q=1", "/a,b/c,d")
		}
		if rng.IntN(15) == 0 {
			u = pick(" ", "\t", "\n") + u + pick(" ", "\n", "")
		}
		return u
	}
	anyOf := func(l ...any) any { return l[rng.IntN(len(l))] }
	randomKeys := func() []any {
		var ks []any
		for range 1 + rng.IntN(4) {
			ks = append(ks, pick(append(keys, "mens_clothing", "shirts", "Men_regular_size_t", "Price_discount_range", "short_sleeve", "Sleeve_length", "Product_department")...))
		}
		return ks
	}
	var jobs []urlGetterJob
	for range 4000 {
		u := randomURL()
		cfg := map[string]any{"parse_keys": randomKeys()}
		if rng.IntN(3) == 0 {
			ks := cfg["parse_keys"].([]any)
			cfg["replace"] = map[string]any{ks[rng.IntN(len(ks))].(string): pick("time", "when")}
			if rng.IntN(4) == 0 {
				cfg["replace"] = map[string]any{"absent": "x"}
			}
		}
		if rng.IntN(3) == 0 {
			cfg["split_list"] = rng.IntN(2) == 0
		}
		jobs = append(jobs, urlGetterJob{"active_tab_url_parse", u, cfg})
		dash := map[string]any{
			"partIndex":    anyOf(-2.0, -1.0, 0.0, 2.0, 3.0, 5.0, 9.0, "3", " 2 ", "x", 2.5, -40.0, nil),
			"needDeleteId": anyOf(true, false),
			"returnType":   anyOf("json", "string", "json", "list"),
			"key":          "time",
		}
		if rng.IntN(10) == 0 {
			delete(dash, "partIndex")
		}
		jobs = append(jobs, urlGetterJob{"url_dashPart", u, dash})
		jobs = append(jobs, urlGetterJob{"macys_product_url_parse", u, map[string]any{"parse_keys": randomKeys()}})
	}
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "jobs.json")
	b, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	if err := json.Unmarshal(osworldpy.Run(t, urlGettersDriver, nil, getters, jobFile), &want); err != nil || len(want) != len(jobs) {
		t.Fatalf("chrome.py answered %d jobs of %d: %v", len(want), len(jobs), err)
	}
	bad, answers := 0, map[string]map[string]bool{}
	for i, j := range jobs {
		w := want[i]
		got, err := urlGetters[j.Getter](j.URL, j.Config)
		g := map[string]any{"raise": fmt.Sprint(err)}
		if err == nil {
			b, _ := json.Marshal(got)
			var v any
			_ = json.Unmarshal(b, &v)
			g = map[string]any{"value": v}
		}
		if answers[j.Getter] == nil {
			answers[j.Getter] = map[string]bool{}
		}
		answers[j.Getter][fmt.Sprint(w)] = true
		_, wRaise := w["raise"]
		_, gRaise := g["raise"]
		if wRaise && gRaise || !wRaise && !gRaise && reflect.DeepEqual(w["value"], g["value"]) {
			continue
		}
		if bad++; bad <= 10 {
			c, _ := json.Marshal(j.Config)
			t.Errorf("%s(%q, %s): ours %v, OSWorld's %v", j.Getter, j.URL, c, g, w)
		}
	}
	for name, seen := range answers {
		if len(seen) < 20 {
			t.Errorf("%s gave only %d different answers", name, len(seen))
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d answers differ from OSWorld's", bad, len(jobs))
	}
}
