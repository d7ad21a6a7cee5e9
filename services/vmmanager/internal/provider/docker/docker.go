// Package docker is the container VM provider: each VM is a container of the
// pool's image, labelled with this vmmanager's instance id, the pool and the
// VM id. A reset replaces the container with a fresh one from the image.
// After a restart labelled containers of known VMs are re-adopted and the
// rest removed.
//
// Two flavors: "desktopd" (rolloutmesh/desktop:dev, the guest server on port
// 5000 inside) and "osworld" (OSWorld's happysixd/osworld-docker: a QEMU VM
// booting the qcow2 mounted at /System.qcow2, guest ports 5000/8006/9222/8080).
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
)

var _ pool.Provider = (*Provider)(nil)

// Labels put on every container.
const (
	LabelInstance = "rolloutmesh.vmmanager"
	LabelPool     = "rolloutmesh.pool"
	LabelVM       = "rolloutmesh.vm"
)

// createTimeout bounds one container create, which runs to its end even
// when its caller's context ends (Create).
const createTimeout = 30 * time.Second

// Guest ports inside the container, by the name used in Lease.ports.
var osworldPorts = []struct {
	name string
	port string
}{
	{"server", "5000/tcp"}, {"vnc", "8006/tcp"}, {"chrome", "9222/tcp"}, {"vlc", "8080/tcp"},
}

// Options configure a Provider.
type Options struct {
	Config       config.Docker
	Pool         string
	InstanceID   string
	ScreenWidth  int
	ScreenHeight int
	CPUs         int
	MemoryMB     int
	Logger       *zap.Logger
	// Client is the Docker client; nil makes one from the environment.
	Client *client.Client
}

// Provider runs VMs as containers.
type Provider struct {
	o     Options
	cli   *client.Client
	guest guest.Client
	kvm   bool
}

// NewClient connects to the Docker engine from the environment
// (DOCKER_HOST...). Version negotiation lets a v28 client speak to older
// engines such as 20.10 (API 1.41).
func NewClient() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
}

// New returns a provider.
func New(o Options) (*Provider, error) {
	cli := o.Client
	if cli == nil {
		var err error
		if cli, err = NewClient(); err != nil {
			return nil, fmt.Errorf("docker client: %w", err)
		}
	}
	kvm := false
	switch o.Config.KVM {
	case "on":
		kvm = true
	case "auto":
		_, err := os.Stat("/dev/kvm")
		kvm = err == nil
	}
	return &Provider{o: o, cli: cli, kvm: kvm}, nil
}

func (p *Provider) name(id string) string { return "rolloutmesh-" + id }

// Spec is everything needed to create one container.
type Spec struct {
	Config *container.Config
	Host   *container.HostConfig
	Name   string
	// HealthPath is probed for readiness: /healthz on desktopd, /screenshot
	// on OSWorld's server (what OSWorld itself waits for).
	HealthPath string
}

// ContainerSpec builds the container of VM id; it is a pure function so the
// OSWorld settings can be checked without the (unavailable) image.
func ContainerSpec(o Options, id string, kvm bool) Spec {
	d := o.Config
	labels := map[string]string{LabelInstance: o.InstanceID, LabelPool: o.Pool, LabelVM: id}
	cfg := &container.Config{Image: d.Image, Labels: labels, ExposedPorts: nat.PortSet{}}
	host := &container.HostConfig{PortBindings: nat.PortMap{}}
	if d.Network != "" {
		host.NetworkMode = container.NetworkMode(d.Network)
	}
	bind := func(port string) {
		cfg.ExposedPorts[nat.Port(port)] = struct{}{}
		// HostPort "" lets the engine pick a free port: no allocation race
		// between vmmanagers (OSWorld needed a file lock for this).
		host.PortBindings[nat.Port(port)] = []nat.PortBinding{{HostIP: d.Host, HostPort: ""}}
	}
	var env []string
	spec := Spec{Config: cfg, Host: host, Name: "rolloutmesh-" + id}
	switch d.Flavor {
	case "osworld":
		for _, pp := range osworldPorts {
			bind(pp.port)
		}
		ram := "4G"
		if o.MemoryMB > 0 {
			ram = fmt.Sprintf("%dM", o.MemoryMB)
		}
		cpus := 4
		if o.CPUs > 0 {
			cpus = o.CPUs
		}
		env = append(env, "DISK_SIZE="+d.DiskSize, "RAM_SIZE="+ram, "CPU_CORES="+strconv.Itoa(cpus))
		if kvm {
			host.Devices = []container.DeviceMapping{{PathOnHost: "/dev/kvm", PathInContainer: "/dev/kvm", CgroupPermissions: "rwm"}}
		} else {
			env = append(env, "KVM=N")
		}
		host.CapAdd = []string{"NET_ADMIN"}
		host.Binds = []string{d.Qcow2 + ":/System.qcow2:ro"}
		spec.HealthPath = "/screenshot"
	default:
		// desktopd, and the applications of rolloutmesh/desktop:full that
		// OSWorld's steps and getters reach from outside: Chrome's DevTools
		// and VLC's HTTP interface (nothing answers there on the small
		// image; the tasks that need them say so).
		for _, pp := range osworldPorts {
			if pp.name != "vnc" {
				bind(pp.port)
			}
		}
		cfg.Cmd = d.Args
		// What rolloutmesh/desktop's init passes to desktopd --screen.
		env = append(env, "SCREEN_WIDTH="+strconv.Itoa(o.ScreenWidth), "SCREEN_HEIGHT="+strconv.Itoa(o.ScreenHeight))
		if d.GuestToken != "" {
			env = append(env, "DESKTOPD_TOKEN="+d.GuestToken)
		}
		if o.MemoryMB > 0 {
			host.Memory = int64(o.MemoryMB) << 20
		}
		if o.CPUs > 0 {
			host.NanoCPUs = int64(o.CPUs) * 1e9
		}
		spec.HealthPath = "/healthz"
	}
	for k, v := range d.Env {
		env = append(env, k+"="+v)
	}
	cfg.Env = env
	return spec
}

// Create starts a fresh container and waits for its guest server.
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	spec := ContainerSpec(p.o, id, p.kvm)
	// A container of the same name can only be a leftover of this VM.
	p.cli.ContainerRemove(ctx, spec.Name, container.RemoveOptions{Force: true})
	// The engine goes on creating a container after its caller hung up, so
	// a create cut off by the context (a pool closing mid-reset) would
	// leave one that no record names: the create itself runs to its end
	// under its own bound, and what it made is removed if ctx ended.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	resp, err := p.cli.ContainerCreate(cctx, spec.Config, spec.Host, nil, nil, spec.Name)
	cancel()
	if err != nil {
		// A create that timed out may still have made it: by name.
		p.remove(spec.Name)
		return pool.Instance{}, fmt.Errorf("create container from %s: %w", p.o.Config.Image, err)
	}
	inst := pool.Instance{Ref: resp.ID, Data: map[string]string{"health_path": spec.HealthPath}}
	if err := ctx.Err(); err != nil {
		p.remove(resp.ID)
		return inst, fmt.Errorf("create container: %w", err)
	}
	if err := p.cli.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		p.remove(resp.ID)
		return inst, fmt.Errorf("start container: %w", err)
	}
	if err := p.locate(ctx, &inst); err != nil {
		p.remove(resp.ID)
		return inst, err
	}
	last := time.Time{}
	alive := func() error {
		// Inspecting every probe would load the engine; once a second is
		// enough to notice a container that exited.
		if time.Since(last) < time.Second {
			return nil
		}
		last = time.Now()
		return p.running(ctx, resp.ID)
	}
	if err := p.guest.WaitReady(ctx, inst.Endpoint, spec.HealthPath, p.o.Config.GuestToken, alive); err != nil {
		p.remove(resp.ID)
		return inst, err
	}
	return inst, nil
}

// HostPrefix marks, in Instance.Ports, the host-side addresses of a VM on a
// shared network: "host:server" is the guest server's URL and "host:chrome",
// "host:vlc", "host:vnc" the other services' host:port, all published on
// Config.Host. There the endpoint the runners use is the container's name
// on the network, which resolves only on that network (compose), while a
// person running `rollout leases` on the host needs an address the host
// reaches; on the engine's bridge the endpoint is already host-side and no
// such entries are recorded.
const HostPrefix = "host:"

// locate fills the endpoint and ports from the engine's port mappings.
func (p *Provider) locate(ctx context.Context, inst *pool.Instance) error {
	info, err := p.cli.ContainerInspect(ctx, inst.Ref)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	var published nat.PortMap
	if info.NetworkSettings != nil {
		published = info.NetworkSettings.Ports
	}
	endpoint, ports, err := addresses(strings.TrimPrefix(info.Name, "/"), p.o.Config.Network, published)
	if err != nil {
		return err
	}
	inst.Endpoint, inst.Ports = endpoint, ports
	return nil
}

// addresses returns the guest server's URL and the other services'
// addresses of a container named name. On a network the services are
// reached by name, and the host-side published ports are added under
// HostPrefix; otherwise the published ports are the addresses.
func addresses(name, network string, published nat.PortMap) (string, map[string]string, error) {
	hostAddr := func(port string) string {
		for _, b := range published[nat.Port(port)] {
			host := b.HostIP
			if host == "" || host == "0.0.0.0" {
				host = "127.0.0.1"
			} else if host == "::" {
				host = "::1"
			}
			return net.JoinHostPort(host, b.HostPort)
		}
		return ""
	}
	addr := hostAddr
	if network != "" {
		addr = func(port string) string {
			return net.JoinHostPort(name, strings.TrimSuffix(port, "/tcp"))
		}
	}
	server := addr("5000/tcp")
	if network == "" && server == "" {
		return "", nil, errors.New("container has no published port 5000")
	}
	ports := map[string]string{}
	for _, pp := range osworldPorts[1:] {
		// On a network every service has a name address, published or not:
		// keep only the ports the container exposes (published ones).
		if _, ok := published[nat.Port(pp.port)]; !ok {
			continue
		}
		if a := addr(pp.port); a != "" {
			ports[pp.name] = a
		}
	}
	if network != "" {
		if h := hostAddr("5000/tcp"); h != "" {
			ports[HostPrefix+"server"] = "http://" + h
		}
		for _, pp := range osworldPorts[1:] {
			if h := hostAddr(pp.port); h != "" {
				ports[HostPrefix+pp.name] = h
			}
		}
	}
	if len(ports) == 0 {
		ports = nil
	}
	return "http://" + server, ports, nil
}

func (p *Provider) running(ctx context.Context, ref string) error {
	info, err := p.cli.ContainerInspect(ctx, ref)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	if info.State == nil || !info.State.Running {
		st := "unknown"
		if info.State != nil {
			st = fmt.Sprintf("%s (exit %d)", info.State.Status, info.State.ExitCode)
		}
		return fmt.Errorf("container is %s; last output: %s", st, p.logTail(ctx, ref))
	}
	return nil
}

// logTail returns the end of a container's output for error messages.
func (p *Provider) logTail(ctx context.Context, ref string) string {
	rc, err := p.cli.ContainerLogs(ctx, ref, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "5"})
	if err != nil {
		return "(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 4096))
	return strings.TrimSpace(out.String())
}

// remove force-removes a container; it must finish even when the caller's
// context is already done.
func (p *Provider) remove(ref string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := p.cli.ContainerRemove(ctx, ref, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// Reset replaces the container with a fresh one from the image.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	if err := p.remove(inst.Ref); err != nil {
		return inst, err
	}
	return p.Create(ctx, id)
}

// Destroy removes the container, and any other container of the VM's
// name: one a reset made that the pool never recorded.
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	var errs []error
	if inst.Ref != "" {
		errs = append(errs, p.remove(inst.Ref))
	}
	errs = append(errs, p.remove(p.name(id)))
	return errors.Join(errs...)
}

// Check wants the container running and the guest answering.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	if err := p.running(ctx, inst.Ref); err != nil {
		return err
	}
	return p.guest.Probe(ctx, inst.Endpoint, inst.Data["health_path"], p.o.Config.GuestToken)
}

// Adopt takes over a container of a previous run: it must carry this VM's
// labels, run, and answer.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	info, err := p.cli.ContainerInspect(ctx, inst.Ref)
	if err != nil {
		return fmt.Errorf("inspect container: %w", err)
	}
	if info.Config == nil || info.Config.Labels[LabelVM] != id || info.Config.Labels[LabelInstance] != p.o.InstanceID {
		return errors.New("container does not carry this vm's labels")
	}
	if err := p.running(ctx, inst.Ref); err != nil {
		return err
	}
	return p.guest.Probe(ctx, inst.Endpoint, inst.Data["health_path"], p.o.Config.GuestToken)
}

// Sweep removes this vmmanager's containers of this pool that belong to no
// known VM.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error {
	list, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelInstance+"="+p.o.InstanceID),
		filters.Arg("label", LabelPool+"="+p.o.Pool),
	)})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range list {
		if known[c.Labels[LabelVM]] {
			continue
		}
		p.o.Logger.Warn("stray container removed", zap.String("vm_id", c.Labels[LabelVM]), zap.String("container", c.ID))
		if err := p.remove(c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
