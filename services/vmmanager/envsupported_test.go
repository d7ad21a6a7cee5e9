package vmmanager

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/docker"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/process"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/qemu"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/static"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/virtualbox"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/vmware"
)

// TestEnvSupportedMatchesPrepare: what ListPools reports a provider kind
// supports is what its Prepare accepts. Every override is refused before
// any command runs, so no hypervisor is needed.
func TestEnvSupportedMatchesPrepare(t *testing.T) {
	providers := map[string]pool.Preparer{
		config.ProviderVMware:     vmware.New(vmware.Options{Snapshot: "init"}),
		config.ProviderVirtualBox: virtualbox.New(virtualbox.Options{Snapshot: "init"}),
	}
	overrides := map[string]pool.EnvOverrides{
		pool.EnvProxy:   {Proxy: true},
		pool.EnvFixedIP: {FixedIP: true},
		pool.EnvExtra:   {Extra: map[string]string{"k": "v"}},
	}
	for kind, p := range providers {
		for name, env := range overrides {
			err := p.Prepare(context.Background(), "vm-0", pool.Instance{}, env)
			refused := errors.Is(err, pool.ErrUnsupported)
			if listed := slices.Contains(envSupported(PoolSpec{Provider: kind}), name); listed == refused {
				t.Errorf("%s: %s listed %v, but Prepare returned %v", kind, name, listed, err)
			}
		}
		if !slices.Contains(envSupported(PoolSpec{Provider: kind}), pool.EnvSnapshot) {
			t.Errorf("%s: snapshot not listed", kind)
		}
	}
	others := map[string]pool.Provider{
		config.ProviderProcess: (*process.Provider)(nil),
		config.ProviderDocker:  (*docker.Provider)(nil),
		config.ProviderStatic:  (*static.Provider)(nil),
	}
	for kind, p := range others {
		if _, ok := p.(pool.Preparer); ok {
			t.Errorf("%s became a Preparer: list what it supports in envSupported", kind)
		}
		if got := envSupported(PoolSpec{Provider: kind}); len(got) != 0 {
			t.Errorf("%s (not a Preparer): envSupported = %v, want none", kind, got)
		}
	}
}

// TestEnvSupportedQEMU: a qemu pool lists snapshot only when it saves
// snapshots of its own beyond its reset one, and its Prepare refuses the
// names it does not save as unsupported, before touching a VM.
func TestEnvSupportedQEMU(t *testing.T) {
	need(t, "qemu-img (Debian: qemu-utils)", haveBinary("qemu-img"))
	extra := []config.QEMUSnapshot{{Name: "chrome", Command: []string{"true"}}}
	for _, snaps := range [][]config.QEMUSnapshot{nil, extra} {
		q := config.QEMU{Image: "/base.qcow2", Binary: "qemu-img", Snapshots: snaps}
		spec := PoolSpec{Provider: config.ProviderQEMU, QEMU: &q}
		p, err := qemu.New(qemu.Options{Config: q, Snapshot: "ready", Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		listed := envSupported(spec)
		if got, want := slices.Contains(listed, pool.EnvSnapshot), len(snaps) > 0; got != want {
			t.Errorf("qemu with %d extra snapshots: envSupported = %v, want snapshot listed %v", len(snaps), listed, want)
		}
		for _, env := range []pool.EnvOverrides{{Snapshot: "init_state"}, {Proxy: true}, {FixedIP: true}, {Extra: map[string]string{"k": "v"}}} {
			if err := p.Prepare(context.Background(), "vm-0", pool.Instance{}, env); !errors.Is(err, pool.ErrUnsupported) {
				t.Errorf("qemu with %d extra snapshots: Prepare(%+v) = %v, want unsupported", len(snaps), env, err)
			}
		}
	}
}
