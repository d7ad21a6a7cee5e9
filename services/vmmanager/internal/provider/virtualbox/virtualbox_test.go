package virtualbox

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

const uuid = "0b5d3c1e-1111-2222-3333-444455556666"

// stubVBoxManage writes a VBoxManage stand-in that appends its arguments to
// a log, knows one VM "Ubuntu0" and tracks whether it runs.
func stubVBoxManage(t *testing.T) (bin, log string) {
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	state := filepath.Join(dir, "running")
	script := `#!/bin/sh
echo "$*" >> ` + log + `
case "$1 $2" in
"list vms") echo '"Other" {99999999-0000-0000-0000-000000000000}'; echo '"Ubuntu0" {` + uuid + `}' ;;
"list runningvms") [ -f ` + state + ` ] && echo '"Ubuntu0" {` + uuid + `}' ;;
"startvm ` + uuid + `") touch ` + state + ` ;;
"controlvm ` + uuid + `") rm -f ` + state + ` ;;
"guestproperty get") echo "Value: 127.0.0.1" ;;
"snapshot ` + uuid + `") [ "$4" = missing ] && { echo "VBoxManage: error: Could not find a snapshot named 'missing'"; exit 1; } ;;
esac
exit 0
`
	bin = filepath.Join(dir, "VBoxManage")
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

func TestVBoxManageCommands(t *testing.T) {
	bin, log := stubVBoxManage(t)
	p := New(Options{
		Config:   config.VirtualBox{VBoxManage: bin, VMs: []string{"Ubuntu0"}, GuestPort: guestPort(t), HealthPath: "/screenshot"},
		Snapshot: "init_state", Headless: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ip := "guestproperty get " + uuid + " /VirtualBox/GuestInfo/Net/0/V4/IP"
	steps := []struct {
		name string
		do   func(inst *pool.Instance) error
		want []string
	}{
		{"create", func(inst *pool.Instance) error {
			var err error
			*inst, err = p.Create(ctx, "vm-1")
			return err
		}, []string{"list vms", "list runningvms", "snapshot " + uuid + " restore init_state", "startvm " + uuid + " --type headless", ip}},
		{"reset", func(inst *pool.Instance) error {
			var err error
			*inst, err = p.Reset(ctx, "vm-1", *inst)
			return err
		}, []string{"list runningvms", "controlvm " + uuid + " savestate", "snapshot " + uuid + " restore init_state", "startvm " + uuid + " --type headless", ip}},
		{"snapshot override", func(inst *pool.Instance) error {
			return p.Prepare(ctx, "vm-1", *inst, pool.EnvOverrides{Snapshot: "chrome_task"})
		}, []string{"list runningvms", "controlvm " + uuid + " savestate", "snapshot " + uuid + " restore chrome_task", "startvm " + uuid + " --type headless", ip}},
		{"adopt", func(inst *pool.Instance) error {
			p.slots.Release("vm-1")
			return p.Adopt(ctx, "vm-1", *inst)
		}, []string{"list runningvms"}},
		{"adopt a slot in use", func(inst *pool.Instance) error {
			if err := p.Adopt(ctx, "vm-2", *inst); err == nil {
				return errors.New("a second VM adopted the slot vm-1 holds")
			}
			return nil
		}, nil},
		{"destroy", func(inst *pool.Instance) error {
			return p.Destroy(ctx, "vm-1", *inst)
		}, []string{"list runningvms", "controlvm " + uuid + " savestate"}},
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
	if inst.Ref != uuid || !strings.HasPrefix(inst.Endpoint, "http://127.0.0.1:") {
		t.Errorf("instance = %+v, want ref %s on 127.0.0.1", inst, uuid)
	}
	if err := p.Prepare(ctx, "vm-1", inst, pool.EnvOverrides{Snapshot: "missing"}); err == nil || !strings.Contains(err.Error(), "Could not find a snapshot") {
		t.Errorf("restore of a missing snapshot: %v, want VBoxManage's error", err)
	}
}
