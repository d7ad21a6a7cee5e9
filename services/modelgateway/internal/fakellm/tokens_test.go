package fakellm

import (
	"slices"
	"strings"
	"testing"
)

func TestPieces(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"  \n", nil},
		{"one", []string{"one"}},
		{"sunny and warm", []string{"sunny", " and", " warm"}},
		{"a  b\n", []string{"a", "  b\n"}},
		{" lead", []string{" lead"}},
		{"```python\nimport pyautogui\npyautogui.click(1, 2)\n```", []string{"```python", "\nimport", " pyautogui", "\npyautogui.click(1,", " 2)", "\n```"}},
		{"héllo wörld", []string{"héllo", " wörld"}},
	}
	for _, tt := range tests {
		got := Pieces(tt.text)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Pieces(%q) = %q, want %q", tt.text, got, tt.want)
		}
		// Joined, the pieces are the text, unless it is whitespace alone.
		if strings.TrimSpace(tt.text) != "" && strings.Join(got, "") != tt.text {
			t.Errorf("Pieces(%q) joined = %q", tt.text, strings.Join(got, ""))
		}
	}
}
