package metrics

import (
	"context"
	"math"
	"testing"
)

func TestScore(t *testing.T) {
	tests := []struct {
		metric, pred, ref string
		want              float64
	}{
		{"exact_match", "The Answer.", "answer", 1},
		{"exact_match", "answer 2", "answer", 0},
		{"f1_score", "the cat sat", "cat sat down", 0.8},
		{"f1_score", "", "", 1},
		{"similarity", "kitten", "sitting", 1 - 3.0/7},
		{"contains_answer", "I believe it is Paris, France.", "paris", 1},
		{"contains_answer", "London", "paris", 0},
		{"numeric_match", "The result is 1,234.0 apples", "1234", 1},
		{"numeric_match", `so \boxed{3/4}`, "0.75", 1},
		{"numeric_match", "about 12", "13", 0},
		{"numeric_match", "no number", "13", 0},
	}
	for _, tt := range tests {
		got, err := Score(context.Background(), tt.metric, "q", tt.pred, tt.ref, nil)
		if err != nil {
			t.Fatalf("%s(%q, %q): %v", tt.metric, tt.pred, tt.ref, err)
		}
		if !(math.Abs(got-tt.want) <= 1e-9) {
			t.Errorf("%s(%q, %q) = %v, want %v", tt.metric, tt.pred, tt.ref, got, tt.want)
		}
	}
	if _, err := Score(context.Background(), "bleu", "q", "a", "b", nil); err == nil {
		t.Error("unknown metric gave no error")
	}
	if _, err := Score(context.Background(), "llm_judgement", "q", "a", "b", nil); err == nil {
		t.Error("llm_judgement without a judge gave no error")
	}
}

type judgeFunc func(q, r, p string) (float64, error)

func (f judgeFunc) Judge(_ context.Context, q, r, p string) (float64, error) { return f(q, r, p) }

func TestLLMJudgementPassesArguments(t *testing.T) {
	var gotQ, gotR, gotP string
	j := judgeFunc(func(q, r, p string) (float64, error) { gotQ, gotR, gotP = q, r, p; return 1, nil })
	got, err := Score(context.Background(), "llm_judgement", "question", "pred", "ref", j)
	if err != nil || got != 1 || gotQ != "question" || gotR != "ref" || gotP != "pred" {
		t.Errorf("llm_judgement = %v, %v with (%q, %q, %q)", got, err, gotQ, gotR, gotP)
	}
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"1,234.5", `\boxed{1/0}`, "-.5e3", "3 / 4", "--1", "1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseNumber(s)
		if ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("ParseNumber(%q) = %v", s, v)
		}
		_ = Similarity(s, "abc")
		_ = F1(s, "abc")
	})
}
