package vmware

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
)

// stubVmrun writes a vmrun stand-in that appends its arguments to a log and
// keeps the set of running vmx files in a state file, printing what vmrun
// prints for list and getGuestIPAddress.
func stubVmrun(t *testing.T) (bin, log string) {
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	state := filepath.Join(dir, "running")
	script := `#!/bin/sh
echo "$*" >> ` + log + `
touch ` + state + `
case "$3" in
list) echo "Total running VMs: $(wc -l < ` + state + `)"; cat ` + state + ` ;;
start) echo "$4" >> ` + state + ` ;;
stop) grep -vx "$4" ` + state + ` > ` + state + `.new; mv ` + state + `.new ` + state + ` ;;
getGuestIPAddress) echo 127.0.0.1 ;;
revertToSnapshot) [ "$5" = missing ] && { echo "Error: snapshot not found"; exit 1; } ;;
esac
exit 0
`
	bin = filepath.Join(dir, "vmrun")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func calls(t *testing.T, log string) []string {
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	os.Truncate(log, 0)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// guestPort serves OSWorld's /screenshot and returns the port.
func guestPort(t *testing.T) int {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/screenshot" {
			w.Write([]byte("\x89PNG"))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	port, _ := strconv.Atoi(p)
	return port
}

func TestVmrunCommands(t *testing.T) {
	bin, log := stubVmrun(t)
	port := guestPort(t)
	p := New(Options{
		Config:   config.VMware{Vmrun: bin, Type: "ws", VMs: []string{"/vms/a.vmx"}, GuestPort: port, HealthPath: "/screenshot"},
		Snapshot: "init_state", Headless: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	steps := []struct {
		name string
		do   func(inst *pool.Instance) error
		want []string
	}{
		{"create", func(inst *pool.Instance) error {
			var err error
			*inst, err = p.Create(ctx, "vm-1")
			return err
		}, []string{"-T ws revertToSnapshot /vms/a.vmx init_state", "-T ws list", "-T ws start /vms/a.vmx nogui", "-T ws getGuestIPAddress /vms/a.vmx -wait"}},
		{"reset", func(inst *pool.Instance) error {
			var err error
			*inst, err = p.Reset(ctx, "vm-1", *inst)
			return err
		}, []string{"-T ws revertToSnapshot /vms/a.vmx init_state", "-T ws list", "-T ws getGuestIPAddress /vms/a.vmx -wait"}},
		{"snapshot override", func(inst *pool.Instance) error {
			return p.Prepare(ctx, "vm-1", *inst, pool.EnvOverrides{Snapshot: "chrome_task"})
		}, []string{"-T ws revertToSnapshot /vms/a.vmx chrome_task", "-T ws list", "-T ws getGuestIPAddress /vms/a.vmx -wait"}},
		{"adopt", func(inst *pool.Instance) error {
			p.slots.Release("vm-1")
			return p.Adopt(ctx, "vm-1", *inst)
		}, []string{"-T ws list"}},
		{"adopt a slot in use", func(inst *pool.Instance) error {
			if err := p.Adopt(ctx, "vm-2", *inst); err == nil {
				return errors.New("a second VM adopted the slot vm-1 holds")
			}
			return nil
		}, nil},
		{"destroy", func(inst *pool.Instance) error {
			return p.Destroy(ctx, "vm-1", *inst)
		}, []string{"-T ws stop /vms/a.vmx"}},
	}
	var inst pool.Instance
	for _, s := range steps {
		if err := s.do(&inst); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := calls(t, log); strings.Join(got, "\n") != strings.Join(s.want, "\n") {
			t.Errorf("%s ran\n%s\nwant\n%s", s.name, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
	}
	if want := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)); inst.Endpoint != want {
		t.Errorf("endpoint = %q, want %q", inst.Endpoint, want)
	}
	if err := p.Prepare(ctx, "vm-1", inst, pool.EnvOverrides{Snapshot: "missing"}); err == nil || !strings.Contains(err.Error(), "snapshot not found") {
		t.Errorf("revert to a missing snapshot: %v, want vmrun's error", err)
	}
	if err := p.Prepare(ctx, "vm-1", inst, pool.EnvOverrides{Proxy: true}); err == nil {
		t.Error("proxy override accepted, want unsupported")
	}
}
