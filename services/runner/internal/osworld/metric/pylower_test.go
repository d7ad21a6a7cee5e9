package metric

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
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
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3")
		}
		t.Skip("no python3")
	}
	rng := rand.New(rand.NewPCG(4, 2))
	alphabet := []string{"Σ", "Σ", "σ", "İ", "A", "a", "ǅ", "1", " ", ".", "'", ":", "\u0301", "\u00ad", "ʰ", "^", "-", "Ω", "ß", "\u2160", "ª"}
	var texts []string
	for range 5000 {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", pythonLower)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want []string
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(texts) {
		t.Fatalf("python3 answered %d texts of %d: %v", len(want), len(texts), err)
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
