package metric

import (
	"math/rand/v2"
	"testing"
)

const pythonLower = `
import json, sys
print(json.dumps([s.lower() for s in json.load(sys.stdin)]))
`

// TestPyLowerMatchesPython compares PyLower with python3's str.lower() on
// random texts of cased, uncased and case-ignorable characters around Σ
// and İ.
func TestPyLowerMatchesPython(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	alphabet := []string{"Σ", "Σ", "σ", "İ", "A", "a", "ǅ", "1", " ", ".", "'", ":", "\u0301", "\u00ad", "ʰ", "^", "-", "Ω", "ß", "\u2160", "ª"}
	texts := randomTexts(rng, alphabet, 5000, 6)
	var want []string
	askPython(t, pythonLower, texts, &want)
	if len(want) != len(texts) {
		t.Fatalf("python3 answered %d texts of %d", len(want), len(texts))
	}
	bad := 0
	for i, s := range texts {
		if got := PyLower(s); got != want[i] {
			t.Errorf("PyLower(%q) = %q; Python's %q", s, got, want[i])
			if bad++; bad >= 10 {
				t.Fatal("too many differences")
			}
		}
	}
}
