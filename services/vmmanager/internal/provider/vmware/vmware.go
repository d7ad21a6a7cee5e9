// Package vmware drives VMware Workstation/Fusion VMs through vmrun, with
// the commands OSWorld's provider issues: `-T ws|fusion list`,
// `start <vmx> [nogui]`, `getGuestIPAddress <vmx> -wait`,
// `revertToSnapshot <vmx> <snapshot>` and `stop <vmx>`. Each VM of the pool
// is one configured .vmx; reset reverts it to the pool's snapshot.
package vmware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
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
	Config   config.VMware
	Snapshot string
	Headless bool
}

// Provider runs VMs with vmrun.
type Provider struct {
	o     Options
	guest guest.Client

	slots *slots.Set
}

// New returns a provider.
func New(o Options) *Provider { return &Provider{o: o, slots: slots.New(len(o.Config.VMs))} }

// vmrun runs one vmrun command; output is bounded by what vmrun prints.
func (p *Provider) vmrun(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-T", p.o.Config.Type}, args...)
	cmd := exec.CommandContext(ctx, p.o.Config.Vmrun, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("vmrun %s: %v: %.300s", args[0], err, out.String())
	}
	return out.String(), nil
}

// running reports whether vmrun list shows the vmx.
func (p *Provider) running(ctx context.Context, vmx string) (bool, error) {
	out, err := p.vmrun(ctx, "list")
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == vmx {
			return true, nil
		}
	}
	return false, nil
}

// boot starts the vmx unless running, finds its IP and waits for the guest.
func (p *Provider) boot(ctx context.Context, inst *pool.Instance) error {
	vmx := inst.Ref
	up, err := p.running(ctx, vmx)
	if err != nil {
		return err
	}
	if !up {
		args := []string{"start", vmx}
		if p.o.Headless {
			args = append(args, "nogui")
		}
		if _, err := p.vmrun(ctx, args...); err != nil {
			return err
		}
	}
	var ip string
	for {
		out, err := p.vmrun(ctx, "getGuestIPAddress", vmx, "-wait")
		ip = strings.TrimSpace(out)
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

// Create claims a vmx, reverts it to the snapshot and boots it.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	slot, ok := p.slots.Claim(id)
	if !ok {
		return pool.Instance{}, errors.New("every configured vmx is in use")
	}
	inst := pool.Instance{Ref: p.o.Config.VMs[slot], Data: map[string]string{"slot": strconv.Itoa(slot)}}
	if err := p.revertAndBoot(ctx, &inst, p.o.Snapshot); err != nil {
		p.slots.Release(id)
		return inst, err
	}
	return inst, nil
}

func (p *Provider) revertAndBoot(ctx context.Context, inst *pool.Instance, snapshot string) error {
	if _, err := p.vmrun(ctx, "revertToSnapshot", inst.Ref, snapshot); err != nil {
		return err
	}
	return p.boot(ctx, inst)
}

// Reset reverts to the pool's snapshot and boots.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	err := p.revertAndBoot(ctx, &inst, p.o.Snapshot)
	return inst, err
}

// Prepare applies a task's snapshot override before hand-off.
func (p *Provider) Prepare(ctx context.Context, id string, inst pool.Instance, env pool.EnvOverrides) error {
	if env.Proxy || env.FixedIP || len(env.Extra) > 0 {
		return fmt.Errorf("vmware supports only the snapshot override: %w", pool.ErrUnsupported)
	}
	if env.Snapshot == "" || env.Snapshot == p.o.Snapshot {
		return nil
	}
	return p.revertAndBoot(ctx, &inst, env.Snapshot)
}

// Destroy stops the VM and frees its vmx.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	defer p.slots.Release(id)
	if inst.Ref == "" {
		return nil
	}
	if _, err := p.vmrun(ctx, "stop", inst.Ref); err != nil {
		return err
	}
	return nil
}

// Check probes the guest.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	return p.guest.Probe(ctx, inst.Endpoint, p.o.Config.HealthPath, "")
}

// Adopt reclaims a vmx that is still configured, running and answering.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	slot, err := strconv.Atoi(inst.Data["slot"])
	if err != nil || slot < 0 || slot >= len(p.o.Config.VMs) || p.o.Config.VMs[slot] != inst.Ref {
		return errors.New("vmx is no longer configured")
	}
	if !p.slots.Take(slot, id) {
		return errors.New("slot already adopted by another VM")
	}
	up, err := p.running(ctx, inst.Ref)
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

// Sweep has nothing to do: the vmx files are configured, never created.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error { return nil }
