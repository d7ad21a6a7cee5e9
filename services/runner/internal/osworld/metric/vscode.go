package metric

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py"
)

// The metrics of OSWorld's metrics/vscode.py: VS Code's settings and
// keybindings files, files the agent produced, and Python test suites.

// readJSONFile decodes a getter's JSON file; ok is false when the file is
// missing or not JSON (OSWorld's handlers score both 0). A file over a
// size cap is an error; one that does not read or decode is noted.
func readJSONFile(ctx context.Context, v any) (any, bool, error) {
	text, ok, err := ReadPyText(v)
	if err != nil || !ok {
		return nil, false, Because(ctx, err)
	}
	var data any
	if err := json.Unmarshal([]byte(text), &data); err != nil {
		return nil, false, Because(ctx, fmt.Errorf("%v is not JSON: %w", v, err))
	}
	return data, true, nil
}

// metricJSONSettings needs every key of rules["expected"] in the JSON file
// with an equal value.
func metricJSONSettings(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	data, ok, err := readJSONFile(ctx, result)
	if err != nil || !ok {
		return 0, err
	}
	exp, ok := pyDict(r["expected"])
	if !ok {
		return 0, fmt.Errorf("check_json_settings: expected must be an object")
	}
	if len(exp) == 0 {
		return 1, nil
	}
	got, ok := data.(map[string]any)
	if !ok {
		return 0, nil
	}
	for k, v := range exp {
		gv, ok := got[k]
		if !ok || !PyEqual(gv, v) {
			return 0, nil
		}
	}
	return 1, nil
}

// metricJSONKeybindings needs rules["expected"] among the entries of a
// keybindings.json list. VS Code writes a comment on the file's first
// line, so OSWorld retries without it when the whole file is not JSON.
func metricJSONKeybindings(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	text, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	var list []any
	for _, src := range []string{text, afterFirstLine(text)} {
		var data any
		if json.Unmarshal([]byte(src), &data) != nil {
			continue
		}
		if l, ok := data.([]any); ok {
			list = l
			break
		}
	}
	if list == nil {
		return 0, nil
	}
	in, _ := PyIn(r["expected"], list)
	return Bool(in), nil
}

// afterFirstLine is what json.load reads after f.readline().
func afterFirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// metricCompareConfig compares a file with rules["expected"] text. With
// containment_ok (the default) the expected JSON must be a subset of the
// file's JSON, or, when either is not JSON, the stripped expected text a
// substring of the file; without it the texts (or their JSON values) must
// be equal.
func metricCompareConfig(ctx context.Context, result, expected any, _ bool, opts map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	if !Truthy(r["expected"]) {
		return 0, nil
	}
	want, ok := r["expected"].(string)
	if !ok {
		return 0, fmt.Errorf("compare_config: expected must be text")
	}
	got, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	containment := true
	if v, ok := opts["containment_ok"]; ok {
		containment = Truthy(v)
	}
	var gj, wj any
	bothJSON := json.Unmarshal([]byte(got), &gj) == nil && json.Unmarshal([]byte(want), &wj) == nil
	if containment {
		if bothJSON {
			return Bool(jsonSubset(wj, gj)), nil
		}
		return Bool(strings.Contains(got, PyStrip(want))), nil
	}
	return Bool(got == want || (bothJSON && PyEqual(gj, wj))), nil
}

// jsonSubset is OSWorld's _is_subset: every key of an expected object is
// in the actual one with a subset value; lists and scalars must be equal.
func jsonSubset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return PyEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !jsonSubset(wv, gv) {
			return false
		}
	}
	return true
}

// metricExtensionInstalled is is_extension_installed: rules["expected"] in
// the result (type "contain") or not in it ("not_contain").
func metricExtensionInstalled(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	r, err := Rules(expected)
	if err != nil {
		return 0, err
	}
	typ, _ := r["type"].(string)
	if typ != "contain" && typ != "not_contain" {
		return 0, fmt.Errorf("is_extension_installed: type %v is not supported", r["type"])
	}
	in, err := PyIn(r["expected"], result)
	if err != nil {
		return 0, Because(ctx, err)
	}
	return Bool(in == (typ == "contain")), nil
}

// metricCompareResultFiles compares two stripped text files: when the
// expected one is a number, its text inside the result's, or the result's
// number within 1e-4, passes; otherwise the texts must be equal.
func metricCompareResultFiles(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	a, ok, err := ReadPyText(result)
	if err != nil || !ok {
		return 0, Because(ctx, err)
	}
	b, ok, err := ReadPyText(expected)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, nil
	}
	src, tgt := PyStrip(a), PyStrip(b)
	tn, err := PyFloat(tgt)
	if err != nil {
		return Bool(src == tgt), nil
	}
	if strings.Contains(src, tgt) {
		return 1, nil
	}
	sn, err := PyFloat(src)
	if err != nil {
		return Bool(src == tgt), nil
	}
	return Bool(math.Abs(sn-tn) < 1e-4), nil
}

// pdfSimilarity is the text similarity above which compare_zip_files
// takes two PDFs as the same.
const pdfSimilarity = 0.95

// metricCompareZipFiles needs two zip archives with the same entry names
// and equal contents; PDF entries need only similar text.
func metricCompareZipFiles(ctx context.Context, result, expected any, _ bool, _ map[string]any) (float64, error) {
	if !fileExists(result) {
		return 0, nil
	}
	za, err := OpenZip(result.(string))
	if err != nil {
		return 0, Because(ctx, err)
	}
	gp, _ := expected.(string)
	zb, err := OpenZip(gp)
	if err != nil {
		return 0, fmt.Errorf("compare_zip_files: expected archive: %w", err)
	}
	entries := func(files []*zip.File) map[string]*zip.File {
		m := map[string]*zip.File{}
		for _, f := range files {
			m[f.Name] = f
		}
		return m
	}
	ea, eb := entries(za.File), entries(zb.File)
	if len(ea) != len(eb) {
		return 0, nil
	}
	for name := range ea {
		if eb[name] == nil {
			return 0, nil
		}
	}
	for name, fa := range ea {
		ca, err := ReadZipEntry(fa, MaxFile)
		if err != nil {
			return 0, Because(ctx, err)
		}
		cb, err := ReadZipEntry(eb[name], MaxFile)
		if err != nil {
			return 0, fmt.Errorf("compare_zip_files: expected archive: %w", err)
		}
		if bytes.Equal(ca, cb) {
			continue
		}
		if !strings.HasSuffix(strings.ToLower(name), ".pdf") {
			return 0, nil
		}
		ta, err := pdfText(ctx, ca)
		if err != nil {
			return 0, Because(ctx, err)
		}
		tb, err := pdfText(ctx, cb)
		if err != nil {
			return 0, fmt.Errorf("compare_zip_files: expected PDF %s: %w", name, err)
		}
		ratio, err := SequenceRatio(ctx, []rune(ta), []rune(tb))
		if err != nil {
			return 0, fmt.Errorf("compare_zip_files: %s: %w", name, err)
		}
		if ratio < pdfSimilarity {
			return 0, nil
		}
	}
	return 1, nil
}

// pdfTimeout bounds one pdftotext run.
const pdfTimeout = 30 * time.Second

// pdfText extracts a PDF's text with poppler's pdftotext. OSWorld uses
// PyPDF2, whose spacing and line breaks differ; the metric compares the
// texts by similarity, which absorbs most of that.
func pdfText(ctx context.Context, pdf []byte) (string, error) {
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		return "", fmt.Errorf("pdftotext (poppler-utils) is needed to compare PDFs: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, pdfTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-q", "-enc", "UTF-8", "-", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	var out bytes.Buffer
	stdout := &limitedBuffer{buf: &out, max: MaxFile}
	cmd.Stdout = stdout
	if err := cmd.Run(); err != nil {
		if stdout.over {
			// The write's error is lost to the broken pipe's exit status.
			return "", fmt.Errorf("pdftotext: text over %d bytes: %w", MaxFile, ErrOverCap)
		}
		return "", fmt.Errorf("pdftotext: %w", err)
	}
	// pdftotext ends each page with a form feed that PyPDF2 does not write.
	return strings.ReplaceAll(out.String(), "\f", ""), nil
}

// limitedBuffer keeps at most max bytes and fails the writer past them,
// noting that it did.
type limitedBuffer struct {
	buf  *bytes.Buffer
	max  int
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if l.buf.Len()+len(p) > l.max {
		l.over = true
		return 0, fmt.Errorf("output over %d bytes: %w", l.max, ErrOverCap)
	}
	return l.buf.Write(p)
}

// maxTestFiles and maxTestFileCount bound the files
// check_python_file_by_test_suite copies into the sandbox.
const (
	maxTestFiles     = 4 << 20
	maxTestFileCount = 1000
)

// testSuiteLimits are the sandbox limits of one test suite run.
var testSuiteLimits = py.Limits{Timeout: 60 * time.Second, CPUSeconds: 50, MemoryBytes: 1 << 30, OutputBytes: 4 << 10}

// metricPythonTestSuite is check_python_file_by_test_suite: the expected
// file is a Python test module, loaded from its own folder (put first on
// sys.path, and the working directory) and its test function (option
// test_function_name, "test" by default) called. A bool result scores
// 1 or 0, a number is clamped to [0, 1], anything else scores its truth;
// a module or a call that raises scores 0, and so does a score line out
// of [0, 1], which only the agent's modules can have printed.
//
// The agent's modules are found as OSWorld finds them: in that folder,
// the episode's cache folder, where the result getter saved them all.
// OSWorld does not read the result itself (its published tasks' vm_file
// gives only the first of the files it saves), and neither does this.
// OSWorld runs the suite in its own process; here it runs in the Python
// sandbox (no network, CPU, memory and time limits) on a copy of the
// folder, with only Debian's python3 modules installed.
func metricPythonTestSuite(ctx context.Context, _, expected any, _ bool, opts map[string]any) (float64, error) {
	if !fileExists(expected) {
		return 0, nil
	}
	fn := "test"
	if v, ok := opts["test_function_name"].(string); ok {
		fn = v
	}
	testPath := expected.(string)
	files, err := suiteFolder(filepath.Dir(testPath))
	if err != nil {
		return 0, err
	}
	python, err := debianPython()
	if err != nil {
		return 0, fmt.Errorf("check_python_file_by_test_suite: %w", err)
	}
	mark := fmt.Sprintf("OSWORLD-TEST-SCORE-%d:", time.Now().UnixNano())
	filesJSON, err := json.Marshal(files)
	if err != nil {
		return 0, err
	}
	code := fmt.Sprintf(testDriver, strconv.Quote(string(filesJSON)), strconv.Quote(filepath.Base(testPath)), strconv.Quote(fn), strconv.Quote(mark))
	res, err := py.Run(ctx, python, code, testSuiteLimits)
	if err != nil {
		return 0, fmt.Errorf("check_python_file_by_test_suite: %w", err)
	}
	i := strings.LastIndex(res.Output, mark)
	if i < 0 {
		// The suite ended the interpreter (sys.exit, a crash, a limit)
		// before a score: OSWorld's evaluator would not have survived it
		// either, and the agent's code is at fault.
		Notef(ctx, "the test suite ended Python before it printed a score")
		return 0, nil
	}
	line, _, _ := strings.Cut(res.Output[i+len(mark):], "\n")
	score, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	if err != nil {
		return 0, fmt.Errorf("check_python_file_by_test_suite: score %q: %w", line, err)
	}
	if !(score >= 0 && score <= 1) {
		// The driver clamps what it prints, so this line was written by
		// the agent's own modules, which run in the driver's process and
		// can read the marker (as in OSWorld, where they can patch the
		// evaluator): a forged score, of a suite that did not end in one.
		return 0, nil
	}
	return score, nil
}

// suiteFolder reads the regular files under dir, by their slash-separated
// paths below it, base64-encoded for the sandbox's driver. Past
// maxTestFiles bytes or maxTestFileCount files the suite is not run
// (ErrOverCap): OSWorld would have run it.
func suiteFolder(dir string) (map[string]string, error) {
	files := map[string]string{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(files) == maxTestFileCount {
			return fmt.Errorf("check_python_file_by_test_suite: more than %d files beside the suite: %w", maxTestFileCount, ErrOverCap)
		}
		b, err := boundedread.ReadFile(p, int64(maxTestFiles-total))
		if OverCap(err) != nil {
			return fmt.Errorf("check_python_file_by_test_suite: files beside the suite over %d bytes: %w", maxTestFiles, ErrOverCap)
		}
		if err != nil {
			return err
		}
		total += len(b)
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = base64.StdEncoding.EncodeToString(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check_python_file_by_test_suite: %w", err)
	}
	return files, nil
}

// debianPython is the interpreter the sandbox runs, as the py
// environment picks it: Debian's /usr/bin/python3 (which the sandbox's
// unprivileged user can execute, unlike a per-user install), else python3
// on PATH.
func debianPython() (string, error) {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3", nil
	}
	return exec.LookPath("python3")
}

// testDriver writes the files into the sandbox's directory, silences the
// suite's output (so the score line is not lost past the output cap) and
// loads and calls the test as OSWorld's check_python_file_by_test_suite
// does. Its arguments: the files (JSON of base64), the test file's name,
// the function name, the score marker.
const testDriver = `import base64, importlib.util, json, math, os, sys, uuid
for _name, _data in json.loads(%s).items():
    if os.path.dirname(_name):
        os.makedirs(os.path.dirname(_name), exist_ok=True)
    with open(_name, "wb") as _f:
        _f.write(base64.b64decode(_data))
_TEST, _FUNC, _MARK = %s, %s, %s
_real = os.dup(1)
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 1)
os.dup2(_null, 2)

def _score():
    test_dir = os.getcwd()
    if test_dir not in sys.path:
        sys.path.insert(0, test_dir)
    name = "dynamic_test_module_" + uuid.uuid4().hex[:8]
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(test_dir, _TEST))
        if spec is None or spec.loader is None:
            return 0.0
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception:
        return 0.0
    try:
        if not hasattr(module, _FUNC):
            return 0.0
        fn = getattr(module, _FUNC)
        if not callable(fn):
            return 0.0
    except Exception:
        return 0.0
    try:
        result = fn()
        if isinstance(result, bool):
            return 1.0 if result else 0.0
        if isinstance(result, (int, float)):
            return max(0.0, min(1.0, float(result)))
        return 1.0 if bool(result) else 0.0
    except Exception:
        return 0.0

try:
    _s = _score()
except Exception:
    _s = 0.0
os.write(_real, ("\n" + _MARK + repr(_s) + "\n").encode())
`
