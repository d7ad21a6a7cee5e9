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
			if listed := slices.Contains(envSupported(kind), name); listed == refused {
				t.Errorf("%s: %s listed %v, but Prepare returned %v", kind, name, listed, err)
			}
		}
		if !slices.Contains(envSupported(kind), pool.EnvSnapshot) {
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
		if got := envSupported(kind); len(got) != 0 {
			t.Errorf("%s (not a Preparer): envSupported = %v, want none", kind, got)
		}
	}
}
