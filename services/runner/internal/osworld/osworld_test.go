package osworld

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

func TestParseTask(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantFuncs int
		wantErr   bool
	}{
		{name: "single", in: `{"id":"a","instruction":"do","evaluator":{"func":"exact_match","result":{"type":"rule","rules":{}},"expected":{"type":"rule","rules":{"expected":1}}}}`, wantFuncs: 1},
		{name: "list", in: `{"id":"a","instruction":"do","config":[{"type":"sleep","parameters":{"seconds":1}}],"evaluator":{"func":["exact_match","is_utc_0"],"conj":"or","result":[{"type":"rule","rules":1},{"type":"vm_command_line","command":"date"}],"expected":[{"type":"rule","rules":{}},null],"options":{}}}`, wantFuncs: 2},
		{name: "infeasible", in: `{"id":"a","instruction":"do","evaluator":{"func":"infeasible"}}`, wantFuncs: 1},
		{name: "no instruction", in: `{"id":"a","evaluator":{"func":"infeasible"}}`, wantErr: true},
		{name: "no func", in: `{"id":"a","instruction":"x","evaluator":{}}`, wantErr: true},
		{name: "list length mismatch", in: `{"instruction":"x","evaluator":{"func":["a","b"],"result":[{"type":"rule"}]}}`, wantErr: true},
		{name: "bad conj", in: `{"instruction":"x","evaluator":{"func":"a","conj":"xor"}}`, wantErr: true},
		{name: "step without type", in: `{"instruction":"x","config":[{}],"evaluator":{"func":"a"}}`, wantErr: true},
		{name: "not json", in: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTask([]byte(tt.in))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseTask = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTask: %v", err)
			}
			if len(got.Evaluator.Func) != tt.wantFuncs {
				t.Errorf("funcs = %v, want %d", got.Evaluator.Func, tt.wantFuncs)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		in       string
		wantKind string
		wantName string
	}{
		{in: `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"vm_command_line"},"expected":{"type":"rule"}}}`},
		{in: `{"instruction":"x","config":[{"type":"googledrive"}],"evaluator":{"func":"infeasible"}}`, wantKind: "step", wantName: "googledrive"},
		{in: `{"instruction":"x","evaluator":{"func":"no_such_metric","result":{"type":"vm_file"}}}`, wantKind: "metric", wantName: "no_such_metric"},
		{in: `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"no_such_getter"}}}`, wantKind: "getter", wantName: "no_such_getter"},
		{in: `{"instruction":"x","evaluator":{"func":"infeasible","postconfig":[{"type":"no_such_step"}]}}`, wantKind: "step", wantName: "no_such_step"},
		{in: `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"googledrive_file"}}}`, wantKind: "getter", wantName: "googledrive_file"},
		{in: `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"vm_command_line"},"expected":{"type":"rule"},"options":{"ignore_cas":true}}}`, wantKind: "option", wantName: "exact_match.ignore_cas"},
		{in: `{"instruction":"x","evaluator":{"func":"literal_match","result":{"type":"vm_command_line"},"expected":{"type":"rule"},"options":{"ignore_case":true}}}`},
	}
	for _, tt := range tests {
		task, err := ParseTask([]byte(tt.in))
		if err != nil {
			t.Fatal(err)
		}
		kind, name, bad := task.Unsupported()
		if kind != tt.wantKind || name != tt.wantName || bad != (tt.wantKind != "") {
			t.Errorf("Unsupported(%s) = %q %q %v, want %q %q", tt.in, kind, name, bad, tt.wantKind, tt.wantName)
		}
	}
}

func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.txt", "Hello  World\n")
	b := write("b.txt", "hello world")
	lst := write("l.txt", "alpha\nbeta\n")
	rules := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		metric   string
		result   any
		expected any
		opts     map[string]any
		want     float64
	}{
		{"exact", "exact_match", "hello\n", rules("expected", "hello\n"), nil, 1},
		{"exact none", "exact_match", nil, rules("expected", "x"), nil, 0},
		{"include", "check_include_exclude", "a b c", rules("include", []any{"a", "c"}, "exclude", []any{"z"}), nil, 1},
		{"exclude hit", "check_include_exclude", "a b z", rules("include", []any{"a"}, "exclude", []any{"z"}), nil, 0},
		{"in list", "match_in_list", "b", rules("expected", []any{"a", "b"}), nil, 1},
		{"fuzzy", "fuzzy_match", "abcd", rules("expected", "abce"), nil, 0.75},
		{"json", "check_direct_json_object", `{'a': 1, 'b': "x"}`, rules("expected", map[string]any{"a": 1.0}), nil, 1},
		{"json miss", "check_direct_json_object", map[string]any{"a": 2.0}, rules("expected", map[string]any{"a": 1.0}), nil, 0},
		{"json in result", "check_direct_json_object", map[string]any{"a": "xyz"}, rules("expected", map[string]any{"a": "y"}, "expect_in_result", true), nil, 1},
		{"text strict", "compare_text_file", a, b, nil, 0},
		{"text relaxed", "compare_text_file", a, b, map[string]any{"ignore_blanks": true, "ignore_case": true}, 1},
		{"text missing result", "compare_text_file", nil, b, nil, 0},
		{"check list", "check_list", lst, rules("expect", []any{"^al"}, "unexpect", []any{"gamma"}), nil, 1},
		{"utc", "is_utc_0", "a\nb\nc\n       Time zone: Etc/UTC (UTC, +0000)\n", nil, nil, 1},
		{"not utc", "is_utc_0", "a\nb\nc\n       Time zone: Asia/Tokyo (JST, +0900)\n", nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := metrics[tt.metric]
			if !ok {
				t.Fatalf("metric %s is not registered", tt.metric)
			}
			got, err := m.Fn(context.Background(), tt.result, tt.expected, tt.expected != nil, tt.opts)
			if err != nil {
				t.Fatalf("%s: %v", tt.metric, err)
			}
			if got != tt.want {
				t.Errorf("%s(%v, %v) = %v, want %v", tt.metric, tt.result, tt.expected, got, tt.want)
			}
		})
	}
}

func TestCombine(t *testing.T) {
	tests := []struct {
		conj   string
		scores []float64
		want   float64
	}{
		{"and", []float64{1, 0.5}, 0.75},
		{"and", []float64{1, 0}, 0},
		{"or", []float64{0, 0.5}, 0.5},
		{"or", nil, 0},
	}
	for _, tt := range tests {
		if got := combine(tt.conj, tt.scores); got != tt.want {
			t.Errorf("combine(%s, %v) = %v, want %v", tt.conj, tt.scores, got, tt.want)
		}
	}
}

// TestCloudFileCaches downloads over a real HTTP server once, then serves
// the cached copy when the server is gone (a local mirror works offline).
func TestCloudFileCaches(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Write([]byte("gold\n"))
	}))
	s := &Session{CacheDir: t.TempDir()}
	cfg := map[string]any{"type": "cloud_file", "path": srv.URL + "/gold.txt", "dest": "gold.txt"}
	p1, err := s.get(context.Background(), "result", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	p2, err := s.get(context.Background(), "result", cfg)
	if err != nil {
		t.Fatalf("second get after the server went away: %v", err)
	}
	b, _ := os.ReadFile(p2.(string))
	if p1 != p2 || string(b) != "gold\n" || hits != 1 {
		t.Errorf("paths %v %v, content %q, %d downloads; want one download of gold", p1, p2, b, hits)
	}
	if _, err := s.cachePath("../../etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.cachePath("../../etc/passwd"); filepath.Dir(p) != filepath.Join(s.CacheDir, "etc") {
		t.Errorf("cachePath escaped the cache: %s", p)
	}
}

func TestEvaluateUnsupportedIsNamed(t *testing.T) {
	task, err := ParseTask([]byte(`{"instruction":"x","evaluator":{"func":"no_such_metric","result":{"type":"rule","rules":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&Session{}).Evaluate(context.Background(), task, env.EvalInput{})
	u, ok := env.AsUnsupported(err)
	if !ok || u.Reason() != "unsupported_metric:no_such_metric" {
		t.Errorf("Evaluate error = %v, want unsupported metric no_such_metric", err)
	}
}

// TestEvaluateMakesCacheFolderOnlyForGetters: an episode scored without
// postconfig or getters (infeasible, or a last action of FAIL) leaves no
// folder behind; one whose evaluator reads results has its folder made
// before the getters run.
func TestEvaluateMakesCacheFolderOnlyForGetters(t *testing.T) {
	for _, tc := range []struct {
		name      string
		task      string
		in        env.EvalInput
		wantDir   bool
		wantScore float64
	}{
		{"infeasible", `{"instruction":"x","evaluator":{"func":"infeasible"}}`, env.EvalInput{LastActionFailed: true}, false, 1},
		{"last action FAIL", `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"rule","rules":{"expected":1}},"expected":{"type":"rule","rules":{"expected":1}}}}`, env.EvalInput{LastActionFailed: true}, false, 0},
		{"getters", `{"instruction":"x","evaluator":{"func":"exact_match","result":{"type":"rule","rules":"a"},"expected":{"type":"rule","rules":{"expected":"a"}}}}`, env.EvalInput{}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := ParseTask([]byte(tc.task))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "task", "episode-1")
			ev, err := (&Session{CacheDir: dir}).Evaluate(context.Background(), task, tc.in)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if ev.Score != tc.wantScore {
				t.Errorf("score = %v, want %v", ev.Score, tc.wantScore)
			}
			_, err = os.Stat(dir)
			if got := err == nil; got != tc.wantDir {
				t.Errorf("cache folder made = %v (stat: %v), want %v", got, err, tc.wantDir)
			}
		})
	}
}

func FuzzParseTask(f *testing.F) {
	f.Add([]byte(`{"id":"a","instruction":"do","evaluator":{"func":["exact_match"],"result":[{"type":"rule"}],"expected":[null]}}`))
	f.Add([]byte(`{"instruction":"x","evaluator":{"func":"a","options":[1]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		task, err := ParseTask(b)
		if err != nil {
			return
		}
		n := len(task.Evaluator.Func)
		if len(task.Evaluator.Result) != n || len(task.Evaluator.Expected) != n || len(task.Evaluator.Options) != n {
			t.Fatalf("evaluator lists of unequal length: %+v", task.Evaluator)
		}
		task.Unsupported()
	})
}
