package vmmanager

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/docker"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/kubernetes"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/process"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/qemu"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/static"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/virtualbox"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/vmware"
)

// providerEnv is what a provider gets besides its pool spec.
type providerEnv struct {
	dir        string   // private directory of the pool
	instanceID string   // labels what this vmmanager creates
	pools      []string // every configured pool (kubernetes sweeps pods of the others)
	log        *zap.Logger
}

// buildProvider makes the provider of one pool; key names the pool in
// errors ("pools[0]").
func buildProvider(ctx context.Context, key string, spec PoolSpec, env providerEnv) (pool.Provider, error) {
	log := env.log.With(zap.String("pool", spec.Name))
	switch spec.Provider {
	case config.ProviderProcess:
		pc := *spec.Process
		bin, err := process.ResolveDesktopd(pc.Desktopd)
		if err != nil {
			return nil, fmt.Errorf("config: %s.process.desktopd: %v", key, err)
		}
		pc.Desktopd = bin
		p, err := process.New(process.Options{
			Config: pc, ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, Dir: env.dir, Logger: log,
			GuestHome: pc.GuestHome,
		})
		if err != nil {
			return nil, fmt.Errorf("config: %s.process: %v", key, err)
		}
		return p, nil
	case config.ProviderDocker:
		p, err := docker.New(docker.Options{
			Config: *spec.Docker, Pool: spec.Name, InstanceID: env.instanceID,
			ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB,
			Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("config: %s.docker: %v", key, err)
		}
		return p, nil
	case config.ProviderKubernetes:
		p, err := kubernetes.New(ctx, kubernetes.Options{
			Config: *spec.Kubernetes, Pool: spec.Name, InstanceID: env.instanceID, Pools: env.pools,
			ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB,
			Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("config: %s.kubernetes: %v", key, err)
		}
		return p, nil
	case config.ProviderQEMU:
		p, err := qemu.New(qemu.Options{
			Config: *spec.QEMU, Snapshot: spec.SnapshotName, CPUs: spec.CPUs, MemoryMB: spec.MemoryMB,
			ScreenWidth: spec.ScreenWidth, ScreenHeight: spec.ScreenHeight, Dir: env.dir, VMIDLen: pool.VMIDLen(spec.Name), Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("config: %s.qemu: %v", key, err)
		}
		return p, nil
	case config.ProviderStatic:
		return static.New(*spec.Static), nil
	case config.ProviderVMware:
		return vmware.New(vmware.Options{Config: *spec.VMware, Snapshot: spec.SnapshotName, Headless: headless(spec)}), nil
	case config.ProviderVirtualBox:
		return virtualbox.New(virtualbox.Options{Config: *spec.VirtualBox, Snapshot: spec.SnapshotName, Headless: headless(spec)}), nil
	}
	return nil, fmt.Errorf("config: %s.provider: %q is not available in this build", key, spec.Provider)
}

// envSupported lists the EnvConfig overrides a pool's provider applies at
// AcquireLease, for ListPools, so that the coordinator refuses a rollout
// asking for one the pool would refuse on every lease. It follows the
// providers' Prepare: vmware and virtualbox revert to another snapshot and
// refuse the rest; qemu restores another snapshot only when the pool saves
// some (qemu.snapshots: a VM's overlay has no other); the other kinds are
// not Preparers, so their pools refuse every override.
func envSupported(spec PoolSpec) []string {
	switch spec.Provider {
	case config.ProviderVMware, config.ProviderVirtualBox:
		return []string{pool.EnvSnapshot}
	case config.ProviderQEMU:
		if spec.QEMU != nil && len(spec.QEMU.Snapshots) > 0 {
			return []string{pool.EnvSnapshot}
		}
	}
	return nil
}

// headless defaults to true: a pool of VMs nobody watches.
func headless(spec PoolSpec) bool { return spec.Headless == nil || *spec.Headless }

func durationOf(d config.Duration) time.Duration { return time.Duration(d) }

// durationOrOff maps a negative health interval to "off" (0 for the pool).
func durationOrOff(d config.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return time.Duration(d)
}
