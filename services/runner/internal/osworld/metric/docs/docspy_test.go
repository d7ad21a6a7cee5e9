package docs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// docsPyDriver runs OSWorld's docs.py (in the metrics directory argv[1])
// on the jobs in the JSON file named by argv[2] and prints one JSON line
// of scores, a raise as {"raise": name}. A job names a metric of docs.py,
// or of general.py (fuzzy_place_math reads a .docx too). The imports the
// text metrics never call are stubbed: easyocr, and scikit-image's colour
// conversions where it is not installed; rapidfuzz's fuzz.ratio is its
// definition (osworldpy.FuzzRatio).
const docsPyDriver = osworldpy.FuzzRatio + `
import json, os
stub("easyocr")
try:
    import skimage.color
except ImportError:
    stub("skimage", color=stub("skimage.color", deltaE_ciede2000=None, rgb2lab=None))
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz", ratio=ratio))
stub("pdfplumber")
docs = load("docs", os.path.join(sys.argv[1], "docs.py"))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
general = load("general", os.path.join(sys.argv[1], "general.py"))
import io, contextlib
out = []
for job in json.load(open(sys.argv[2])):
    try:
        fn = getattr(docs, job["metric"], None) or getattr(general, job["metric"])
        with contextlib.redirect_stdout(io.StringIO()):
            out.append(float(fn(*job["args"], **(job["kwargs"] or {}))))
    except Exception as e:
        out.append({"raise": type(e).__name__})
print(json.dumps(out))
`

// docsPyJob is one call of a docs.py metric: Args as docs.py takes them
// (result, then expected), Kwargs its options.
type docsPyJob struct {
	Metric string         `json:"metric"`
	Args   []any          `json:"args"`
	Kwargs map[string]any `json:"kwargs"`
}

// pythonDocx is OSWORLD_REF's metrics directory and PYTHON_DOCX, the src
// directory of python-docx 1.x; the test is skipped without either, as
// OSWorld's code is not ours to commit and python-docx 1.x is not in
// Debian.
func pythonDocx(t *testing.T) (metrics, src string) {
	t.Helper()
	metrics = osworldpy.MetricsDir(t)
	src = os.Getenv("PYTHON_DOCX")
	if src == "" {
		t.Skip("PYTHON_DOCX does not name a python-docx 1.x source tree")
	}
	return metrics, src
}

// runDocsPy runs jobs through docsPyDriver (their JSON file written in dir)
// and returns docs.py's answer for each: a score, or {"raise": name}.
func runDocsPy(t *testing.T, metrics, src, dir string, jobs []docsPyJob) []any {
	t.Helper()
	jobFile := filepath.Join(dir, "jobs.json")
	data, err := json.Marshal(jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := osworldpy.Run(t, docsPyDriver, []string{src}, metrics, jobFile)
	var want []any
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(jobs) {
		t.Fatalf("docs.py answered %d scores for %d jobs (%v): %.300s", len(want), len(jobs), err, out)
	}
	return want
}

// TestMetricsMatchDocsPy scores random document pairs with the metrics
// here and with OSWorld's own docs.py on python-docx 1.x, and wants the
// same scores (a raise in docs.py is a 0). The documents are made of what
// those metrics read: paragraph and run texts with Unicode whitespace,
// case and separators, italics, strikes, subscripts, sizes, fonts, page
// breaks, alignment and line spacing, train records and a references
// section. OSWorld's code is not ours to commit and python-docx 1.x is not
// in Debian, so it runs only when OSWORLD_REF names an OSWorld checkout and
// PYTHON_DOCX a python-docx 1.x src directory (python3 or OSWORLD_PYTHON
// with lxml, typing_extensions, numpy, PIL and odfpy).
func TestMetricsMatchDocsPy(t *testing.T) {
	metrics, src := pythonDocx(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 8))
	const pairs = 600
	var jobs []docsPyJob
	bodies := map[string]string{}
	for i := range pairs {
		a := randomDocBody(rng)
		b := a
		if rng.IntN(3) == 0 {
			b = randomDocBody(rng)
		} else if rng.IntN(2) == 0 {
			b = mutateBody(rng, a)
		}
		pa, pb := filepath.Join(dir, fmt.Sprintf("a%03d.docx", i)), filepath.Join(dir, fmt.Sprintf("b%03d.docx", i))
		writeWordXML(t, dir, filepath.Base(pa), a)
		writeWordXML(t, dir, filepath.Base(pb), b)
		bodies[pa], bodies[pb] = a, b
		pc := filepath.Join(dir, fmt.Sprintf("a%03d.docx", rng.IntN(i+1)))
		opts := map[string]any{}
		for _, k := range []string{"ignore_blanks", "ignore_case", "ignore_order", "content_only", "fuzzy_match", "delete_empty_lines"} {
			if rng.IntN(3) == 0 {
				opts[k] = rng.IntN(2) == 0
			}
		}
		fonts := map[string]any{"font_name": []string{"Arial", "Times New Roman", "DejaVu Sans"}[rng.IntN(3)]}
		breaks := map[string]any{}
		if rng.IntN(2) == 0 {
			breaks["page_break_count"] = float64(rng.IntN(3))
		}
		refs := map[string]any{}
		if rng.IntN(2) == 0 {
			refs["reference_base_result"] = []float64{0, 0.3, 0.5, 0.9}[rng.IntN(4)]
		}
		if rng.IntN(3) == 0 {
			refs["reference_indicator"] = "Sources"
		}
		jobs = append(jobs,
			docsPyJob{"compare_docx_files", []any{pa, pb}, opts},
			docsPyJob{"compare_docx_files_and_ignore_new_lines", []any{pa, pb}, map[string]any{"ignore_blanks": rng.IntN(2) == 0}},
			docsPyJob{"compare_font_names", []any{pa, fonts}, nil},
			docsPyJob{"compare_subscript_contains", []any{pa, pb}, nil},
			docsPyJob{"check_italic_font_size_14", []any{pa, pb}, nil},
			docsPyJob{"evaluate_strike_through_last_paragraph", []any{pa, pb}, nil},
			docsPyJob{"is_first_line_centered", []any{pa}, nil},
			docsPyJob{"contains_page_break", []any{pa, breaks}, nil},
			docsPyJob{"compare_line_spacing", []any{pa, pb}, nil},
			docsPyJob{"compare_references", []any{pa, pb}, refs},
			docsPyJob{"compare_unique_train_records", []any{pa, []any{pb, pc}}, nil},
		)
	}
	want := runDocsPy(t, metrics, src, dir, jobs)
	compareDocsPy(t, jobs, want, func(j docsPyJob) string { return "result body: " + bodies[j.Args[0].(string)] })
}

// compareDocsPy scores each job with the metrics here (this package's,
// else the general ones) and fails the test where a score differs from
// OSWorld's in want (a raise there: its run has no reward, a 0); show
// adds what helps to read a difference. It logs how many jobs of each
// metric OSWorld scored 1, and how many between 0 and 1, so that a test
// of only zeros shows.
func compareDocsPy(t *testing.T, jobs []docsPyJob, want []any, show func(docsPyJob) string) {
	t.Helper()
	docs, general := Metrics(), metric.General()
	bad, total, ones, between := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for i, j := range jobs {
		var result, expected any = j.Args[0], nil
		if len(j.Args) > 1 {
			expected = j.Args[1]
		}
		spec, ok := docs[j.Metric]
		if !ok {
			spec = general[j.Metric]
		}
		got, err := spec.Fn(context.Background(), result, expected, expected != nil, j.Kwargs)
		w, _ := want[i].(float64)
		total[j.Metric]++
		switch {
		case w == 1:
			ones[j.Metric]++
		case w > 0:
			between[j.Metric]++
		}
		if err != nil || math.Abs(got-w) > 1e-9 {
			if bad[j.Metric]++; bad[j.Metric] <= 3 {
				t.Errorf("%s(%v, %v) = %v, %v; OSWorld: %v\n%s", j.Metric, j.Args, j.Kwargs, got, err, want[i], show(j))
			}
		}
	}
	t.Logf("scored 1 by OSWorld: %v; between 0 and 1: %v", ones, between)
	for m, n := range bad {
		t.Errorf("%s: %d of %d scores differ from OSWorld's", m, n, total[m])
	}
}

// Words the metrics treat apart: Python's whitespace (\s, strip and
// split know NBSP, U+2003 and U+0085; not U+200B), case that lower() and
// isupper() see beyond ASCII, the separators of train records, a
// references heading.
var docWords = []string{
	"The", "cat", "SAT", "on", "mat.", "x.y", " ", "  ", "\u00a0", "\u2003", "\u0085", "\u200b", "\t",
	"İstanbul", "ǅ", "ß", "ΣΑΣ", "é", "e\u0301", ",", "08:00:00, T1, S1, 2", "08:05:00, T2, S2, 1",
	"References", "Sources", "Smith 2020.", "Smyth 2021.",
}

func randomText(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(4) {
		b.WriteString(docWords[rng.IntN(len(docWords))])
	}
	return b.String()
}

// randomRun is a w:r with a random subset of the properties the metrics
// read and a text, a tab, a break or an embedded object.
func randomRun(rng *rand.Rand) string {
	var pr strings.Builder
	props := []string{`<w:rFonts w:ascii="Arial" w:hAnsi="Arial"/>`, `<w:rFonts w:ascii="Times New Roman"/>`,
		`<w:i/>`, `<w:i w:val="0"/>`, `<w:strike/>`, `<w:strike w:val="false"/>`,
		`<w:sz w:val="28"/>`, `<w:sz w:val="24"/>`, `<w:vertAlign w:val="subscript"/>`, `<w:vertAlign w:val="superscript"/>`}
	// At most one of each pair, in schema order.
	for k := 0; k < len(props); k += 2 {
		if c := rng.IntN(4); c < 2 {
			pr.WriteString(props[k+c])
		}
	}
	var c strings.Builder
	for range 1 + rng.IntN(2) {
		switch rng.IntN(8) {
		case 0:
			c.WriteString(`<w:tab/>`)
		case 1:
			c.WriteString(`<w:br w:type="page"/>`)
		case 2:
			c.WriteString(`<w:br/>`)
		default:
			fmt.Fprintf(&c, `<w:t xml:space="preserve">%s</w:t>`, xmlEscape(randomText(rng)))
		}
	}
	return `<w:r><w:rPr>` + pr.String() + `</w:rPr>` + c.String() + `</w:r>`
}

func randomPara(rng *rand.Rand) string {
	var pr string
	if rng.IntN(3) == 0 {
		pr += []string{`<w:spacing w:line="240" w:lineRule="auto"/>`, `<w:spacing w:line="480"/>`, `<w:spacing w:line="360" w:lineRule="exact"/>`}[rng.IntN(3)]
	}
	if rng.IntN(3) == 0 {
		pr += `<w:jc w:val="` + []string{"center", "left", "both", "right"}[rng.IntN(4)] + `"/>`
	}
	var b strings.Builder
	b.WriteString(`<w:p><w:pPr>` + pr + `</w:pPr>`)
	for range rng.IntN(4) {
		b.WriteString(randomRun(rng))
	}
	b.WriteString(`</w:p>`)
	return b.String()
}

// randomDocBody is a w:body's paragraphs, kept apart by "\n" so that
// mutateBody can change one.
func randomDocBody(rng *rand.Rand) string {
	var ps []string
	for range rng.IntN(6) {
		ps = append(ps, randomPara(rng))
	}
	return strings.Join(ps, "\n")
}

// mutateBody changes, drops or adds one paragraph, or changes one run's
// properties, so that most pairs differ a little.
func mutateBody(rng *rand.Rand, body string) string {
	ps := strings.Split(body, "\n")
	if body == "" {
		ps = nil
	}
	switch k := rng.IntN(4); {
	case k == 0 || len(ps) == 0:
		i := rng.IntN(len(ps) + 1)
		ps = append(ps[:i], append([]string{randomPara(rng)}, ps[i:]...)...)
	case k == 1:
		i := rng.IntN(len(ps))
		ps = append(ps[:i], ps[i+1:]...)
	case k == 2:
		ps[rng.IntN(len(ps))] = randomPara(rng)
	default:
		i := rng.IntN(len(ps))
		for _, swap := range [][2]string{{`<w:i/>`, `<w:strike/>`}, {`<w:sz w:val="28"/>`, `<w:sz w:val="24"/>`}, {`subscript`, `superscript`}, {"  ", " "}} {
			if strings.Contains(ps[i], swap[0]) {
				ps[i] = strings.Replace(ps[i], swap[0], swap[1], 1)
				break
			}
		}
	}
	return strings.Join(ps, "\n")
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
