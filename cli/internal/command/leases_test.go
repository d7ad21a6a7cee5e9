package command

import (
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestLeaseColumns: the step column and the endpoints column of `rollout
// leases`.
func TestLeaseColumns(t *testing.T) {
	steps := []struct {
		labels map[string]string
		want   string
	}{
		{nil, "-"},
		{map[string]string{"step": "4"}, "4"},
		{map[string]string{"phase": "setup"}, "setup"},
		{map[string]string{"step": "4", "phase": "acting"}, "4 (acting)"},
	}
	for _, tt := range steps {
		if got := progress(tt.labels); got != tt.want {
			t.Errorf("progress(%v) = %q, want %q", tt.labels, got, tt.want)
		}
	}
	l := &pb.Lease{Endpoint: "http://127.0.0.1:32771", Ports: map[string]string{"vlc": "127.0.0.1:32769", "chrome": "127.0.0.1:32770"}}
	if got, want := endpoints(l), "http://127.0.0.1:32771 chrome=127.0.0.1:32770 vlc=127.0.0.1:32769"; got != want {
		t.Errorf("endpoints = %q, want %q", got, want)
	}
}
