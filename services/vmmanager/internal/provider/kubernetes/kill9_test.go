package kubernetes

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
)

// TestAPIKill9 runs the real vmmanager binary with a kubernetes pool
// against the real API server (kubeconfig), holds two leases, SIGKILLs it,
// plants a stray pod, and starts it again on the same data directory: the
// leases answer with their tokens, the pods are adopted (same names), the
// stray is deleted, and a SIGTERM deletes every pod.
func TestAPIKill9(t *testing.T) {
	needRealAPI(t)
	s := newSetup(t, nil)
	bin := filepath.Join(t.TempDir(), "vmmanager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/vmmanager")
	build.Dir = filepath.Join("..", "..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build vmmanager: %v\n%s", err, out)
	}
	cfg := fmt.Sprintf(`pools:
  - name: desk
    provider: kubernetes
    size: 2
    boot_timeout: 60s
    kubernetes:
      kubeconfig: %s
      namespace: %s
      guest_port: %d
`, env.kubeconfig, s.ns, s.port)
	cfgPath := filepath.Join(t.TempDir(), "vmmanager.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", proctest.FreePort(t))
	args := []string{"--config", cfgPath, "--data-dir", dataDir, "--grpc-addr", addr, "--http-addr", "", "--log-format", "console"}
	vm1 := runBinary(t, bin, args...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := rolloutmeshv1.NewVMManagerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var leases []*rolloutmeshv1.Lease
	for i := range 2 {
		var l *rolloutmeshv1.Lease
		eventually(t, 90*time.Second, "vmmanager to lease", func() error {
			l, err = c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: "desk", WaitTimeout: durationpb.New(20 * time.Second), Ttl: durationpb.New(10 * time.Minute), Holder: fmt.Sprint("ep-", i)})
			return err
		})
		leases = append(leases, l)
	}
	podNames := func() string {
		var names []string
		for _, p := range s.pods(t, LabelPool+"=desk") {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		return strings.Join(names, ",")
	}
	before := podNames()
	if n := strings.Count(before, ",") + 1; before == "" || n != 2 {
		t.Fatalf("pods before the kill: %q, want 2", before)
	}
	if err := vm1.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	vm1.Wait()

	// A stray of this vmmanager's pool while it is down.
	existing := s.pods(t, LabelPool+"=desk")[0]
	stray := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{
			LabelInstance: existing.Labels[LabelInstance], LabelPool: "desk", LabelVM: "desk-deadbeef"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "rolloutmesh/desktop:full"}}},
	}
	if _, err := env.cli.CoreV1().Pods(s.ns).Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	vm2 := runBinary(t, bin, args...)
	for _, l := range leases {
		var got *rolloutmeshv1.Lease
		eventually(t, 60*time.Second, "restarted vmmanager to answer", func() error {
			got, err = c.GetLease(ctx, &rolloutmeshv1.GetLeaseRequest{LeaseId: l.LeaseId})
			return err
		})
		if got.VmId != l.VmId || got.Endpoint != l.Endpoint {
			t.Errorf("lease after restart = %v, want vm %s endpoint %s", got, l.VmId, l.Endpoint)
		}
		if _, err := c.RenewLease(ctx, &rolloutmeshv1.RenewLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
			t.Errorf("renew with the old token after restart: %v", err)
		}
		if err := guestClient().Probe(ctx, l.Endpoint, "/healthz", ""); err != nil {
			t.Errorf("guest of %s after restart: %v", l.VmId, err)
		}
	}
	eventually(t, 20*time.Second, "stray deleted and pods adopted", func() error {
		if got := podNames(); got != before {
			return fmt.Errorf("pods %q, want the adopted %q", got, before)
		}
		return nil
	})
	if err := vm2.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := vm2.Wait(); err != nil {
		t.Errorf("vmmanager exit after SIGTERM: %v, want status 0", err)
	}
	if left := podNames(); left != "" {
		t.Errorf("pods %s left after SIGTERM", left)
	}
}

// runBinary starts a program with its output in a file shown on failure.
func runBinary(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(t.TempDir(), "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("%s output:\n%s", filepath.Base(bin), b)
		}
	})
	return cmd
}
