package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// testBridge creates a host bridge with the first address of a free
// 10.254.N.0/24 and returns its name and prefix; the test's end deletes it.
func testBridge(t *testing.T) (string, netip.Prefix) {
	t.Helper()
	used := map[netip.Prefix]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Is4() {
			used[netip.PrefixFrom(pfx.Addr(), 24).Masked()] = true
		}
	}
	var subnet netip.Prefix
	for n := 200; n < 254 && !subnet.IsValid(); n++ {
		if p := netip.MustParsePrefix(fmt.Sprintf("10.254.%d.0/24", n)); !used[p] {
			subnet = p
		}
	}
	if !subnet.IsValid() {
		t.Fatal("no free 10.254.N.0/24 for the test bridge")
	}
	br := fmt.Sprintf("rmq%d", os.Getpid()%100000)
	gw := subnet.Addr().Next()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("link", "add", br, "type", "bridge")
	t.Cleanup(func() { exec.Command("ip", "link", "del", br).Run() })
	run("addr", "add", netip.PrefixFrom(gw, 24).String(), "dev", br)
	run("link", "set", br, "up")
	return br, subnet
}

// allowBridge lets qemu-bridge-helper attach taps to br: a line in its ACL
// /etc/qemu/bridge.conf, taken out again at the test's end.
func allowBridge(t *testing.T, br string) {
	t.Helper()
	const acl = "/etc/qemu/bridge.conf"
	old, err := os.ReadFile(acl)
	existed := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	madeDir := false
	if _, err := os.Stat(filepath.Dir(acl)); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(acl), 0o755); err != nil {
			t.Fatal(err)
		}
		madeDir = true
	}
	if err := os.WriteFile(acl, append(append([]byte(nil), old...), []byte("allow "+br+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if existed {
			os.WriteFile(acl, old, 0o644)
			return
		}
		os.Remove(acl)
		if madeDir {
			os.Remove(filepath.Dir(acl))
		}
	})
}

// runDnsmasq serves DHCP (no DNS) on br and returns its lease file.
func runDnsmasq(t *testing.T, br string, subnet netip.Prefix) string {
	t.Helper()
	dir := t.TempDir()
	leases := filepath.Join(dir, "dnsmasq.leases")
	first := subnet.Addr().Next().Next()
	last := netip.AddrFrom4([4]byte{subnet.Addr().As4()[0], subnet.Addr().As4()[1], subnet.Addr().As4()[2], 250})
	logf, err := os.Create(filepath.Join(dir, "dnsmasq.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
		"--interface="+br, "--bind-interfaces", "--except-interface=lo",
		"--dhcp-range="+first.String()+","+last.String()+",255.255.255.0,1h",
		"--dhcp-leasefile="+leases, "--pid-file="+filepath.Join(dir, "dnsmasq.pid"),
		"--user=root", "--log-facility=-", "--log-dhcp")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("dnsmasq log:\n%s", b)
		}
	})
	return leases
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// TestBridgeNetwork boots a VM on a real host bridge (network: bridge),
// with dnsmasq as the bridge's DHCP server: the provider finds the guest's
// address in dnsmasq's lease file by the VM's MAC, the endpoint and the
// other ports are that address, a reset keeps it and reverts the disk, and
// destroying the VM takes its tap off the bridge.
func TestBridgeNetwork(t *testing.T) {
	img := testImage(t)
	need(t, "root (a bridge, dnsmasq, qemu-bridge-helper)", os.Geteuid() == 0)
	for _, b := range []string{"dnsmasq", "ip"} {
		_, err := exec.LookPath(b)
		need(t, b+" (Debian: dnsmasq-base, iproute2)", err == nil)
	}
	need(t, config.DefaultBridgeHelper+" (Debian: qemu-system-common)", isFile(config.DefaultBridgeHelper))
	br, subnet := testBridge(t)
	allowBridge(t, br)
	leases := runDnsmasq(t, br, subnet)

	pools := []config.Pool{{Name: "b", Provider: config.ProviderQEMU, Size: 1, ScreenWidth: 1024, ScreenHeight: 768,
		MemoryMB: 768, QEMU: &config.QEMU{Image: img, Network: "bridge", Bridge: br, DHCPLeases: leases,
			Ports: map[string]int{"chrome": 9222}}}}
	if err := config.Validate(pools); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, pools[0], shortDir(t), zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	start := time.Now()
	inst, err := p.Create(ctx, "vm-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot on bridge %s to healthy: %v", br, time.Since(start).Round(time.Millisecond))
	destroyed := false
	defer func() {
		if !destroyed {
			p.Destroy(context.Background(), "vm-b", inst)
		}
	}()
	ip := netip.MustParseAddr(inst.Data[dataAddr])
	if !subnet.Contains(ip) {
		t.Fatalf("guest address %s is not on the bridge's %s", ip, subnet)
	}
	if want := "http://" + ip.String() + ":5000"; inst.Endpoint != want {
		t.Errorf("endpoint = %q, want %q", inst.Endpoint, want)
	}
	if want := ip.String() + ":9222"; inst.Ports["chrome"] != want {
		t.Errorf("chrome port = %q, want %q", inst.Ports["chrome"], want)
	}
	if out, err := execute(t, inst.Endpoint, "ip -4 -o addr show dev eth0"); err != nil || !strings.Contains(out, ip.String()+"/24") {
		t.Errorf("guest eth0 = %q (%v), want %s from DHCP", out, err, ip)
	}
	if _, err := execute(t, inst.Endpoint, "echo dirty > /home/user/bridge.txt && sync"); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	start = time.Now()
	ni, err := p.Reset(rctx, "vm-b", inst)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	t.Logf("reset on the bridge to healthy: %v", time.Since(start).Round(time.Millisecond))
	if ni.Endpoint != inst.Endpoint {
		t.Errorf("endpoint changed on reset: %s → %s", inst.Endpoint, ni.Endpoint)
	}
	if out, err := execute(t, inst.Endpoint, "test -e /home/user/bridge.txt && echo present || echo gone"); err != nil || strings.TrimSpace(out) != "gone" {
		t.Errorf("after reset the file is %q (%v), want gone", strings.TrimSpace(out), err)
	}
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", br, "brif"))
	if len(ports) != 1 {
		t.Errorf("bridge %s has %d ports with the vm up, want its tap", br, len(ports))
	}
	destroyed = true
	if err := p.Destroy(context.Background(), "vm-b", inst); err != nil {
		t.Fatal(err)
	}
	var left []os.DirEntry
	for i := 0; i < 50; i++ {
		if left, _ = os.ReadDir(filepath.Join("/sys/class/net", br, "brif")); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) != 0 {
		t.Errorf("bridge %s still has %d ports after Destroy", br, len(left))
	}
}
