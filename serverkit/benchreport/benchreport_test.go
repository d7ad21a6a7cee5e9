package benchreport

import (
	"bytes"
	"strings"
	"testing"
)

func TestGoalLine(t *testing.T) {
	tests := []struct {
		name               string
		id, goal, figure   string
		v                  Verdict
		wantID, wantFigure string
	}{
		{"plain", "mesh", "≥ 5,000 episodes/min", "5,210/min", Met, "mesh", "5,210/min"},
		{"tabs and newlines stay inside their field", "a\tb", "g", "1\n2", Missed, "a b", "1 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			Goal(&buf, tt.id, tt.goal, tt.figure, tt.v)
			line := buf.String()
			if !strings.HasPrefix(line, Prefix) || !strings.HasSuffix(line, "\n") {
				t.Fatalf("Goal wrote %q, want one line starting with %q", line, Prefix)
			}
			f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
			if len(f) != 6 {
				t.Fatalf("Goal wrote %d fields (%q), want 6", len(f), line)
			}
			if f[1] != tt.wantID || f[3] != tt.wantFigure || f[4] != string(tt.v) {
				t.Errorf("Goal fields id=%q figure=%q verdict=%q, want %q %q %q", f[1], f[3], f[4], tt.wantID, tt.wantFigure, tt.v)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	if got := Judge(true); got != Met {
		t.Errorf("Judge(true) = %q, want %q", got, Met)
	}
	if got := Judge(false); got != Missed {
		t.Errorf("Judge(false) = %q, want %q", got, Missed)
	}
}
