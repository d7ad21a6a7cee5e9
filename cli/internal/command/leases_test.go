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

// TestLeaseEndpointsHostSide: on a compose network the docker provider
// records the guest's ports published on the host beside the container
// names; `rollout leases` and `rollout vms` show those, which the host
// reaches.
func TestLeaseEndpointsHostSide(t *testing.T) {
	l := &pb.Lease{Endpoint: "http://rolloutmesh-default-1:5000", Ports: map[string]string{
		"chrome": "rolloutmesh-default-1:9222", "vlc": "rolloutmesh-default-1:8080",
		"host:server": "http://127.0.0.1:49153", "host:chrome": "127.0.0.1:49154", "host:vlc": "127.0.0.1:49155"}}
	if got, want := endpoints(l), "http://127.0.0.1:49153 chrome=127.0.0.1:49154 vlc=127.0.0.1:49155"; got != want {
		t.Errorf("endpoints = %q, want %q", got, want)
	}
	if got, want := serverEndpoint(l.Endpoint, l.Ports), "http://127.0.0.1:49153"; got != want {
		t.Errorf("serverEndpoint = %q, want %q", got, want)
	}
}
