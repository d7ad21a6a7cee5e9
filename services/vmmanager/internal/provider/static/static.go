// Package static is the provider for guests started elsewhere (real OSWorld
// VMs, a lab machine): a fixed list of guest endpoints, one per VM. Nothing
// is booted or destroyed; a reset runs a configured command in the guest
// (POST /execute) or a hook on this host, then waits for the guest again.
package static

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/slots"
)

var _ pool.Provider = (*Provider)(nil)

// Provider hands out a fixed list of endpoints.
type Provider struct {
	cfg   config.Static
	guest guest.Client

	slots *slots.Set
}

// New returns a provider for cfg.
func New(cfg config.Static) *Provider {
	return &Provider{cfg: cfg, slots: slots.New(len(cfg.Endpoints))}
}

// Create claims a free endpoint and waits until it answers.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	slot, ok := p.slots.Claim(id)
	if !ok {
		return pool.Instance{}, errors.New("every endpoint is in use")
	}
	ep := p.cfg.Endpoints[slot]
	inst := pool.Instance{Ref: ep, Endpoint: ep, Data: map[string]string{"slot": strconv.Itoa(slot)}}
	if err := p.guest.WaitReady(ctx, ep, p.cfg.HealthPath, p.cfg.GuestToken, nil); err != nil {
		p.slots.Release(id)
		return inst, err
	}
	return inst, nil
}

// Reset runs the reset command or hook, then waits for the guest.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	switch {
	case len(p.cfg.ResetCommand) > 0:
		if _, err := p.guest.Execute(ctx, inst.Endpoint, p.cfg.GuestToken, p.cfg.ResetCommand); err != nil {
			return inst, fmt.Errorf("reset command: %w", err)
		}
	case len(p.cfg.ResetHook) > 0:
		cmd := exec.CommandContext(ctx, p.cfg.ResetHook[0], p.cfg.ResetHook[1:]...)
		cmd.Env = append(os.Environ(), "VM_ENDPOINT="+inst.Endpoint, "VM_ID="+id)
		if out, err := cmd.CombinedOutput(); err != nil {
			return inst, fmt.Errorf("reset hook: %v: %.300s", err, out)
		}
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken, nil); err != nil {
		return inst, err
	}
	return inst, nil
}

// Destroy gives the endpoint back; the guest itself is not ours to stop.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	p.slots.Release(id)
	return nil
}

// Check probes the guest.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	return p.guest.Probe(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken)
}

// Adopt reclaims the VM's endpoint if it is still configured and answers.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	slot, err := strconv.Atoi(inst.Data["slot"])
	if err != nil || slot < 0 || slot >= len(p.cfg.Endpoints) || p.cfg.Endpoints[slot] != inst.Endpoint {
		return errors.New("endpoint is no longer configured")
	}
	if !p.slots.Take(slot, id) {
		return errors.New("endpoint already adopted")
	}
	if err := p.Check(ctx, inst); err != nil {
		p.slots.Release(id)
		return err
	}
	return nil
}

// Sweep has nothing to do: static guests are never created here.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error { return nil }
