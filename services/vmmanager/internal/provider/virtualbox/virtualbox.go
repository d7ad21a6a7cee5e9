// Package virtualbox drives VirtualBox VMs through VBoxManage, with the
// commands OSWorld's provider issues: the uuid from `list vms`,
// `startvm <uuid> --type headless`, the IP from
// `guestproperty get <uuid> /VirtualBox/GuestInfo/Net/0/V4/IP`,
// revert as `controlvm <uuid> savestate` then `snapshot <uuid> restore <n>`,
// and stop as `controlvm <uuid> savestate`.
package virtualbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/slots"
)

var (
	_ pool.Provider = (*Provider)(nil)
	_ pool.Preparer = (*Provider)(nil)
)

// Options configure a Provider.
type Options struct {
	Config   config.VirtualBox
	Snapshot string
	Headless bool
}

// Provider runs VMs with VBoxManage.
type Provider struct {
	o     Options
	guest guest.Client

	slots *slots.Set
}

// New returns a provider.
func New(o Options) *Provider { return &Provider{o: o, slots: slots.New(len(o.Config.VMs))} }

func (p *Provider) vbox(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, p.o.Config.VBoxManage, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("VBoxManage %s: %v: %.300s", args[0], err, out.String())
	}
	return out.String(), nil
}

// `list vms` prints lines like: "Ubuntu0" {0b5d...-...}
var listLine = regexp.MustCompile(`^"(.*)" \{([0-9a-fA-F-]+)\}$`)

// uuid finds a VM's uuid by name (or uuid) in `list vms`.
func (p *Provider) uuid(ctx context.Context, name string) (string, error) {
	out, err := p.vbox(ctx, "list", "vms")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		m := listLine.FindStringSubmatch(strings.TrimSpace(line))
		if m != nil && (m[1] == name || m[2] == name) {
			return m[2], nil
		}
	}
	return "", fmt.Errorf("VirtualBox has no vm %q", name)
}

func (p *Provider) runningVM(ctx context.Context, uuid string) (bool, error) {
	out, err := p.vbox(ctx, "list", "runningvms")
	if err != nil {
		return false, err
	}
	return strings.Contains(out, "{"+uuid+"}"), nil
}

// revertAndBoot: savestate (when running), restore the snapshot, start,
// wait for an IP and for the guest server.
func (p *Provider) revertAndBoot(ctx context.Context, inst *pool.Instance, snapshot string) error {
	uuid := inst.Ref
	up, err := p.runningVM(ctx, uuid)
	if err != nil {
		return err
	}
	if up {
		if _, err := p.vbox(ctx, "controlvm", uuid, "savestate"); err != nil {
			return err
		}
	}
	if _, err := p.vbox(ctx, "snapshot", uuid, "restore", snapshot); err != nil {
		return err
	}
	args := []string{"startvm", uuid}
	if p.o.Headless {
		args = append(args, "--type", "headless")
	}
	if _, err := p.vbox(ctx, args...); err != nil {
		return err
	}
	var ip string
	for {
		out, err := p.vbox(ctx, "guestproperty", "get", uuid, "/VirtualBox/GuestInfo/Net/0/V4/IP")
		ip = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "Value:"))
		if err == nil && net.ParseIP(ip) != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no guest IP: %v", ctx.Err())
		case <-time.After(time.Second):
		}
	}
	inst.Endpoint = "http://" + net.JoinHostPort(ip, strconv.Itoa(p.o.Config.GuestPort))
	return p.guest.WaitReady(ctx, inst.Endpoint, p.o.Config.HealthPath, "", nil)
}

// Create claims a configured VM, reverts it to the snapshot and starts it.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	slot, ok := p.slots.Claim(id)
	if !ok {
		return pool.Instance{}, errors.New("every configured vm is in use")
	}
	uuid, err := p.uuid(ctx, p.o.Config.VMs[slot])
	if err != nil {
		p.slots.Release(id)
		return pool.Instance{}, err
	}
	inst := pool.Instance{Ref: uuid, Data: map[string]string{"slot": strconv.Itoa(slot)}}
	if err := p.revertAndBoot(ctx, &inst, p.o.Snapshot); err != nil {
		p.slots.Release(id)
		return inst, err
	}
	return inst, nil
}

// Reset reverts to the pool's snapshot and starts the VM.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	err := p.revertAndBoot(ctx, &inst, p.o.Snapshot)
	return inst, err
}

// Prepare applies a task's snapshot override before hand-off.
func (p *Provider) Prepare(ctx context.Context, id string, inst pool.Instance, env pool.EnvOverrides) error {
	if env.Proxy || env.FixedIP || len(env.Extra) > 0 {
		return fmt.Errorf("virtualbox supports only the snapshot override: %w", pool.ErrUnsupported)
	}
	if env.Snapshot == "" || env.Snapshot == p.o.Snapshot {
		return nil
	}
	return p.revertAndBoot(ctx, &inst, env.Snapshot)
}

// Destroy saves the VM's state (OSWorld's stop) and frees it.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	defer p.slots.Release(id)
	if inst.Ref == "" {
		return nil
	}
	up, err := p.runningVM(ctx, inst.Ref)
	if err != nil || !up {
		return err
	}
	_, err = p.vbox(ctx, "controlvm", inst.Ref, "savestate")
	return err
}

// Check probes the guest.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	return p.guest.Probe(ctx, inst.Endpoint, p.o.Config.HealthPath, "")
}

// Adopt reclaims a configured VM that still runs and answers.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	slot, err := strconv.Atoi(inst.Data["slot"])
	if err != nil || slot < 0 || slot >= len(p.o.Config.VMs) {
		return errors.New("vm is no longer configured")
	}
	if !p.slots.Take(slot, id) {
		return errors.New("slot already adopted by another VM")
	}
	up, err := p.runningVM(ctx, inst.Ref)
	if err == nil && !up {
		err = errors.New("vm is not running")
	}
	if err != nil {
		p.slots.Release(id)
		return err
	}
	if err := p.Check(ctx, inst); err != nil {
		p.slots.Release(id)
		return err
	}
	return nil
}

// Sweep has nothing to do: configured VMs are never created here.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error { return nil }
