package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// vmmanagerPkg is built when no binary is given; the runner's module is
// in the repository's workspace with vmmanager's, so `go build` finds it
// from here without the runner depending on vmmanager.
const vmmanagerPkg = "github.com/rolloutmesh/rolloutmesh/services/vmmanager/cmd/vmmanager"

// vmm is a vmmanager process with one docker pool of the full image.
type vmm struct {
	cmd    *exec.Cmd
	conn   *grpc.ClientConn
	client rolloutmeshv1.VMManagerClient
	log    *lockedWriter
	done   chan error
}

// poolName is the pool's name in the generated config.
const poolName = "bench-full"

// startVMM writes a pool config, starts vmmanager on a free loopback port
// and connects to it. A fresh data directory means no VM of an earlier
// run is re-adopted.
func startVMM(ctx context.Context, bin, image, dir string, cpus, memMB int) (*vmm, error) {
	if bin == "" {
		bin = filepath.Join(dir, "vmmanager")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, vmmanagerPkg)
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build vmmanager (or give -vmmanager): %w\n%s", err, out)
		}
	}
	cfg := fmt.Sprintf(`pools:
  - name: %s
    provider: docker
    size: 1
    screen_width: %d
    screen_height: %d
    client_password: password
    cpus: %d
    memory_mb: %d
    boot_timeout: 300s
    reset_timeout: 300s
    health_interval: -1s
    docker:
      image: %s
      host: 127.0.0.1
`, poolName, screenW, screenH, cpus, memMB, image)
	cfgPath := filepath.Join(dir, "vmmanager.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	v := &vmm{log: &lockedWriter{b: &bytes.Buffer{}}, done: make(chan error, 1)}
	v.cmd = exec.Command(bin, "--config", cfgPath, "--data-dir", filepath.Join(dir, "vmmanager-data"),
		"--grpc-addr", addr, "--http-addr", "")
	w := v.log
	v.cmd.Stdout, v.cmd.Stderr = w, w
	if err := v.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vmmanager: %w", err)
	}
	go func() { v.done <- v.cmd.Wait() }()
	if v.conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		v.stop()
		return nil, err
	}
	v.client = rolloutmeshv1.NewVMManagerClient(v.conn)
	// Wait until it serves: ListPools answers once the pools are built.
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := v.client.ListPools(cctx, &rolloutmeshv1.ListPoolsRequest{})
		cancel()
		if err == nil {
			return v, nil
		}
		select {
		case err := <-v.done:
			v.done <- err
			return nil, fmt.Errorf("vmmanager exited: %v\n%s", err, w.tail())
		default:
		}
		if time.Now().After(deadline) {
			v.stop()
			return nil, fmt.Errorf("vmmanager did not serve within a minute: %v\n%s", err, w.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// acquire leases the pool's VM, waiting for its boot or reset.
func (v *vmm) acquire(ctx context.Context) (*rolloutmeshv1.Lease, error) {
	return v.client.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{
		Pool: poolName, WaitTimeout: durationpb.New(10 * time.Minute), Ttl: durationpb.New(30 * time.Minute),
		Holder: "benchosworldsetup",
	})
}

// release gives the VM back with a reset: the container is replaced, so
// the next run starts from the image as an episode does.
func (v *vmm) release(ctx context.Context, l *rolloutmeshv1.Lease) error {
	reset := true
	_, err := v.client.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token, Reset_: &reset})
	return err
}

// stop ends vmmanager with SIGTERM, which stops its containers, and waits
// for it (a kill after two minutes).
func (v *vmm) stop() {
	if v.conn != nil {
		v.conn.Close()
	}
	if v.cmd.Process == nil {
		return
	}
	v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(2 * time.Minute):
		v.cmd.Process.Kill()
		<-v.done
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// lockedWriter keeps vmmanager's log for error messages.
type lockedWriter struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 1<<20 {
		w.b.Reset() // only the tail matters
	}
	return w.b.Write(p)
}

func (w *lockedWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(w.b.String()), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], "\n")
}
