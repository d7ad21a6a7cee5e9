package pool

import (
	"context"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/store"
)

// Instance is a provider's handle on one running VM. The pool persists it
// and gives it back to the provider; Data is private to the provider.
type Instance struct {
	// Ref is the provider's own name for the VM: container id, pid, vmx path.
	Ref string
	// Endpoint is the guest server URL.
	Endpoint string
	// Ports are other guest services ("vnc", "chrome", "vlc").
	Ports map[string]string
	// Data is provider-private state that must survive a restart.
	Data map[string]string
}

// Provider creates, resets and destroys VMs. Every method must honour ctx.
// Create and Reset return only once the guest answers its health check.
type Provider interface {
	// Create boots a new VM with the given id.
	Create(ctx context.Context, id string) (Instance, error)
	// Reset brings a VM back to its clean state; it may return a new
	// Instance (a replaced container).
	Reset(ctx context.Context, id string, inst Instance) (Instance, error)
	// Destroy stops the VM and frees everything it held.
	Destroy(ctx context.Context, id string, inst Instance) error
	// Check reports whether the guest is alive and answering.
	Check(ctx context.Context, inst Instance) error
	// Adopt takes over a VM found in the store after a restart; an error
	// means it is gone or unusable.
	Adopt(ctx context.Context, id string, inst Instance) error
	// Sweep destroys VMs the provider finds that are not in known (strays
	// from a crash between creating a VM and recording it).
	Sweep(ctx context.Context, known map[string]bool) error
}

// EnvOverrides are a task's per-lease overrides.
type EnvOverrides struct {
	Snapshot string
	Proxy    bool
	FixedIP  bool
	Extra    map[string]string
}

// The overrides by name, as ListPools reports what a provider supports
// (Pool.env_config_supported).
const (
	EnvSnapshot = "snapshot"
	EnvProxy    = "proxy"
	EnvFixedIP  = "fixed_ip"
	EnvExtra    = "extra"
)

// IsZero reports whether no override is set.
func (e EnvOverrides) IsZero() bool {
	return e.Snapshot == "" && !e.Proxy && !e.FixedIP && len(e.Extra) == 0
}

// Preparer is implemented by providers that can apply task overrides
// (e.g. revert to another snapshot) before a lease is handed out.
type Preparer interface {
	Prepare(ctx context.Context, id string, inst Instance, env EnvOverrides) error
}

// Store persists VMs and leases; *store.Store implements it.
type Store interface {
	SaveVM(store.VM) error
	DeleteVM(id string) error
	SaveLease(store.Lease, store.VM) error
	EndLease(leaseID string, v store.VM) error
	HandOff(endedLeaseID string, ended store.VM, l store.Lease, v store.VM) error
}

// Spec is a pool's configuration as the pool needs it.
type Spec struct {
	Name           string
	Provider       string
	Size           int
	WarmSpares     int
	OSType         string
	ScreenWidth    int
	ScreenHeight   int
	ClientPassword string
	GuestToken     string
	HealthInterval time.Duration
	BootTimeout    time.Duration
	ResetTimeout   time.Duration
}
