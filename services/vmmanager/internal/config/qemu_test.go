package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// qcow2File writes a file that starts with the qcow2 magic: validation reads
// only the magic, the provider tests boot real images.
func qcow2File(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, append([]byte("QFI\xfb"), make([]byte, 508)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQEMUConfigErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	img := qcow2File(t, dir, "disk.qcow2")
	raw := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(raw, make([]byte, 512), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := func(extra string) string {
		return "pools:\n  - name: q\n    provider: qemu\n    size: 1\n" + extra
	}
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"missing image", pool("    qemu: {}\n"), "pools[0].qemu.image: required"},
		{"image not found", pool("    qemu:\n      image: " + filepath.Join(dir, "nope.qcow2") + "\n"), "pools[0].qemu.image: open"},
		{"image not qcow2", pool("    qemu:\n      image: " + raw + "\n"), "pools[0].qemu.image: \"" + raw + "\" is not a qcow2 image"},
		{"image is a directory", pool("    qemu:\n      image: " + dir + "\n"), "pools[0].qemu.image"},
		{"port clash with server", pool("    qemu:\n      image: " + img + "\n      ports: {chrome: 5000}\n"), "pools[0].qemu.ports.chrome: guest port 5000 is also guest_port"},
		{"port clash between extras", pool("    qemu:\n      image: " + img + "\n      ports: {chrome: 9222, vlc: 9222}\n"), "pools[0].qemu.ports.vlc: guest port 9222 is also ports.chrome"},
		{"port out of range", pool("    qemu:\n      image: " + img + "\n      ports: {vlc: 0}\n"), "pools[0].qemu.ports.vlc: must be a port"},
		{"port named server", pool("    qemu:\n      image: " + img + "\n      ports: {server: 8080}\n"), "pools[0].qemu.ports.server"},
		{"guest port", pool("    qemu:\n      image: " + img + "\n      guest_port: 70000\n"), "pools[0].qemu.guest_port"},
		{"memory larger than host", pool("    memory_mb: 1048576\n    qemu:\n      image: " + img + "\n"), "pools[0].memory_mb: 1048576 MB is more than this host's"},
		{"memory too small", pool("    memory_mb: 64\n    qemu:\n      image: " + img + "\n"), "pools[0].memory_mb: must be at least 128"},
		{"accel", pool("    qemu:\n      image: " + img + "\n      accel: hvf\n"), "pools[0].qemu.accel: must be auto, kvm or tcg"},
		{"kernel missing", pool("    qemu:\n      image: " + img + "\n      kernel: " + filepath.Join(dir, "vmlinuz") + "\n"), "pools[0].qemu.kernel: "},
		{"initrd without kernel", pool("    qemu:\n      image: " + img + "\n      initrd: " + img + "\n"), "pools[0].qemu.initrd: needs kernel"},
		{"snapshot name", pool("    snapshot_name: \"a b\"\n    qemu:\n      image: " + img + "\n"), "pools[0].snapshot_name"},
		{"vga", pool("    qemu:\n      image: " + img + "\n      vga: cirrus\n"), "pools[0].qemu.vga"},
		{"health path", pool("    qemu:\n      image: " + img + "\n      health_path: healthz\n"), "pools[0].qemu.health_path"},
		{"section mismatch", pool("    docker: {}\n"), "pools[0].docker: section given but provider is \"qemu\""},
		{"extra snapshot name", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: \"a b\", command: [\"true\"]}]\n"), "pools[0].qemu.snapshots[0].name: must match"},
		{"extra snapshot is the pool's", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: ready, command: [\"true\"]}]\n"), "pools[0].qemu.snapshots[0].name: \"ready\" is also snapshot_name"},
		{"extra snapshots twice", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: a, command: [\"true\"]}, {name: a, command: [\"true\"]}]\n"), "pools[0].qemu.snapshots[1].name: \"a\" is also snapshots[0]"},
		{"extra snapshot without command", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: a}]\n"), "pools[0].qemu.snapshots[0].command: required"},
		{"extra snapshot ready command", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: a, command: [\"true\"], ready_command: [\"\"]}]\n"), "pools[0].qemu.snapshots[0].ready_command: the program is empty"},
		{"extra snapshot settle", pool("    qemu:\n      image: " + img + "\n      snapshots: [{name: a, command: [\"true\"], settle: 1h}]\n"), "pools[0].qemu.snapshots[0].settle: must be between 0 and 10m"},
		{"network", pool("    qemu:\n      image: " + img + "\n      network: tap\n"), "pools[0].qemu.network: must be user or bridge"},
		{"bridge with user network", pool("    qemu:\n      image: " + img + "\n      bridge: br0\n"), "pools[0].qemu.bridge: only with network bridge"},
		{"bridge missing", pool("    qemu:\n      image: " + img + "\n      network: bridge\n"), "pools[0].qemu.bridge: required with network bridge"},
		{"bridge name", pool("    qemu:\n      image: " + img + "\n      network: bridge\n      bridge: \"br 0\"\n"), "pools[0].qemu.bridge: \"br 0\" is not an interface name"},
		{"lease file missing", pool("    qemu:\n      image: " + img + "\n      network: bridge\n      bridge: rmnosuch0\n"), "pools[0].qemu.dhcp_leases: required with network bridge"},
		{"lease dir missing", pool("    qemu:\n      image: " + img + "\n      network: bridge\n      bridge: rmnosuch0\n      dhcp_leases: " + filepath.Join(dir, "no", "leases") + "\n"), "pools[0].qemu.dhcp_leases: directory of"},
		{"bridge helper missing", pool("    qemu:\n      image: " + img + "\n      network: bridge\n      bridge: rmnosuch0\n      dhcp_leases: " + filepath.Join(dir, "leases") + "\n      bridge_helper: " + filepath.Join(dir, "helper") + "\n"), "pools[0].qemu.bridge_helper: "},
		{"no such bridge", pool("    qemu:\n      image: " + img + "\n      network: bridge\n      bridge: rmnosuch0\n      dhcp_leases: " + filepath.Join(dir, "leases") + "\n      bridge_helper: " + img + "\n"), "pools[0].qemu.bridge: no bridge \"rmnosuch0\" on this host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestQEMUConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	img := qcow2File(t, dir, "desktop.qcow2")
	for _, f := range []string{"desktop.vmlinuz", "desktop.initrd"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		yaml string
		want QEMU
		snap string
	}{
		{
			"path_to_vm with kernel next to it",
			"pools:\n  - name: q\n    provider: qemu\n    size: 1\n    path_to_vm: " + img + "\n",
			QEMU{Image: img, Kernel: filepath.Join(dir, "desktop.vmlinuz"), Initrd: filepath.Join(dir, "desktop.initrd"),
				Binary: "qemu-system-x86_64", Accel: "auto", Host: "127.0.0.1", GuestPort: 5000, HealthPath: "/healthz", VGA: "none"},
			"ready",
		},
		{
			"extra ports and a snapshot name",
			"pools:\n  - name: q\n    provider: qemu\n    size: 1\n    snapshot_name: init_state\n    qemu:\n      image: " + img + "\n      kernel: \"\"\n      accel: tcg\n      ports: {chrome: 9222, vlc: 8080}\n",
			QEMU{Image: img, Kernel: filepath.Join(dir, "desktop.vmlinuz"), Initrd: filepath.Join(dir, "desktop.initrd"),
				Binary: "qemu-system-x86_64", Accel: "tcg", Host: "127.0.0.1", GuestPort: 5000, HealthPath: "/healthz", VGA: "none",
				Ports: map[string]int{"chrome": 9222, "vlc": 8080}},
			"init_state",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pools, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			p := pools[0]
			got := *p.QEMU
			if got.Image != tc.want.Image || got.Kernel != tc.want.Kernel || got.Initrd != tc.want.Initrd ||
				got.Binary != tc.want.Binary || got.Accel != tc.want.Accel || got.Host != tc.want.Host ||
				got.GuestPort != tc.want.GuestPort || got.HealthPath != tc.want.HealthPath || got.VGA != tc.want.VGA ||
				len(got.Ports) != len(tc.want.Ports) {
				t.Errorf("qemu = %+v, want %+v", got, tc.want)
			}
			for k, v := range tc.want.Ports {
				if got.Ports[k] != v {
					t.Errorf("ports[%s] = %d, want %d", k, got.Ports[k], v)
				}
			}
			if p.BootTimeout != Duration(5*time.Minute) {
				t.Errorf("boot_timeout = %v, want 5m", time.Duration(p.BootTimeout))
			}
			if p.OSType != "Debian" {
				t.Errorf("os_type = %q, want Debian (the built image)", p.OSType)
			}
			if p.SnapshotName != tc.snap || p.CPUs != 1 || p.MemoryMB != 1024 {
				t.Errorf("snapshot, cpus, memory = %q, %d, %d; want %q, 1, 1024", p.SnapshotName, p.CPUs, p.MemoryMB, tc.snap)
			}
		})
	}
}

// A relative image path is made absolute, with the kernel found next to
// it: QEMU runs in the VM's state directory, where a relative path would
// name another file (`rollout run --provider qemu` passes
// .cache/guest/desktop.qcow2).
func TestQEMUConfigRelativeImage(t *testing.T) {
	dir := t.TempDir()
	qcow2File(t, dir, "desktop.qcow2")
	for _, f := range []string{"desktop.vmlinuz", "desktop.initrd"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	pools, err := Parse([]byte("pools:\n  - name: q\n    provider: qemu\n    size: 1\n    path_to_vm: desktop.qcow2\n"))
	if err != nil {
		t.Fatal(err)
	}
	q := pools[0].QEMU
	for key, got := range map[string]string{"image": q.Image, "kernel": q.Kernel, "initrd": q.Initrd} {
		if !filepath.IsAbs(got) || !strings.HasPrefix(got, dir) {
			t.Errorf("%s = %q, want an absolute path under %s", key, got, dir)
		}
	}
}
