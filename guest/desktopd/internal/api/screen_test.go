package api

import (
	"testing"
	"time"
)

// TestX11Budget: after a failed AT-SPI walk the X window tree gets what is
// left of the request's bound, so a walk that failed late does not double
// the request's time, but never less than minX11Tree.
func TestX11Budget(t *testing.T) {
	start := time.Unix(1000, 0)
	deadline := start.Add(DefaultA11yTimeout)
	tests := []struct {
		name    string
		elapsed time.Duration
		want    time.Duration
	}{
		{"no AT-SPI walk", 0, DefaultA11yTimeout},
		{"walk failed early", time.Second, DefaultA11yTimeout - time.Second},
		{"walk failed late", DefaultA11yTimeout - time.Second, minX11Tree},
		{"walk failed at the bound", DefaultA11yTimeout, minX11Tree},
		{"past the bound", DefaultA11yTimeout + time.Second, minX11Tree},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := x11Budget(deadline, start.Add(tt.elapsed)); got != tt.want {
				t.Errorf("x11Budget after %v = %v, want %v", tt.elapsed, got, tt.want)
			}
		})
	}
}
