package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// htmlPyDriver scores the pairs of HTML files listed in the JSON file
// argv[2] with compare_htmls of OSWorld's chrome.py (argv[1] the metrics
// directory), on BeautifulSoup with lxml, and prints their scores as a
// JSON list ({"raise": name} for a raise).
const htmlPyDriver = `
import json, os, io, contextlib
stub("rapidfuzz", fuzz=stub("rapidfuzz.fuzz")); stub("fitz"); stub("imagehash"); stub("borb", pdf=stub("borb.pdf", Document=None, PDF=None))
load(PKG + ".utils", os.path.join(sys.argv[1], "utils.py"))
chrome = load(PKG + ".chrome", os.path.join(sys.argv[1], "chrome.py"))
out = []
for job in json.load(open(sys.argv[2])):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            out.append(float(chrome.compare_htmls(job["a"], job["b"], **job["options"])))
    except Exception as e:
        out.append({"raise": type(e).__name__})
print(json.dumps(out))
`

// TestCompareHTMLsMatchesChromePy scores pairs of HTML files that
// LibreOffice Calc exported from random sheets (the published task's
// files), some edited as a person or a tool might (a line break between
// tags, a comment, upper-case tags, an attribute's quotes), with
// compare_htmls here and in OSWorld's chrome.py (BeautifulSoup on lxml),
// and wants the same scores. It runs only when OSWORLD_REF names an
// OSWorld checkout, with python3-bs4 and python3-lxml, and soffice;
// OSWORLD_SEED picks the draw.
func TestCompareHTMLsMatchesChromePy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		t.Skip("no soffice")
	}
	seed := uint64(9)
	if v := os.Getenv("OSWORLD_SEED"); v != "" {
		fmt.Sscan(v, &seed)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	cell := func() string {
		switch rng.IntN(6) {
		case 0:
			v := []string{"1", "2.5", "-3", "1000000", "0.125"}[rng.IntN(5)]
			return fmt.Sprintf(`<table:table-cell office:value-type="float" office:value="%s"><text:p>%s</text:p></table:table-cell>`, v, v)
		case 1:
			return `<table:table-cell office:value-type="date" office:date-value="2021-03-04"><text:p>03/04/21</text:p></table:table-cell>`
		case 2:
			return `<table:table-cell/>`
		}
		s := []string{"Industry", "Total &amp; all", "a  b", "Zoë", "x&lt;y", " lead", "C"}[rng.IntN(7)]
		return `<table:table-cell office:value-type="string"><text:p>` + s + `</text:p></table:table-cell>`
	}
	const sheets = 12
	var args []string
	for i := range sheets {
		var rows strings.Builder
		for range 2 + rng.IntN(4) {
			rows.WriteString("<table:table-row>")
			for range 1 + rng.IntN(4) {
				rows.WriteString(cell())
			}
			rows.WriteString("</table:table-row>")
		}
		p := filepath.Join(dir, "src", fmt.Sprintf("s%02d.fods", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body := `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
<office:body><office:spreadsheet><table:table table:name="Sheet1">` + rows.String() + `</table:table></office:spreadsheet></office:body></office:document>`
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, soffice, append([]string{"-env:UserInstallation=file://" + filepath.Join(dir, "profile"), "--headless",
		"--convert-to", "html", "--outdir", filepath.Join(dir, "out")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	var files []string
	for i := range sheets {
		p := filepath.Join(dir, "out", fmt.Sprintf("s%02d.html", i))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		// Edited copies.
		for k, edit := range []func(string) string{
			func(s string) string { return strings.Replace(s, "><", ">\n<", 1+rng.IntN(20)) },
			func(s string) string { return strings.Replace(s, "<td", "<!-- c --><td", 1) },
			func(s string) string { return strings.ReplaceAll(s, "<td", "<TD") },
			func(s string) string { return strings.Replace(s, `align="left"`, `align='left'`, 1) },
			func(s string) string { return strings.Replace(s, "</td>", "", 1) },
			func(s string) string { return strings.Replace(s, "<tr>", "<tr> ", 1) },
			func(s string) string { return strings.Replace(s, "<body", "x<body", 1) },
			func(s string) string { return strings.Replace(s, "</table>", "</table>\n\n", 1) },
			func(s string) string { return strings.ReplaceAll(s, "\n\t", "\r\n    ") },
			func(s string) string { return strings.Replace(s, "<br>", "<pre> \n </pre>", 1) },
			func(s string) string { return strings.Replace(s, "</td>", " \t</td>", 2) },
		} {
			q := filepath.Join(dir, "out", fmt.Sprintf("s%02d-e%d.html", i, k))
			if err := os.WriteFile(q, []byte(edit(string(b))), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, q)
		}
	}
	var jobs []map[string]any
	for _, a := range files {
		for range 6 {
			b := files[rng.IntN(len(files))]
			if rng.IntN(2) == 0 {
				// Mostly the same sheet, so that many pairs match.
				b = strings.SplitN(a, "-e", 2)[0]
				if !strings.HasSuffix(b, ".html") {
					b += ".html"
				}
			}
			jobs = append(jobs, map[string]any{"a": a, "b": b, "options": map[string]any{"ignore_sdnum": rng.IntN(2) == 0}})
		}
	}
	jobFile := filepath.Join(dir, "jobs.json")
	data, _ := json.Marshal(jobs)
	if err := os.WriteFile(jobFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := osworldpy.Run(t, htmlPyDriver, nil, metrics, jobFile)
	var want []any
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(jobs) {
		t.Fatalf("chrome.py answered %d scores for %d jobs (%v): %.300s", len(want), len(jobs), err, out)
	}
	bad, ones := 0, 0
	for i, j := range jobs {
		w, _ := want[i].(float64)
		if w == 1 {
			ones++
		}
		got, err := Metrics()["compare_htmls"].Fn(context.Background(), j["a"], j["b"], true, j["options"].(map[string]any))
		if err != nil || got != w {
			if bad++; bad <= 10 {
				t.Errorf("compare_htmls(%s, %s, %v) = %v, %v; OSWorld: %v", filepath.Base(j["a"].(string)), filepath.Base(j["b"].(string)), j["options"], got, err, want[i])
			}
		}
	}
	t.Logf("%d pairs, %d scored 1 by OSWorld", len(jobs), ones)
	if bad > 0 {
		t.Errorf("%d of %d scores differ", bad, len(jobs))
	}
}
