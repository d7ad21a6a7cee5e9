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

// randomTexts is n texts of up to maxParts pieces drawn from alphabet.
func randomTexts(rng *rand.Rand, alphabet []string, n, maxParts int) []string {
	texts := make([]string, n)
	for i := range texts {
		var b strings.Builder
		for range rng.IntN(maxParts) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts[i] = b.String()
	}
	return texts
}

// askPython runs script under python3 with texts as JSON on its stdin
// and decodes its JSON answer into answer. Without python3 the test
// skips, or fails under CI.
func askPython(t *testing.T, script string, texts []string, answer any) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3")
		}
		t.Skip("no python3")
	}
	askPythonWith(t, python, script, texts, answer)
}

// askPythonWith is askPython under a given interpreter.
func askPythonWith(t *testing.T, python, script string, texts []string, answer any) {
	t.Helper()
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	if err := json.Unmarshal(out, answer); err != nil {
		t.Fatalf("python3's answer: %v", err)
	}
}
