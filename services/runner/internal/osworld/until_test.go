package osworld

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestExecuteUntil follows OSWorld's _execute_setup: a failed request
// counts towards 5, a successful one that misses the condition does not,
// and the step polls every 0.3 s.
func TestExecuteUntil(t *testing.T) {
	tests := []struct {
		name     string
		params   string
		fail     func(n int) bool // request n (from 1) answers 500
		metAt    int              // the condition holds from request metAt (0: never)
		wantRuns int
		wantErr  string
	}{
		{name: "met on the third try", params: `"until": {"stdout": "ready"}`, metAt: 3, wantRuns: 3},
		{name: "returncode", params: `"until": {"returncode": 0}`, metAt: 2, wantRuns: 2},
		{name: "four failed requests are retried", params: `"until": {"stdout": "ready"}`, fail: func(n int) bool { return n <= 4 }, metAt: 1, wantRuns: 5},
		{name: "five failed requests end it", params: `"until": {"stdout": "ready"}`, fail: func(int) bool { return true }, wantRuns: 5, wantErr: "5 failed requests"},
		{name: "unmet answers are not failures", params: `"until": {"stdout": "ready"}`, fail: func(n int) bool { return n%10 == 0 }, metAt: 29, wantRuns: 29},
		{name: "never met", params: `"until": {"stdout": "ready"}`, wantRuns: untilMaxTries, wantErr: "not met after 200 tries"},
		{name: "without until a failed request fails the step", params: `"shell": true`, fail: func(int) bool { return true }, wantRuns: 1, wantErr: "500"},
		{name: "without until one run", params: `"shell": true`, wantRuns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gc := newTestGuest(t)
			var runs atomic.Int32
			g.extra["/setup/execute"] = func(w http.ResponseWriter, r *http.Request) {
				n := int(runs.Add(1))
				if tt.fail != nil && tt.fail(n) {
					http.Error(w, `{"status":"error","message":"boom"}`, http.StatusInternalServerError)
					return
				}
				res := guest.ExecResult{Status: "success", Output: "starting", ReturnCode: 1}
				if tt.metAt > 0 && n >= tt.metAt {
					res = guest.ExecResult{Status: "success", Output: "ready", ReturnCode: 0}
				}
				_ = json.NewEncoder(w).Encode(res)
			}
			var sleeps []time.Duration
			s := &Session{Guest: gc, CacheDir: t.TempDir(), Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }}
			err := s.Run(context.Background(), []Step{{Type: "execute", Parameters: json.RawMessage(`{"command": "check", ` + tt.params + `}`)}})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if n := int(runs.Load()); n != tt.wantRuns {
				t.Errorf("%d runs, want %d", n, tt.wantRuns)
			}
			if len(sleeps) != tt.wantRuns-1 {
				t.Errorf("%d pauses, want %d", len(sleeps), tt.wantRuns-1)
			}
			for _, d := range sleeps {
				if d != 300*time.Millisecond {
					t.Fatalf("pause of %v, want OSWorld's 0.3 s", d)
				}
			}
		})
	}
}
