package desktop

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestSettle: the first observation waits until two screenshots in a row
// are the same, and no longer than settleMax when the screen keeps changing.
func TestSettle(t *testing.T) {
	maxShots := int(settleMax/settleInterval) + 1
	tests := []struct {
		name      string
		changes   int // screenshots that differ from the one before, then stable (-1: never stable)
		status    int
		wantShots int
		wantLast  string
		wantErr   bool
	}{
		{name: "already still", changes: 0, wantShots: 2, wantLast: "shot-0"},
		{name: "still after three changes", changes: 3, wantShots: 5, wantLast: "shot-3"},
		{name: "never still", changes: -1, wantShots: maxShots, wantLast: fmt.Sprintf("shot-%d", maxShots-1)},
		{name: "guest fails", status: http.StatusInternalServerError, wantShots: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var shots atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/screenshot" {
					http.NotFound(w, r)
					return
				}
				n := int(shots.Add(1)) - 1
				if tt.status != 0 {
					http.Error(w, "broken", tt.status)
					return
				}
				if tt.changes >= 0 && n > tt.changes {
					n = tt.changes
				}
				w.Header().Set("Content-Type", "image/png")
				fmt.Fprintf(w, "shot-%d", n)
			}))
			defer srv.Close()
			g, err := guest.New(srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			g.Retries, g.RetryWait = 1, 0
			var slept time.Duration
			e := New(g, Config{Sleep: func(_ context.Context, d time.Duration) error { slept += d; return nil }})
			got, err := e.settle(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("settle err = %v, want error %v", err, tt.wantErr)
			}
			if int(shots.Load()) != tt.wantShots {
				t.Errorf("%d screenshots, want %d", shots.Load(), tt.wantShots)
			}
			if !tt.wantErr && string(got) != tt.wantLast {
				t.Errorf("observation screenshot %q, want %q", got, tt.wantLast)
			}
			if slept > settleMax {
				t.Errorf("slept %v, more than %v", slept, settleMax)
			}
		})
	}
}
