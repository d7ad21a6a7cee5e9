package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// qcow2Magic opens every qcow2 file.
var qcow2Magic = []byte("QFI\xfb")

var portNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// validateQEMU checks the qemu section of pool p (key k is the pool's) and
// fills its defaults. The image is opened here, so that a wrong path or a
// raw disk is refused at start with the key named, not at the first boot.
func validateQEMU(k string, p *Pool) error {
	q := p.QEMU
	qk := k + ".qemu"
	if q.Image == "" {
		q.Image = p.PathToVM
	}
	if q.Image == "" {
		return bad(qk+".image", "required (the base qcow2 image; path_to_vm may stand for it)")
	}
	if err := checkQcow2(q.Image); err != nil {
		return bad(qk+".image", "%v", err)
	}
	if q.Kernel == "" && q.Initrd == "" {
		base := strings.TrimSuffix(q.Image, filepath.Ext(q.Image))
		if isFile(base+".vmlinuz") && isFile(base+".initrd") {
			q.Kernel, q.Initrd = base+".vmlinuz", base+".initrd"
		}
	}
	if q.Initrd != "" && q.Kernel == "" {
		return bad(qk+".initrd", "needs kernel")
	}
	if q.Append != "" && q.Kernel == "" {
		return bad(qk+".append", "needs kernel")
	}
	for key, f := range map[string]string{"kernel": q.Kernel, "initrd": q.Initrd} {
		if f != "" && !isFile(f) {
			return bad(qk+"."+key, "%q is not a readable file", f)
		}
	}
	// QEMU runs in the VM's state directory: a path relative to where
	// vmmanager was started would name another file there.
	for key, f := range map[string]*string{"image": &q.Image, "kernel": &q.Kernel, "initrd": &q.Initrd} {
		if *f == "" {
			continue
		}
		abs, err := filepath.Abs(*f)
		if err != nil {
			return bad(qk+"."+key, "%v", err)
		}
		*f = abs
	}
	if q.Binary == "" {
		q.Binary = "qemu-system-x86_64"
	}
	if q.Accel == "" {
		q.Accel = "auto"
	}
	switch q.Accel {
	case "auto", "kvm", "tcg":
	default:
		return bad(qk+".accel", "must be auto, kvm or tcg, got %q", q.Accel)
	}
	if q.Host == "" {
		q.Host = "127.0.0.1"
	}
	if q.GuestPort == 0 {
		q.GuestPort = 5000
	}
	if err := checkPort(qk+".guest_port", q.GuestPort); err != nil {
		return err
	}
	byPort := map[int]string{q.GuestPort: "guest_port"}
	for _, name := range sortedKeys(q.Ports) {
		port := q.Ports[name]
		pk := qk + ".ports." + name
		if !portNameRE.MatchString(name) || name == "server" {
			return bad(pk, "name must match %s and not be \"server\" (the guest server's own)", portNameRE)
		}
		if err := checkPort(pk, port); err != nil {
			return err
		}
		if other, ok := byPort[port]; ok {
			return bad(pk, "guest port %d is also %s", port, other)
		}
		byPort[port] = "ports." + name
	}
	if q.HealthPath == "" {
		// desktopd's /healthz pings the X server: the display takes input,
		// and it costs far less than a screenshot on an emulated CPU.
		// OSWorld's server has no /healthz; /screenshot is what OSWorld
		// itself waits for.
		q.HealthPath = "/screenshot"
		if q.Kernel != "" {
			q.HealthPath = "/healthz"
		}
	}
	if !strings.HasPrefix(q.HealthPath, "/") {
		return bad(qk+".health_path", "must start with /, got %q", q.HealthPath)
	}
	if q.VGA == "" {
		q.VGA = "std"
		if q.Kernel != "" {
			q.VGA = "none"
		}
	}
	switch q.VGA {
	case "none", "std", "virtio", "qxl":
	default:
		return bad(qk+".vga", "must be none, std, virtio or qxl, got %q", q.VGA)
	}
	if p.SnapshotName == "" {
		p.SnapshotName = "ready"
	}
	if !snapshotRE.MatchString(p.SnapshotName) {
		return bad(k+".snapshot_name", "must match %s, got %q", snapshotRE, p.SnapshotName)
	}
	if p.CPUs == 0 {
		p.CPUs = 1
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = 1024
	}
	if p.MemoryMB < 128 {
		return bad(k+".memory_mb", "must be at least 128 for a qemu VM, got %d", p.MemoryMB)
	}
	if host, err := hostMemoryMB(); err == nil && p.MemoryMB > host {
		return bad(k+".memory_mb", "%d MB is more than this host's %d MB", p.MemoryMB, host)
	}
	return nil
}

// qemuDirectBoot reports whether a qemu pool boots a kernel of its own:
// configured, or found next to the image (rolloutmesh's built guest).
func qemuDirectBoot(p *Pool) bool {
	if p.QEMU != nil && p.QEMU.Kernel != "" {
		return true
	}
	img := p.PathToVM
	if p.QEMU != nil && p.QEMU.Image != "" {
		img = p.QEMU.Image
	}
	if img == "" {
		return false
	}
	base := strings.TrimSuffix(img, filepath.Ext(img))
	return isFile(base+".vmlinuz") && isFile(base+".initrd")
}

// snapshotRE bounds snapshot names: they reach QEMU's monitor as a word.
var snapshotRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// SnapshotNameOK reports whether name may name a qemu snapshot.
func SnapshotNameOK(name string) bool { return snapshotRE.MatchString(name) }

func checkQcow2(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%q is not a regular file", path)
	}
	head := make([]byte, len(qcow2Magic))
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, qcow2Magic) {
		return fmt.Errorf("%q is not a qcow2 image (no QFI\\xfb magic)", path)
	}
	return nil
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// hostMemoryMB is MemTotal from /proc/meminfo.
func hostMemoryMB() (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<16))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				return 0, fmt.Errorf("meminfo: %q", rest)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("meminfo: no MemTotal")
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
