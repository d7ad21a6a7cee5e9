package docker

import (
	"slices"
	"sort"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

func TestContainerSpec(t *testing.T) {
	osworld := config.Docker{Image: "happysixd/osworld-docker", Flavor: "osworld", Qcow2: "/data/Ubuntu.qcow2", DiskSize: "32G", Host: "127.0.0.1"}
	desktopd := config.Docker{Image: "rolloutmesh/desktop:dev", Flavor: "desktopd", Host: "127.0.0.1", GuestToken: "s3cret", Args: []string{"--xvfb"}}
	tests := []struct {
		name        string
		o           Options
		kvm         bool
		wantEnv     []string
		wantPorts   []string
		wantBinds   []string
		wantDevices []string
		wantCaps    []string
		wantHealth  string
		wantMemory  int64
		wantCmd     []string
	}{
		{
			name: "osworld with kvm", o: Options{Config: osworld, Pool: "osw", InstanceID: "i1", ScreenWidth: 1920, ScreenHeight: 1080},
			kvm:       true,
			wantEnv:   []string{"CPU_CORES=4", "DISK_SIZE=32G", "RAM_SIZE=4G"},
			wantPorts: []string{"5000/tcp", "8006/tcp", "8080/tcp", "9222/tcp"}, wantBinds: []string{"/data/Ubuntu.qcow2:/System.qcow2:ro"},
			wantDevices: []string{"/dev/kvm"}, wantCaps: []string{"NET_ADMIN"}, wantHealth: "/screenshot",
		},
		{
			name: "osworld without kvm, sized", o: Options{Config: osworld, Pool: "osw", InstanceID: "i1", ScreenWidth: 1920, ScreenHeight: 1080, CPUs: 2, MemoryMB: 8192},
			wantEnv:   []string{"CPU_CORES=2", "DISK_SIZE=32G", "KVM=N", "RAM_SIZE=8192M"},
			wantPorts: []string{"5000/tcp", "8006/tcp", "8080/tcp", "9222/tcp"}, wantBinds: []string{"/data/Ubuntu.qcow2:/System.qcow2:ro"},
			wantCaps: []string{"NET_ADMIN"}, wantHealth: "/screenshot",
		},
		{
			name: "desktopd", o: Options{Config: desktopd, Pool: "d", InstanceID: "i2", ScreenWidth: 1280, ScreenHeight: 720, MemoryMB: 512},
			wantEnv:   []string{"DESKTOPD_TOKEN=s3cret", "SCREEN_HEIGHT=720", "SCREEN_WIDTH=1280"},
			wantPorts: []string{"5000/tcp", "8080/tcp", "9222/tcp"}, wantHealth: "/healthz", wantMemory: 512 << 20, wantCmd: []string{"--xvfb"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ContainerSpec(tc.o, "vm-1", tc.kvm)
			env := slices.Clone(s.Config.Env)
			sort.Strings(env)
			if !slices.Equal(env, tc.wantEnv) {
				t.Errorf("env = %q, want %q", env, tc.wantEnv)
			}
			var ports []string
			for p := range s.Config.ExposedPorts {
				ports = append(ports, string(p))
				b := s.Host.PortBindings[p]
				if len(b) != 1 || b[0].HostIP != "127.0.0.1" || b[0].HostPort != "" {
					t.Errorf("binding of %s = %v, want 127.0.0.1 with an engine-chosen port", p, b)
				}
			}
			sort.Strings(ports)
			if !slices.Equal(ports, tc.wantPorts) {
				t.Errorf("ports = %q, want %q", ports, tc.wantPorts)
			}
			if !slices.Equal(s.Host.Binds, tc.wantBinds) {
				t.Errorf("binds = %q, want %q", s.Host.Binds, tc.wantBinds)
			}
			var devs []string
			for _, d := range s.Host.Devices {
				devs = append(devs, d.PathOnHost)
			}
			if !slices.Equal(devs, tc.wantDevices) {
				t.Errorf("devices = %q, want %q", devs, tc.wantDevices)
			}
			if !slices.Equal([]string(s.Host.CapAdd), tc.wantCaps) {
				t.Errorf("cap_add = %q, want %q", s.Host.CapAdd, tc.wantCaps)
			}
			if s.HealthPath != tc.wantHealth {
				t.Errorf("health path = %q, want %q", s.HealthPath, tc.wantHealth)
			}
			if s.Host.Memory != tc.wantMemory {
				t.Errorf("memory = %d, want %d", s.Host.Memory, tc.wantMemory)
			}
			if !slices.Equal([]string(s.Config.Cmd), tc.wantCmd) {
				t.Errorf("cmd = %q, want %q", s.Config.Cmd, tc.wantCmd)
			}
			want := map[string]string{LabelInstance: tc.o.InstanceID, LabelPool: tc.o.Pool, LabelVM: "vm-1"}
			for k, v := range want {
				if s.Config.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, s.Config.Labels[k], v)
				}
			}
			if s.Name != "rolloutmesh-vm-1" {
				t.Errorf("name = %q", s.Name)
			}
		})
	}
}
