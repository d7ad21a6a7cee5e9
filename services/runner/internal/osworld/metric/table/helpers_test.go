package table

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needProgram skips a test when a program is missing, and fails it under
// CI, where install-deps provides it.
func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required under CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return p
}

// convert writes the named sources into a fresh directory and has
// LibreOffice convert them all to format in one run; it returns the
// converted paths by source name without extension.
func convert(t *testing.T, format string, sources map[string]string) map[string]string {
	t.Helper()
	soffice := needProgram(t, "soffice")
	dir := t.TempDir()
	var args []string
	for name, body := range sources {
		p := filepath.Join(dir, "src", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A private profile lets the tests run beside a user's LibreOffice
	// and beside each other.
	profile := "file://" + filepath.Join(dir, "profile")
	cmd := exec.CommandContext(ctx, soffice, append([]string{"-env:UserInstallation=" + profile, "--headless",
		"--convert-to", format, "--outdir", filepath.Join(dir, "out")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice --convert-to %s: %v\n%s", format, err, out)
	}
	ext := strings.SplitN(format, ":", 2)[0]
	out := map[string]string{}
	for name := range sources {
		base := strings.TrimSuffix(name, filepath.Ext(name))
		p := filepath.Join(dir, "out", base+"."+ext)
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("soffice made no %s: %v", p, err)
		}
		out[base] = p
	}
	return out
}

// fods wraps sheets of table:table XML in a flat ODS document with the
// given automatic styles.
func fods(styles string, sheets ...string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"
 xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
 xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0"
 xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2"
 office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
<office:automatic-styles>` + styles + `</office:automatic-styles>
<office:body><office:spreadsheet>` + strings.Join(sheets, "\n") + `</office:spreadsheet></office:body></office:document>`
}

// rules wraps rule objects as compare_table's options.
func rules(rs ...map[string]any) map[string]any {
	l := make([]any, len(rs))
	for i, r := range rs {
		l[i] = r
	}
	return map[string]any{"rules": l}
}

// score runs compare_table and fails the test on an error; with
// OSWORLD_REF set it also checks the score against OSWorld's own code.
func score(t *testing.T, result, expected any, opts map[string]any) float64 {
	t.Helper()
	got, err := compareTable(context.Background(), result, expected, expected != nil, opts)
	if err != nil {
		t.Fatalf("compare_table: %v", err)
	}
	oracle(t, "compare_table", result, expected, opts, got)
	return got
}

// oracle runs OSWorld's metric through testdata/osworld_oracle.py when
// OSWORLD_REF names an OSWorld checkout (OSWORLD_PYTHON, a Python with
// pandas and openpyxl, default python3) and reports a different score.
// A Python exception counts as 0, as compare_table scores it here.
func oracle(t *testing.T, fn string, result, expected any, opts map[string]any, got float64) {
	t.Helper()
	if os.Getenv("OSWORLD_REF") == "" {
		return
	}
	py := os.Getenv("OSWORLD_PYTHON")
	if py == "" {
		py = "python3"
	}
	in, err := json.Marshal(map[string]any{"fn": fn, "result": result, "expected": expected, "options": opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/osworld_oracle.py")
	cmd.Stdin = bytes.NewReader(append(in, '\n'))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var res struct {
		Score *float64
		Error string
	}
	// OSWorld's metrics may print before the oracle's own last line.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("oracle output %q: %v", out, err)
	}
	want := 0.0
	if res.Score != nil {
		want = *res.Score
	}
	if got != want {
		t.Errorf("%s = %v, OSWorld's code gives %v (%s)", fn, got, want, res.Error)
	}
}

// exportCSV has LibreOffice write each sheet's printed values beside the
// workbook as "<name>-<sheet>.csv", the way OSWorld's sheet_print tasks
// do in their postconfig.
func exportCSV(t *testing.T, book string) {
	t.Helper()
	soffice := needProgram(t, "soffice")
	dir := filepath.Dir(book)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	profile := "file://" + filepath.Join(t.TempDir(), "profile")
	cmd := exec.CommandContext(ctx, soffice, "-env:UserInstallation="+profile, "--headless", "--convert-to",
		"csv:Text - txt - csv (StarCalc):44,34,UTF-8,,,,false,true,true,false,false,-1", "--outdir", dir, book)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice csv export: %v\n%s", err, out)
	}
}
