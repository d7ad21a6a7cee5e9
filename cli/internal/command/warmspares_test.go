package command

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func TestWarmSparesSizing(t *testing.T) {
	for _, tt := range []struct {
		name           string
		n, m, episodes int
		reset          time.Duration
		want           int
	}{
		{name: "n > m: a backlog, one spare hides a 1 s reset", n: 5, m: 3, episodes: 20, reset: time.Second, want: 1},
		{name: "n = m: still a backlog", n: 3, m: 3, episodes: -1, reset: time.Second, want: 1},
		{name: "n < m: the idle VM is the spare", n: 2, m: 3, episodes: -1, reset: time.Second, want: 0},
		{name: "n < m, slow resets: the spares beyond the idle VMs", n: 30, m: 32, episodes: -1, reset: 15 * time.Second, want: 6},
		{name: "docker, 16 VMs: 16 × 15 s / 60 s resetting", n: 64, m: 16, episodes: -1, reset: 15 * time.Second, want: 4},
		{name: "qemu, 100 VMs: 100 × 3 s / 60 s", n: 200, m: 100, episodes: -1, reset: 3 * time.Second, want: 5},
		{name: "one episode per VM: no VM is used twice", n: 8, m: 3, episodes: 3, reset: time.Second, want: 0},
		{name: "no more spares than episodes beyond m", n: 64, m: 16, episodes: 18, reset: 15 * time.Second, want: 2},
		{name: "at most m spares", n: 10, m: 4, episodes: -1, reset: 10 * time.Minute, want: 4},
		{name: "size + spares within 256", n: 300, m: 200, episodes: -1, reset: 2 * time.Minute, want: 56},
		{name: "no slots", n: 0, m: 3, episodes: -1, reset: time.Second, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := warmSpares(tt.n, tt.m, tt.episodes, tt.reset); got != tt.want {
				t.Errorf("warmSpares(n=%d, m=%d, episodes=%d, reset=%s) = %d, want %d", tt.n, tt.m, tt.episodes, tt.reset, got, tt.want)
			}
		})
	}
}

func TestWarmSparesFlag(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		want    int    // spares of a pool of --num-vms for 100 episodes
		wantErr string // in validate's error
	}{
		{name: "default: sized (process, n 5 > m 3)", args: nil, want: 1},
		{name: "sized for docker", args: []string{"--provider", "docker", "--num-rollouts", "32", "--num-vms", "16"}, want: 4},
		{name: "given", args: []string{"--warm-spares", "2"}, want: 2},
		{name: "none", args: []string{"--warm-spares", "0"}, want: 0},
		{name: "below -1", args: []string{"--warm-spares", "-2"}, wantErr: "--warm-spares must be -1"},
		{name: "beyond vmmanager's bound", args: []string{"--num-vms", "250", "--warm-spares", "7"}, wantErr: "--num-vms + --warm-spares must be at most 256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f meshFlags
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			f.register(fs, "", "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := f.validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("validate(%q) = %v, want an error with %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("validate(%q): %v", tt.args, err)
			}
			if got := f.spares(f.numVMs, 100); got != tt.want {
				t.Errorf("spares with %q = %d, want %d", tt.args, got, tt.want)
			}
		})
	}
}

// TestEmbeddedWarmSpareServesDuringReset starts `rollout run`'s embedded
// mesh as it would for desktop tasks with N = 2 slots and M = 1 VM: the
// sizing adds a spare, and a VM released with reset is replaced by the
// spare at once, while it resets (an acquire that does not wait at all
// gets a VM); once its reset ends it is the next one handed out.
func TestEmbeddedWarmSpareServesDuringReset(t *testing.T) {
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is required in CI: %v", bin, err)
			}
			t.Skipf("%s not installed: %v", bin, err)
		}
	}
	desktopdOnPath(t)
	root := repoRoot(t)
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--num-rollouts", "2", "--num-vms", "1", "--data-dir", filepath.Join(t.TempDir(), "mesh"),
		"--model-base-url", "", "--fake-script", filepath.Join(root, "examples", "fakellm", "demo.jsonl")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	m, err := startEmbedded(ctx, &f, root, map[string]int{"desktop": 4}, &stderr)
	if err != nil {
		t.Fatalf("start the embedded mesh: %v\n%s", err, stderr.String())
	}
	defer m.Close()
	if want := "1 process VMs + 1 warm spare(s)"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	conn, err := dial(m.Addr(mesh.VMManager), f.client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	vms := pb.NewVMManagerClient(conn)
	acquire := func(wait time.Duration) (*pb.Lease, error) {
		return vms.AcquireLease(ctx, &pb.AcquireLeaseRequest{Pool: "default", Holder: t.Name(),
			WaitTimeout: durationpb.New(wait), Ttl: durationpb.New(time.Minute)})
	}
	state := func(id string) pb.VMState {
		r, err := vms.ListVMs(ctx, &pb.ListVMsRequest{Pool: "default"})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range r.GetVms() {
			if v.GetVmId() == id {
				return v.GetState()
			}
		}
		return pb.VMState_VM_STATE_UNSPECIFIED
	}
	waitReady := func(what string, ok func([]*pb.VM) bool) {
		t.Helper()
		for {
			r, err := vms.ListVMs(ctx, &pb.ListVMsRequest{Pool: "default", State: pb.VMState_VM_STATE_READY})
			if err != nil {
				t.Fatal(err)
			}
			if ok(r.GetVms()) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	first, err := acquire(2 * time.Minute)
	if err != nil {
		t.Fatalf("first lease: %v", err)
	}
	waitReady("the spare to boot", func(v []*pb.VM) bool { return len(v) == 1 })

	reset := true
	if _, err := vms.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{LeaseId: first.GetLeaseId(), Token: first.GetToken(), Reset_: &reset}); err != nil {
		t.Fatal(err)
	}
	second, err := acquire(0)
	if err != nil {
		t.Fatalf("lease right after a release with reset, without waiting: %v (the spare should serve it)", err)
	}
	if second.GetVmId() == first.GetVmId() {
		t.Fatalf("got the released VM %s again before its reset could end", first.GetVmId())
	}
	t.Logf("the released VM was %s when the spare was leased", state(first.GetVmId()))

	// The released VM, clean again, is the spare now.
	waitReady("the released VM's reset", func(v []*pb.VM) bool { return len(v) == 1 && v[0].GetVmId() == first.GetVmId() })
	if _, err := vms.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{LeaseId: second.GetLeaseId(), Token: second.GetToken(), Reset_: &reset}); err != nil {
		t.Fatal(err)
	}
	third, err := acquire(0)
	if err != nil {
		t.Fatalf("second hand-off without waiting: %v", err)
	}
	if third.GetVmId() != first.GetVmId() {
		t.Errorf("third lease on %s, want the reset VM %s", third.GetVmId(), first.GetVmId())
	}
}
