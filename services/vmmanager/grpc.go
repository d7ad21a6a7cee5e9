package vmmanager

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Request limits.
const (
	defaultTTL     = 5 * time.Minute
	minTTL         = time.Second
	maxTTL         = 24 * time.Hour
	maxWait        = time.Hour
	maxHolderBytes = 256
	maxIDBytes     = 128
	maxExtra       = 32
	maxExtraBytes  = 1024
	watchBuffer    = 1024
)

var errPoolNotFound = errors.New("pool not found")

// errorCodes maps domain errors to gRPC codes: the one place where this
// happens. Context errors and status errors pass through; anything else is
// Internal and its details stay in the log.
var errorCodes = []struct {
	err  error
	code codes.Code
}{
	{errPoolNotFound, codes.NotFound},
	{pool.ErrLeaseNotFound, codes.NotFound},
	{pool.ErrBadToken, codes.PermissionDenied},
	{pool.ErrNoVM, codes.DeadlineExceeded},
	{pool.ErrClosed, codes.Unavailable},
	{pool.ErrUnsupported, codes.FailedPrecondition},
	{pool.ErrTooManyLabels, codes.InvalidArgument},
	{pool.ErrPoolBroken, codes.FailedPrecondition},
}

func (s *Service) toStatus(method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	s.log.Error("request failed", zap.String("method", method), zap.Error(err))
	return status.Error(codes.Internal, "internal error (see vmmanager log)")
}

// ValidateRequest checks requests before the handlers run.
func (s *Service) ValidateRequest(fullMethod string, req any) error {
	switch r := req.(type) {
	case *rolloutmeshv1.AcquireLeaseRequest:
		if r.GetPool() == "" {
			return daemon.InvalidField("pool", "required")
		}
		if len(r.GetPool()) > maxIDBytes {
			return daemon.InvalidField("pool", "at most %d bytes", maxIDBytes)
		}
		if r.WaitTimeout != nil {
			if err := r.WaitTimeout.CheckValid(); err != nil {
				return daemon.InvalidField("wait_timeout", "%v", err)
			}
			if d := r.WaitTimeout.AsDuration(); d < 0 || d > maxWait {
				return daemon.InvalidField("wait_timeout", "must be between 0 and %s, got %s", maxWait, d)
			}
		}
		if r.Ttl != nil {
			if err := checkTTL("ttl", r.Ttl); err != nil {
				return err
			}
		}
		if len(r.GetHolder()) > maxHolderBytes {
			return daemon.InvalidField("holder", "at most %d bytes", maxHolderBytes)
		}
		if err := checkLabels(r.GetLabels()); err != nil {
			return err
		}
		if ec := r.GetEnvConfig(); ec != nil {
			if len(ec.GetSnapshot()) > maxIDBytes {
				return daemon.InvalidField("env_config.snapshot", "at most %d bytes", maxIDBytes)
			}
			if len(ec.GetExtra()) > maxExtra {
				return daemon.InvalidField("env_config.extra", "at most %d entries", maxExtra)
			}
			for k, v := range ec.GetExtra() {
				if len(k)+len(v) > maxExtraBytes {
					return daemon.InvalidField("env_config.extra", "entry %.40q longer than %d bytes", k, maxExtraBytes)
				}
			}
		}
	case *rolloutmeshv1.RenewLeaseRequest:
		if err := checkLeaseRef(r.GetLeaseId(), r.GetToken()); err != nil {
			return err
		}
		if err := checkLabels(r.GetLabels()); err != nil {
			return err
		}
		if r.Ttl != nil {
			return checkTTL("ttl", r.Ttl)
		}
	case *rolloutmeshv1.ReleaseLeaseRequest:
		return checkLeaseRef(r.GetLeaseId(), r.GetToken())
	case *rolloutmeshv1.GetLeaseRequest:
		return checkLeaseID(r.GetLeaseId())
	case *rolloutmeshv1.ForceReleaseRequest:
		if err := checkLeaseID(r.GetLeaseId()); err != nil {
			return err
		}
		if len(r.GetReason()) > 1024 {
			return daemon.InvalidField("reason", "at most 1024 bytes")
		}
	case *rolloutmeshv1.ListLeasesRequest:
		if len(r.GetPool()) > maxIDBytes {
			return daemon.InvalidField("pool", "at most %d bytes", maxIDBytes)
		}
		if len(r.GetHolderPrefix()) > maxHolderBytes {
			return daemon.InvalidField("holder_prefix", "at most %d bytes", maxHolderBytes)
		}
	case *rolloutmeshv1.WatchPoolRequest:
		if len(r.GetPool()) > maxIDBytes {
			return daemon.InvalidField("pool", "at most %d bytes", maxIDBytes)
		}
	case *rolloutmeshv1.ListVMsRequest:
		if len(r.GetPool()) > maxIDBytes {
			return daemon.InvalidField("pool", "at most %d bytes", maxIDBytes)
		}
		if r.GetState() != rolloutmeshv1.VMState_VM_STATE_UNSPECIFIED {
			if _, ok := stateFromProto[r.GetState()]; !ok {
				return daemon.InvalidField("state", "unknown state %d", r.GetState())
			}
		}
	}
	return nil
}

func checkTTL(field string, d *durationpb.Duration) error {
	if err := d.CheckValid(); err != nil {
		return daemon.InvalidField(field, "%v", err)
	}
	if v := d.AsDuration(); v < minTTL || v > maxTTL {
		return daemon.InvalidField(field, "must be between %s and %s, got %s", minTTL, maxTTL, v)
	}
	return nil
}

func checkLeaseID(id string) error {
	if id == "" {
		return daemon.InvalidField("lease_id", "required")
	}
	if len(id) > maxIDBytes {
		return daemon.InvalidField("lease_id", "at most %d bytes", maxIDBytes)
	}
	return nil
}

func checkLeaseRef(id, token string) error {
	if err := checkLeaseID(id); err != nil {
		return err
	}
	if token == "" {
		return daemon.InvalidField("token", "required")
	}
	if len(token) > maxIDBytes {
		return daemon.InvalidField("token", "at most %d bytes", maxIDBytes)
	}
	return nil
}

func (s *Service) pool(name string) (*pool.Pool, error) {
	p := s.byNm[name]
	if p == nil {
		return nil, errPoolNotFound
	}
	return p, nil
}

// poolOfLease finds the pool holding a lease; pools are few.
func (s *Service) poolOfLease(id string) (*pool.Pool, error) {
	for _, p := range s.pools {
		if p.HasLease(id) {
			return p, nil
		}
	}
	return nil, pool.ErrLeaseNotFound
}

// AcquireLease leases a VM, waiting FIFO up to wait_timeout.
func (s *Service) AcquireLease(ctx context.Context, r *rolloutmeshv1.AcquireLeaseRequest) (*rolloutmeshv1.Lease, error) {
	const m = "AcquireLease"
	p, err := s.pool(r.GetPool())
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	ttl := defaultTTL
	if r.Ttl != nil {
		ttl = r.Ttl.AsDuration()
	}
	req := pool.AcquireRequest{Holder: r.GetHolder(), Labels: r.GetLabels(), TTL: ttl, Wait: r.GetWaitTimeout().AsDuration()}
	if ec := r.GetEnvConfig(); ec != nil {
		req.Env = pool.EnvOverrides{Snapshot: ec.GetSnapshot(), Proxy: ec.GetProxy(), FixedIP: ec.GetFixedIp(), Extra: ec.GetExtra()}
	}
	g, err := p.Acquire(ctx, req)
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	l := leaseToProto(g.Lease)
	l.Token, l.ClientPassword, l.GuestToken = g.Token, g.ClientPassword, g.GuestToken
	return l, nil
}

// RenewLease extends a lease.
func (s *Service) RenewLease(ctx context.Context, r *rolloutmeshv1.RenewLeaseRequest) (*rolloutmeshv1.Lease, error) {
	const m = "RenewLease"
	p, err := s.poolOfLease(r.GetLeaseId())
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	var ttl time.Duration
	if r.Ttl != nil {
		ttl = r.Ttl.AsDuration()
	}
	lv, err := p.RenewLabels(r.GetLeaseId(), r.GetToken(), ttl, r.GetLabels())
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	return leaseToProto(lv), nil
}

// ReleaseLease ends a lease; the reset runs in the background.
func (s *Service) ReleaseLease(ctx context.Context, r *rolloutmeshv1.ReleaseLeaseRequest) (*rolloutmeshv1.ReleaseLeaseResponse, error) {
	const m = "ReleaseLease"
	p, err := s.poolOfLease(r.GetLeaseId())
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	reset := r.Reset_ == nil || *r.Reset_
	if err := p.Release(r.GetLeaseId(), r.GetToken(), reset); err != nil {
		return nil, s.toStatus(m, err)
	}
	return &rolloutmeshv1.ReleaseLeaseResponse{}, nil
}

// ForceRelease ends a lease without its token.
func (s *Service) ForceRelease(ctx context.Context, r *rolloutmeshv1.ForceReleaseRequest) (*rolloutmeshv1.ForceReleaseResponse, error) {
	const m = "ForceRelease"
	p, err := s.poolOfLease(r.GetLeaseId())
	if err != nil {
		return nil, s.toStatus(m, err)
	}
	reset := r.Reset_ == nil || *r.Reset_
	if err := p.ForceRelease(r.GetLeaseId(), reset, r.GetReason()); err != nil {
		return nil, s.toStatus(m, err)
	}
	return &rolloutmeshv1.ForceReleaseResponse{}, nil
}

// GetLease shows one lease without its token.
func (s *Service) GetLease(ctx context.Context, r *rolloutmeshv1.GetLeaseRequest) (*rolloutmeshv1.Lease, error) {
	for _, p := range s.pools {
		if lv, ok := p.Lease(r.GetLeaseId()); ok {
			return leaseToProto(lv), nil
		}
	}
	return nil, s.toStatus("GetLease", pool.ErrLeaseNotFound)
}

// ListLeases shows live leases, oldest first.
func (s *Service) ListLeases(ctx context.Context, r *rolloutmeshv1.ListLeasesRequest) (*rolloutmeshv1.ListLeasesResponse, error) {
	// A filter naming no pool is a mistake, not an empty pool.
	if r.GetPool() != "" {
		if _, err := s.pool(r.GetPool()); err != nil {
			return nil, s.toStatus("ListLeases", err)
		}
	}
	var all []pool.LeaseView
	for _, p := range s.pools {
		if r.GetPool() == "" || r.GetPool() == p.Name() {
			all = append(all, p.Leases(r.GetHolderPrefix())...)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].AcquireTime.Before(all[j].AcquireTime) })
	out := &rolloutmeshv1.ListLeasesResponse{}
	for _, l := range all {
		out.Leases = append(out.Leases, leaseToProto(l))
	}
	return out, nil
}

// ListVMs shows VMs ordered by pool and id.
func (s *Service) ListVMs(ctx context.Context, r *rolloutmeshv1.ListVMsRequest) (*rolloutmeshv1.ListVMsResponse, error) {
	if r.GetPool() != "" {
		if _, err := s.pool(r.GetPool()); err != nil {
			return nil, s.toStatus("ListVMs", err)
		}
	}
	out := &rolloutmeshv1.ListVMsResponse{}
	var names []string
	for _, p := range s.pools {
		names = append(names, p.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		if r.GetPool() != "" && r.GetPool() != n {
			continue
		}
		for _, v := range s.byNm[n].VMs() {
			pv := vmToProto(v)
			if r.GetState() != rolloutmeshv1.VMState_VM_STATE_UNSPECIFIED && pv.State != r.GetState() {
				continue
			}
			out.Vms = append(out.Vms, pv)
		}
	}
	return out, nil
}

// ListPools shows each pool with its counts.
func (s *Service) ListPools(ctx context.Context, r *rolloutmeshv1.ListPoolsRequest) (*rolloutmeshv1.ListPoolsResponse, error) {
	out := &rolloutmeshv1.ListPoolsResponse{}
	for _, p := range s.pools {
		st := p.Stats()
		sp := p.Spec()
		pp := &rolloutmeshv1.Pool{
			Name: sp.Name, Provider: sp.Provider, Size: int32(sp.Size), WarmSpares: int32(sp.WarmSpares),
			VmsByState: map[string]int32{}, Waiters: int32(st.Waiters), Utilisation: st.Utilisation,
			EnvConfigSupported: s.envOK[sp.Name],
		}
		for k, n := range st.ByState {
			pp.VmsByState[k.String()] = int32(n)
		}
		out.Pools = append(out.Pools, pp)
	}
	return out, nil
}

// WatchPool streams VM state changes until the caller goes away.
func (s *Service) WatchPool(r *rolloutmeshv1.WatchPoolRequest, stream grpc.ServerStreamingServer[rolloutmeshv1.WatchPoolResponse]) error {
	if r.GetPool() != "" {
		if _, err := s.pool(r.GetPool()); err != nil {
			return s.toStatus("WatchPool", err)
		}
	}
	// Subscribe before taking the initial snapshot so that no change falls
	// between the two (a change may then be seen twice, never missed).
	sub := s.hub.Subscribe(watchBuffer)
	s.mu.Lock()
	if s.drained {
		s.mu.Unlock()
		sub.Cancel()
		return status.Error(codes.Unavailable, "vmmanager is shutting down")
	}
	s.watches[sub] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, sub)
		s.mu.Unlock()
		sub.Cancel()
	}()
	if r.GetIncludeInitial() {
		for _, p := range s.pools {
			if r.GetPool() != "" && r.GetPool() != p.Name() {
				continue
			}
			for _, v := range p.VMs() {
				if err := stream.Send(&rolloutmeshv1.WatchPoolResponse{Time: timestamppb.Now(), Vm: vmToProto(v), Reason: "initial"}); err != nil {
					return err
				}
			}
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case e, ok := <-sub.C:
			if !ok {
				if sub.Overflowed() {
					return status.Error(codes.ResourceExhausted, "watcher fell too far behind; watch again with include_initial")
				}
				return status.Error(codes.Unavailable, "vmmanager is shutting down")
			}
			if r.GetPool() != "" && e.VM.Pool != r.GetPool() {
				continue
			}
			if err := stream.Send(&rolloutmeshv1.WatchPoolResponse{
				Time: timestamppb.New(e.Time), Vm: vmToProto(e.VM), PreviousState: stateToProto[e.Previous], Reason: e.Reason,
			}); err != nil {
				return err
			}
		}
	}
}

var stateToProto = map[pool.State]rolloutmeshv1.VMState{
	pool.StateProvisioning: rolloutmeshv1.VMState_VM_STATE_PROVISIONING,
	pool.StateReady:        rolloutmeshv1.VMState_VM_STATE_READY,
	pool.StateLeased:       rolloutmeshv1.VMState_VM_STATE_LEASED,
	pool.StateResetting:    rolloutmeshv1.VMState_VM_STATE_RESETTING,
	pool.StateQuarantined:  rolloutmeshv1.VMState_VM_STATE_QUARANTINED,
	pool.StateStopping:     rolloutmeshv1.VMState_VM_STATE_STOPPING,
}

var stateFromProto = func() map[rolloutmeshv1.VMState]pool.State {
	m := map[rolloutmeshv1.VMState]pool.State{}
	for k, v := range stateToProto {
		m[v] = k
	}
	return m
}()

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func leaseToProto(l pool.LeaseView) *rolloutmeshv1.Lease {
	return &rolloutmeshv1.Lease{
		LeaseId: l.ID, VmId: l.VMID, Pool: l.Pool, Endpoint: l.Endpoint, Ports: l.Ports,
		ExpireTime: ts(l.ExpireTime), Ttl: durationpb.New(l.TTL), Holder: l.Holder, AcquireTime: ts(l.AcquireTime),
		ScreenWidth: int32(l.ScreenWidth), ScreenHeight: int32(l.ScreenHeight), OsType: l.OSType, Renewals: l.Renewals,
		Labels: l.Labels,
	}
}

func vmToProto(v pool.VMView) *rolloutmeshv1.VM {
	return &rolloutmeshv1.VM{
		VmId: v.ID, Pool: v.Pool, Provider: v.Provider, State: stateToProto[v.State], Endpoint: v.Endpoint,
		LeaseId: v.LeaseID, Holder: v.Holder, CreateTime: ts(v.CreateTime), StateTime: ts(v.StateTime),
		LastError: strings.TrimSpace(v.LastError), LeasesServed: v.LeasesServed, Resets: v.Resets,
		ProviderRef: v.Ref, Ports: v.Ports,
	}
}

// maxLabelValueBytes bounds a lease label's value.
const maxLabelValueBytes = 256

// checkLabels checks lease labels: they are shown to people and stored with
// the lease, so their number, keys and sizes are bounded.
func checkLabels(labels map[string]string) error {
	if len(labels) > pool.MaxLabels {
		return daemon.InvalidField("labels", "at most %d, got %d", pool.MaxLabels, len(labels))
	}
	for k, v := range labels {
		if !labelKey(k) {
			return daemon.InvalidField("labels", "key %.70q must be 1-63 characters of a-z, 0-9, '_', '.', '-'", k)
		}
		if len(v) > maxLabelValueBytes || !utf8.ValidString(v) {
			return daemon.InvalidField("labels", "value of %s must be at most %d bytes of UTF-8", k, maxLabelValueBytes)
		}
	}
	return nil
}

func labelKey(k string) bool {
	if k == "" || len(k) > 63 {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
