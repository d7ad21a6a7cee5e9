package docker

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

func TestAddresses(t *testing.T) {
	bound := func(ip, port string) []nat.PortBinding { return []nat.PortBinding{{HostIP: ip, HostPort: port}} }
	desktopd := nat.PortMap{
		"5000/tcp": bound("127.0.0.1", "49153"),
		"9222/tcp": bound("127.0.0.1", "49154"),
		"8080/tcp": bound("0.0.0.0", "49155"),
	}
	tests := []struct {
		name         string
		network      string
		published    nat.PortMap
		wantEndpoint string
		wantPorts    map[string]string
		wantErr      string
	}{
		{
			name: "bridge: the published ports", published: desktopd,
			wantEndpoint: "http://127.0.0.1:49153",
			wantPorts:    map[string]string{"chrome": "127.0.0.1:49154", "vlc": "127.0.0.1:49155"},
		},
		{
			name: "network: names for the runners, published ports for the host", network: "rolloutmesh", published: desktopd,
			wantEndpoint: "http://rolloutmesh-vm-1:5000",
			wantPorts: map[string]string{
				"chrome": "rolloutmesh-vm-1:9222", "vlc": "rolloutmesh-vm-1:8080",
				"host:server": "http://127.0.0.1:49153", "host:chrome": "127.0.0.1:49154", "host:vlc": "127.0.0.1:49155",
			},
		},
		{
			name: "network, nothing published: names only", network: "rolloutmesh",
			published:    nat.PortMap{"5000/tcp": nil, "9222/tcp": nil},
			wantEndpoint: "http://rolloutmesh-vm-1:5000",
			wantPorts:    map[string]string{"chrome": "rolloutmesh-vm-1:9222"},
		},
		{
			name: "bridge, server not published", published: nat.PortMap{"9222/tcp": bound("127.0.0.1", "1")},
			wantErr: "no published port 5000",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			endpoint, ports, err := addresses("rolloutmesh-vm-1", tc.network, tc.published)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if endpoint != tc.wantEndpoint {
				t.Errorf("endpoint = %q, want %q", endpoint, tc.wantEndpoint)
			}
			if !maps.Equal(ports, tc.wantPorts) {
				t.Errorf("ports = %v, want %v", ports, tc.wantPorts)
			}
		})
	}
}

// TestNetworkEndpointsFromHost runs a rolloutmesh/desktop:dev VM on a
// user-defined network, as in the compose deployment: the endpoint the
// runners use is the container's name on the network, and the host-side
// address recorded under host:server must answer a plain dial from the host,
// where that name does not resolve.
func TestNetworkEndpointsFromHost(t *testing.T) {
	const image = "rolloutmesh/desktop:dev"
	cli, err := NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		missing(t, "a Docker engine: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		missing(t, "image %s (make guest-image): %v", image, err)
	}

	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	netName := "rolloutmesh-test-" + suffix
	if _, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge"}); err != nil {
		t.Fatalf("create network %s: %v", netName, err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), netName) })

	p, err := New(Options{
		Config:     config.Docker{Image: image, Flavor: "desktopd", Host: "127.0.0.1", Network: netName},
		Pool:       "nettest",
		InstanceID: "nettest-" + suffix,
		// The desktop image needs its screen size; a small one boots fast.
		ScreenWidth: 800, ScreenHeight: 600,
		Logger: zap.NewNop(),
		Client: cli,
	})
	if err != nil {
		t.Fatal(err)
	}
	// vmmanager itself runs on the network and resolves container names
	// through the engine's DNS; the test process is on the host, which
	// reaches a bridge network's addresses but not its names. Its probes
	// resolve the name the way the network does.
	p.guest.HTTP = &http.Client{Transport: &http.Transport{DialContext: p.networkDialer(netName)}}

	id := "vm-" + suffix
	inst, err := p.Create(ctx, id)
	t.Cleanup(func() { p.Destroy(context.Background(), id, inst) })
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if want := "http://rolloutmesh-" + id + ":5000"; inst.Endpoint != want {
		t.Errorf("endpoint = %q, want %q (the name on the network, for the runners)", inst.Endpoint, want)
	}
	hostURL := inst.Ports[HostPrefix+"server"]
	if !strings.HasPrefix(hostURL, "http://127.0.0.1:") {
		t.Fatalf("ports[%q] = %q, want http://127.0.0.1:<port>; ports: %v", HostPrefix+"server", hostURL, inst.Ports)
	}
	for _, name := range []string{"chrome", "vlc"} {
		if a := inst.Ports[HostPrefix+name]; !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("ports[%q] = %q, want 127.0.0.1:<port>", HostPrefix+name, a)
		}
		if want := "rolloutmesh-" + id + ":"; !strings.HasPrefix(inst.Ports[name], want) {
			t.Errorf("ports[%q] = %q, want %s<port>", name, inst.Ports[name], want)
		}
	}
	if _, ok := inst.Ports["vnc"]; ok {
		t.Errorf("ports has vnc (%v): the desktopd image publishes none", inst.Ports)
	}

	// A plain client, as a person's browser or curl on the host.
	plain := &http.Client{Timeout: 10 * time.Second}
	resp, err := plain.Get(hostURL + "/platform")
	if err != nil {
		t.Fatalf("GET %s/platform from the host: %v", hostURL, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "Linux" {
		t.Errorf("GET %s/platform = %d %q, want 200 Linux", hostURL, resp.StatusCode, body)
	}
}

// networkDialer dials container names on netName at the container's address
// on that network, other addresses as usual.
func (p *Provider) networkDialer(netName string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(host, "rolloutmesh-") {
			info, err := p.cli.ContainerInspect(ctx, host)
			if err != nil {
				return nil, err
			}
			if info.NetworkSettings == nil || info.NetworkSettings.Networks[netName] == nil || info.NetworkSettings.Networks[netName].IPAddress == "" {
				return nil, fmt.Errorf("container %s has no address on %s", host, netName)
			}
			addr = net.JoinHostPort(info.NetworkSettings.Networks[netName].IPAddress, port)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// missing skips without a dependency, and fails under CI, where a missing
// engine or image must not pass as green.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (fails under CI)", args...)
}
