package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// flakyLeaser is a vmmanager that is down (Unavailable) for its first
// `down` releases, as while it restarts.
type flakyLeaser struct {
	leaser
	mu       sync.Mutex
	down     int
	calls    int
	released []string
}

func (f *flakyLeaser) TTL() time.Duration { return time.Minute }

func (f *flakyLeaser) Release(_ context.Context, leaseID, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.down {
		return status.Error(codes.Unavailable, "connection refused")
	}
	f.released = append(f.released, leaseID)
	return nil
}

// TestReleaseRetriedWhileVMManagerRestarts: a release that hits a restarting
// vmmanager is retried, so the VM is not held until the lease's TTL runs
// out. Found by the compose chaos test (cli/e2e): after a vmmanager SIGKILL
// two of three VMs stayed leased for a whole TTL and the mesh stalled.
func TestReleaseRetriedWhileVMManagerRestarts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &flakyLeaser{down: 3}
	e := &Engine{leases: f, log: zaptest.NewLogger(t), bg: ctx}
	e.releaseLease(&pb.Lease{LeaseId: "l1", Token: "t", VmId: "vm1"})
	e.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.released) != 1 || f.calls != 4 {
		t.Errorf("released %v after %d calls, want [l1] after 4", f.released, f.calls)
	}
}

// TestReleaseNotRetriedWhenRefused: a release the vmmanager refuses for good
// (an unknown or expired lease) is not retried.
func TestReleaseNotRetriedWhenRefused(t *testing.T) {
	f := &refusingLeaser{}
	e := &Engine{leases: f, log: zaptest.NewLogger(t), bg: context.Background()}
	e.releaseLease(&pb.Lease{LeaseId: "l1", Token: "t", VmId: "vm1"})
	e.wg.Wait()
	if f.calls != 1 {
		t.Errorf("%d release calls, want 1", f.calls)
	}
}

type refusingLeaser struct {
	leaser
	calls int
}

func (f *refusingLeaser) TTL() time.Duration { return time.Minute }

func (f *refusingLeaser) Release(context.Context, string, string) error {
	f.calls++
	return status.Error(codes.NotFound, "no such lease")
}
