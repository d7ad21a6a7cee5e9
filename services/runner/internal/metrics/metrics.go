// Package metrics scores final answers of benchmark tasks (seed 001's
// evaluation_metric): exact_match, f1_score, similarity, contains_answer,
// numeric_match and llm_judgement. Scores are in [0, 1].
package metrics

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// Judge asks a model whether an answer is right (llm_judgement).
type Judge interface {
	Judge(ctx context.Context, question, reference, prediction string) (float64, error)
}

// maxLen bounds the strings the quadratic metrics look at.
const maxLen = 10000

type metric func(ctx context.Context, question, pred, ref string, j Judge) (float64, error)

var registry = map[string]metric{
	"exact_match":     func(_ context.Context, _, p, r string, _ Judge) (float64, error) { return ExactMatch(p, r), nil },
	"f1_score":        func(_ context.Context, _, p, r string, _ Judge) (float64, error) { return F1(p, r), nil },
	"similarity":      func(_ context.Context, _, p, r string, _ Judge) (float64, error) { return Similarity(p, r), nil },
	"contains_answer": func(_ context.Context, _, p, r string, _ Judge) (float64, error) { return ContainsAnswer(p, r), nil },
	"numeric_match":   func(_ context.Context, _, p, r string, _ Judge) (float64, error) { return NumericMatch(p, r), nil },
	"llm_judgement": func(ctx context.Context, q, p, r string, j Judge) (float64, error) {
		if j == nil {
			return 0, fmt.Errorf("llm_judgement needs a judge model")
		}
		return j.Judge(ctx, q, r, p)
	},
}

// Names lists the metrics.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Known reports whether name is a metric.
func Known(name string) bool { _, ok := registry[name]; return ok }

// Score scores a prediction against the reference with the named metric.
func Score(ctx context.Context, name, question, pred, ref string, j Judge) (float64, error) {
	m, ok := registry[name]
	if !ok {
		return 0, fmt.Errorf("unknown metric %q", name)
	}
	return m(ctx, question, pred, ref, j)
}

var (
	boxedRe = regexp.MustCompile(`\\boxed\{([^{}]*)\}`)
	article = regexp.MustCompile(`\b(a|an|the)\b`)
)

// Normalize lowercases, drops punctuation and articles and collapses
// whitespace (SQuAD's normalize_answer), after unwrapping \boxed{...}.
func Normalize(s string) string {
	if m := boxedRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		s = m[len(m)-1][1]
	}
	s = strings.ToLower(s)
	s = strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) {
			return -1
		}
		return r
	}, s)
	s = article.ReplaceAllString(s, " ")
	return strings.Join(strings.Fields(s), " ")
}

// ExactMatch is 1 when the normalized strings are equal.
func ExactMatch(pred, ref string) float64 {
	if Normalize(pred) == Normalize(ref) {
		return 1
	}
	return 0
}

// F1 is the token-level F1 of the normalized strings.
func F1(pred, ref string) float64 {
	p, r := strings.Fields(Normalize(pred)), strings.Fields(Normalize(ref))
	if len(p) == 0 || len(r) == 0 {
		if len(p) == len(r) {
			return 1
		}
		return 0
	}
	counts := map[string]int{}
	for _, t := range r {
		counts[t]++
	}
	common := 0
	for _, t := range p {
		if counts[t] > 0 {
			counts[t]--
			common++
		}
	}
	if common == 0 {
		return 0
	}
	prec := float64(common) / float64(len(p))
	rec := float64(common) / float64(len(r))
	return 2 * prec * rec / (prec + rec)
}

// Similarity is 1 − Levenshtein(a, b)/max(|a|, |b|) over the normalized
// strings, in runes.
func Similarity(pred, ref string) float64 {
	a, b := []rune(Normalize(pred)), []rune(Normalize(ref))
	if len(a) > maxLen {
		a = a[:maxLen]
	}
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return 1 - float64(prev[len(b)])/float64(max(len(a), len(b)))
}

// ContainsAnswer is 1 when the normalized prediction contains the
// normalized reference.
func ContainsAnswer(pred, ref string) float64 {
	r := Normalize(ref)
	if r == "" {
		return 0
	}
	if strings.Contains(" "+Normalize(pred)+" ", " "+r+" ") || strings.Contains(Normalize(pred), r) {
		return 1
	}
	return 0
}

var numRe = regexp.MustCompile(`-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*-?\d+(?:\.\d+)?)?|-?\.\d+`)

// ParseNumber reads the last number in s: integers, decimals with
// thousands separators, exponents, fractions a/b, \boxed{} answers.
func ParseNumber(s string) (float64, bool) {
	if m := boxedRe.FindAllStringSubmatch(s, -1); len(m) > 0 {
		s = m[len(m)-1][1]
	}
	if len(s) > maxLen {
		s = s[len(s)-maxLen:]
	}
	all := numRe.FindAllString(s, -1)
	if len(all) == 0 {
		return 0, false
	}
	n := strings.ReplaceAll(all[len(all)-1], ",", "")
	if num, den, ok := strings.Cut(n, "/"); ok {
		a, err1 := strconv.ParseFloat(strings.TrimSpace(num), 64)
		b, err2 := strconv.ParseFloat(strings.TrimSpace(den), 64)
		if err1 != nil || err2 != nil || b == 0 {
			return 0, false
		}
		return a / b, true
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// NumericMatch compares the last numbers of prediction and reference with
// a relative tolerance of 1e-6.
func NumericMatch(pred, ref string) float64 {
	p, ok1 := ParseNumber(pred)
	r, ok2 := ParseNumber(ref)
	if !ok1 || !ok2 {
		return 0
	}
	if math.Abs(p-r) <= 1e-6*max(1, math.Abs(r)) {
		return 1
	}
	return 0
}
