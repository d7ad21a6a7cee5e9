// Package leasing is the coordinator's use of vmmanager: it acquires a VM
// lease for an episode (holder = episode id), renews it while the episode's
// runner heartbeats, and releases it with a reset when the episode ends.
// Every call has its own deadline, so a slow or dead vmmanager never stalls
// the scheduler; a lease the coordinator fails to release simply expires at
// vmmanager after its TTL.
package leasing

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// vmClient is the part of the generated VMManagerClient this package uses.
type vmClient interface {
	AcquireLease(ctx context.Context, in *pb.AcquireLeaseRequest, opts ...grpc.CallOption) (*pb.Lease, error)
	RenewLease(ctx context.Context, in *pb.RenewLeaseRequest, opts ...grpc.CallOption) (*pb.Lease, error)
	ReleaseLease(ctx context.Context, in *pb.ReleaseLeaseRequest, opts ...grpc.CallOption) (*pb.ReleaseLeaseResponse, error)
	ListPools(ctx context.Context, in *pb.ListPoolsRequest, opts ...grpc.CallOption) (*pb.ListPoolsResponse, error)
}

var _ vmClient = pb.VMManagerClient(nil)

// Config tunes lease use.
type Config struct {
	// TTL of every lease; renewed at a third of it.
	TTL time.Duration
	// Wait is how long AcquireLease may wait for a free VM.
	Wait time.Duration
	// CallTimeout bounds renew and release calls.
	CallTimeout time.Duration
}

// Manager acquires, renews and releases leases.
type Manager struct {
	c   vmClient
	cfg Config
}

// New returns a Manager over a VMManager client.
func New(c vmClient, cfg Config) *Manager {
	if cfg.TTL <= 0 {
		cfg.TTL = time.Minute
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 30 * time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	return &Manager{c: c, cfg: cfg}
}

// TTL is the lease time to live the manager asks for.
func (m *Manager) TTL() time.Duration { return m.cfg.TTL }

// Acquire leases a VM of pool for holder, waiting up to the configured wait;
// labels are shown with the lease (rollout, task). The returned lease
// carries its token; callers must not log it.
func (m *Manager) Acquire(ctx context.Context, pool, holder string, labels map[string]string, ec *pb.EnvConfig) (*pb.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Wait+m.cfg.CallTimeout)
	defer cancel()
	l, err := m.c.AcquireLease(ctx, &pb.AcquireLeaseRequest{
		Pool:        pool,
		WaitTimeout: durationpb.New(m.cfg.Wait),
		Ttl:         durationpb.New(m.cfg.TTL),
		Holder:      holder,
		Labels:      labels,
		EnvConfig:   ec,
	})
	if err != nil {
		return nil, fmt.Errorf("acquire lease in pool %s: %w", pool, err)
	}
	return l, nil
}

// Renew extends a lease by its TTL and sets labels on it (the episode's
// progress; nil sets none).
func (m *Manager) Renew(ctx context.Context, leaseID, token string, labels map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := m.c.RenewLease(ctx, &pb.RenewLeaseRequest{LeaseId: leaseID, Token: token, Labels: labels}); err != nil {
		return fmt.Errorf("renew lease %s: %w", leaseID, err)
	}
	return nil
}

// Release ends a lease and has the VM reset before it is leased again.
func (m *Manager) Release(ctx context.Context, leaseID, token string) error {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := m.c.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{LeaseId: leaseID, Token: token, Reset_: proto.Bool(true)}); err != nil {
		return fmt.Errorf("release lease %s: %w", leaseID, err)
	}
	return nil
}

// Pools lists vmmanager's pools, with what each provider supports.
func (m *Manager) Pools(ctx context.Context) ([]*pb.Pool, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := m.c.ListPools(ctx, &pb.ListPoolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return resp.Pools, nil
}
