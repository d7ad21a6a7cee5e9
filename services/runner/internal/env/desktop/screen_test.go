package desktop

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// TestResetRefusesBadScreenSize: the screen size the guest reports bounds
// every action the model gives. A size of 0 (an answer without width and
// height) turned off the bounds checks of computer_13 actions and made
// every UI-TARS and Claude answer unparsable, so the episode ended as a
// scored parse error; an absurd size was taken too. Reset fails instead.
func TestResetRefusesBadScreenSize(t *testing.T) {
	tests := []struct {
		name    string
		answer  string
		wantErr bool
	}{
		{"stock answer", `{"width": 1920, "height": 1080}`, false},
		{"no fields", `{}`, true},
		{"zero", `{"width": 0, "height": 1080}`, true},
		{"negative", `{"width": -1920, "height": 1080}`, true},
		{"huge", `{"width": 1000000000, "height": 1080}`, true},
	}
	png := []byte("\x89PNG\r\n\x1a\nframe")
	task := []byte(`{"id": "t1", "instruction": "x", "config": [], "evaluator": {"func": "infeasible"}}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/screenshot":
					w.Header().Set("Content-Type", "image/png")
					_, _ = w.Write(png)
				case "/screen_size":
					_, _ = w.Write([]byte(tt.answer))
				default:
					_, _ = w.Write([]byte(`{"output": "", "status": "success", "returncode": 0}`))
				}
			}))
			defer srv.Close()
			g, err := guest.New(srv.URL, "")
			if err != nil {
				t.Fatal(err)
			}
			e := New(g, Config{Sleep: func(context.Context, time.Duration) error { return nil }})
			defer e.Close(context.Background())
			_, err = e.Reset(context.Background(), env.Task{ID: "t1", Spec: task})
			if (err != nil) != tt.wantErr {
				t.Errorf("Reset: %v (screen %v), want error %v", err, e.Screen(), tt.wantErr)
			}
		})
	}
}
