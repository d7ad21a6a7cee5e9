package daemon

import (
	"encoding/json"
	"testing"
	"time"
)

// TestVerificationDeadline: /execute_with_verification answers within
// max_wait_time (plus a little for the command itself), however long a
// check or the interval between checks would run: a check still running
// at the deadline is killed and counts as failed.
func TestVerificationDeadline(t *testing.T) {
	c := start(t, Config{Display: DisplayNone})
	const maxWait = time.Second
	// Starting the command and answering take a few milliseconds, more
	// under -race on a busy machine; the overshoots this test is about are
	// seconds.
	const margin = 1500 * time.Millisecond
	tests := []struct {
		name     string
		check    string
		interval float64
		want     int
		wantVer  string
	}{
		{name: "check outlives the deadline", check: "sleep 3", interval: 0.2, want: 500, wantVer: "failed"},
		{name: "interval outlives the deadline", check: "false", interval: 5, want: 500, wantVer: "failed"},
		{name: "check passes", check: "true", interval: 0.2, want: 200, wantVer: "passed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t0 := time.Now()
			code, body := c.postJSON("/execute_with_verification", map[string]any{
				"command":        []string{"true"},
				"verification":   map[string]any{"command_success": tt.check},
				"max_wait_time":  maxWait.Seconds(),
				"check_interval": tt.interval,
			})
			took := time.Since(t0)
			var res struct {
				Verification string
				WaitTime     float64 `json:"wait_time"`
			}
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("answer %d %s: %v", code, body, err)
			}
			t.Logf("%d, verification %s, wait_time %.3f s, took %v", code, res.Verification, res.WaitTime, took)
			if code != tt.want || res.Verification != tt.wantVer {
				t.Errorf("got %d verification %q, want %d %q", code, res.Verification, tt.want, tt.wantVer)
			}
			if took > maxWait+margin {
				t.Errorf("answer took %v, want at most max_wait_time %v + %v", took, maxWait, margin)
			}
		})
	}
}
