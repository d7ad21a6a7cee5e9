package vmmanager

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/provider/docker"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

const scratchImage = "rolloutmesh/desktopd-scratch:test"

// dockerReady reports whether a Docker engine answers.
func dockerReady() bool {
	cli, err := docker.NewClient()
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx)
	return err == nil
}

// buildScratchImage builds a FROM scratch image holding only the static
// desktopd binary, run without X: fast containers for lifecycle tests.
func buildScratchImage(t *testing.T, desktopd string) {
	t.Helper()
	bin, err := os.ReadFile(desktopd)
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM scratch\nCOPY tmp /tmp\nCOPY desktopd /desktopd\nENTRYPOINT [\"/desktopd\", \"--addr\", \":5000\", \"--display\", \"none\", \"--home\", \"/\"]\n"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// desktopd keeps its state under /tmp, which scratch lacks.
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"desktopd", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	cli, err := docker.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{scratchImage}, Remove: true, ForceRemove: true})
	if err != nil {
		t.Fatalf("image build: %v", err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("image build output: %v", err)
		}
		if msg.Error != "" {
			t.Fatalf("image build: %s", msg.Error)
		}
	}
}

// poolContainers lists containers labelled for a pool.
func poolContainers(t *testing.T, poolName string) []container.Summary {
	t.Helper()
	cli, err := docker.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelPool+"="+poolName))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func dockerPool(name string, size int) PoolSpec {
	return PoolSpec{
		Name: name, Provider: "docker", Size: size, BootTimeout: Duration(30 * time.Second),
		Docker: &DockerSpec{Image: scratchImage},
	}
}

// dockerLease serves a docker pool of size VMs of the scratch image over
// gRPC and leases one of them.
func dockerLease(t *testing.T, name string, size int) (*Service, rolloutmeshv1.VMManagerClient, *rolloutmeshv1.Lease) {
	t.Helper()
	env := daemontest.Env(t)
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{dockerPool(name, size)}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	l, err := c.AcquireLease(ctxT(t, time.Minute), &rolloutmeshv1.AcquireLeaseRequest{Pool: name,
		WaitTimeout: durationpb.New(30 * time.Second), Ttl: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return svc, c, l
}

// TestDockerPool runs a pool of real containers: leases answer, a release
// replaces the container, ListVMs shows the container ids, and shutdown
// removes every container.
func TestDockerPool(t *testing.T) {
	need(t, "a Docker engine", dockerReady())
	desktopd, _ := binaries(t)
	buildScratchImage(t, desktopd)
	name := fmt.Sprintf("dk%d", time.Now().UnixNano()%1e6)
	svc, c, l := dockerLease(t, name, 2)
	ctx := ctxT(t, 2*time.Minute)
	if code, body := get(t, l.Endpoint+"/platform"); code != 200 || string(body) != "Linux" {
		t.Errorf("%s/platform = %d %q, want 200 Linux", l.Endpoint, code, body)
	}
	vms, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{Pool: name})
	if err != nil {
		t.Fatal(err)
	}
	refBefore := ""
	for _, v := range vms.Vms {
		if v.VmId == l.VmId {
			refBefore = v.ProviderRef
		}
	}
	if got := len(poolContainers(t, name)); got != 2 {
		t.Fatalf("%d containers for the pool, want 2", got)
	}
	if _, err := c.ReleaseLease(ctx, &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "container replaced", func() bool {
		vms, err := c.ListVMs(ctx, &rolloutmeshv1.ListVMsRequest{Pool: name, State: rolloutmeshv1.VMState_VM_STATE_READY})
		if err != nil || len(vms.Vms) != 2 {
			return false
		}
		for _, v := range vms.Vms {
			if v.VmId == l.VmId {
				return v.ProviderRef != refBefore && v.Resets == 1
			}
		}
		return false
	})
	if got := len(poolContainers(t, name)); got != 2 {
		t.Errorf("%d containers after reset, want 2 (old one removed)", got)
	}
	// A snapshot override is refused: containers have no snapshots.
	_, err = c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: name, EnvConfig: &rolloutmeshv1.EnvConfig{Snapshot: "other"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("acquire with snapshot override: %v, want FailedPrecondition", err)
	}
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(poolContainers(t, name)); got != 0 {
		t.Errorf("%d containers after Close, want 0", got)
	}
}

// TestDockerDestroyRemovesUnrecordedContainer destroys a VM by a stale
// instance, the one a reset replaced, as a pool closing mid-reset does:
// the container the reset made must go too (compose down left one behind).
func TestDockerDestroyRemovesUnrecordedContainer(t *testing.T) {
	need(t, "a Docker engine", dockerReady())
	desktopd, _ := binaries(t)
	buildScratchImage(t, desktopd)
	name := fmt.Sprintf("dd%d", time.Now().UnixNano()%1e6)
	p, err := docker.New(docker.Options{Config: DockerSpec{Image: scratchImage}, Pool: name, InstanceID: "test-" + name,
		ScreenWidth: 1280, ScreenHeight: 720, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	id := name + "-vm"
	t.Cleanup(func() { p.Destroy(context.Background(), id, pool.Instance{}) })
	old, err := p.Create(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	made, err := p.Reset(ctx, id, old)
	if err != nil {
		t.Fatal(err)
	}
	if made.Ref == old.Ref {
		t.Fatalf("reset kept container %s, want a new one", old.Ref)
	}
	if err := p.Destroy(ctx, id, old); err != nil {
		t.Fatal(err)
	}
	if left := poolContainers(t, name); len(left) != 0 {
		t.Errorf("%d containers after Destroy of the replaced instance, want 0 (%s)", len(left), left[0].ID)
	}
}

// TestDockerCloseMidReset closes the service while a released VM's
// container is being replaced, at several points of the replacement: no
// container may be left.
func TestDockerCloseMidReset(t *testing.T) {
	need(t, "a Docker engine", dockerReady())
	desktopd, _ := binaries(t)
	buildScratchImage(t, desktopd)
	for _, delay := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			name := fmt.Sprintf("dc%d", time.Now().UnixNano()%1e6)
			svc, c, l := dockerLease(t, name, 1)
			if _, err := c.ReleaseLease(ctxT(t, time.Minute), &rolloutmeshv1.ReleaseLeaseRequest{LeaseId: l.LeaseId, Token: l.Token}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(delay)
			if err := svc.Close(context.Background()); err != nil {
				t.Errorf("Close %v into a reset: %v", delay, err)
			}
			if left := poolContainers(t, name); len(left) != 0 {
				t.Errorf("%d containers after Close %v into a reset, want 0", len(left), delay)
				for _, ct := range left {
					t.Logf("left: %s %s", ct.ID, ct.State)
				}
			}
		})
	}
}

// imagePresent reports whether the engine has an image locally (there is no
// registry to pull from here).
func imagePresent(ref string) bool {
	cli, err := docker.NewClient()
	if err != nil {
		return false
	}
	defer cli.Close()
	_, err = cli.ImageInspect(context.Background(), ref)
	return err == nil
}

// TestDesktopImage leases a rolloutmesh/desktop:dev container (Xvfb,
// openbox and desktopd inside) and takes a screenshot of its display.
func TestDesktopImage(t *testing.T) {
	need(t, "a Docker engine", dockerReady())
	need(t, "image rolloutmesh/desktop:dev (deploy/guest/build-desktop-image.sh)", imagePresent("rolloutmesh/desktop:dev"))
	name := fmt.Sprintf("dt%d", time.Now().UnixNano()%1e6)
	env := daemontest.Env(t)
	spec := PoolSpec{Name: name, Provider: "docker", Size: 1, ScreenWidth: 1280, ScreenHeight: 720, ClientPassword: "password",
		BootTimeout: Duration(90 * time.Second), Docker: &DockerSpec{}}
	svc, err := New(ctxT(t, time.Minute), Config{Pools: []PoolSpec{spec}}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, daemontest.Serve(t, env, svc))
	ctx := ctxT(t, 2*time.Minute)
	l, err := c.AcquireLease(ctx, &rolloutmeshv1.AcquireLeaseRequest{Pool: name, WaitTimeout: durationpb.New(90 * time.Second), Ttl: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	code, png := get(t, l.Endpoint+"/screenshot")
	if code != 200 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("%s/screenshot = %d, %d bytes; want a PNG", l.Endpoint, code, len(png))
	}
	if w, h := pngSize(png); w != 1280 || h != 720 {
		t.Errorf("screenshot is %dx%d, want 1280x720", w, h)
	}
}

// pngSize reads the IHDR of a PNG.
func pngSize(b []byte) (int, int) {
	if len(b) < 24 {
		return 0, 0
	}
	be := func(x []byte) int { return int(x[0])<<24 | int(x[1])<<16 | int(x[2])<<8 | int(x[3]) }
	return be(b[16:20]), be(b[20:24])
}
