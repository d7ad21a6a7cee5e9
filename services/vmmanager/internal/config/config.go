// Package config parses and validates vmmanager's YAML pool configuration.
// Every error names the offending key (e.g. "pools[1].docker.image"), and
// unknown keys are refused so that a typo never silently falls back to a
// default.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rolloutmesh/rolloutmesh/serverkit/secretflag"
)

// MaxPoolSize bounds size+warm_spares of one pool: a typo like 1000 should not
// try to boot a thousand desktops.
const MaxPoolSize = 256

// MaxFileSize bounds the config file.
const MaxFileSize = 1 << 20

// Provider kinds.
const (
	ProviderProcess    = "process"
	ProviderDocker     = "docker"
	ProviderStatic     = "static"
	ProviderVMware     = "vmware"
	ProviderVirtualBox = "virtualbox"
	ProviderQEMU       = "qemu"
)

// File is the whole config file.
type File struct {
	Pools []Pool `yaml:"pools"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses Go duration strings.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 30s", n.Line, s)
	}
	*d = Duration(v)
	return nil
}

// Pool is one pool of M VMs. The fields mirror the seeds' env settings
// (path_to_vm, snapshot_name, os_type, screen size, headless,
// client_password, region, CPU/memory).
type Pool struct {
	Name     string `yaml:"name"`
	Provider string `yaml:"provider"`
	// Size is M: at most this many VMs are leased at once.
	Size int `yaml:"size"`
	// WarmSpares extra VMs are kept booted so that a reset in progress never
	// delays the next lease.
	WarmSpares int `yaml:"warm_spares"`

	OSType         string `yaml:"os_type"`
	ScreenWidth    int    `yaml:"screen_width"`
	ScreenHeight   int    `yaml:"screen_height"`
	Headless       *bool  `yaml:"headless"`
	ClientPassword string `yaml:"client_password"`
	Region         string `yaml:"region"`
	CPUs           int    `yaml:"cpus"`
	MemoryMB       int    `yaml:"memory_mb"`
	SnapshotName   string `yaml:"snapshot_name"`
	PathToVM       string `yaml:"path_to_vm"`

	// HealthInterval is how often ready VMs are checked; 0 means 15s,
	// negative disables checks.
	HealthInterval Duration `yaml:"health_interval"`
	// BootTimeout bounds provisioning a VM (default 120s).
	BootTimeout Duration `yaml:"boot_timeout"`
	// ResetTimeout bounds one reset (default 120s).
	ResetTimeout Duration `yaml:"reset_timeout"`

	Process    *Process    `yaml:"process"`
	Docker     *Docker     `yaml:"docker"`
	Static     *Static     `yaml:"static"`
	VMware     *VMware     `yaml:"vmware"`
	VirtualBox *VirtualBox `yaml:"virtualbox"`
	QEMU       *QEMU       `yaml:"qemu"`
	Kubernetes *Kubernetes `yaml:"kubernetes"`
}

// Process configures the process provider: desktopd with its own Xvfb.
type Process struct {
	// Desktopd is the desktopd binary; empty means next to vmmanager or on PATH.
	Desktopd string `yaml:"desktopd"`
	// HomeTemplate is copied into a fresh home directory at every boot and reset.
	HomeTemplate string `yaml:"home_template"`
	// Host to bind guests to (default 127.0.0.1).
	Host string `yaml:"host"`
	// BasePort is the first guest port tried (default 5100).
	BasePort int `yaml:"base_port"`
	// BaseDisplay is the first X display number tried (default 100).
	BaseDisplay int `yaml:"base_display"`
	// NoDisplay runs desktopd with --display none (no X; for tests and tool envs).
	NoDisplay bool `yaml:"no_display"`
	// GuestToken requires this bearer token on the guest API.
	GuestToken string `yaml:"guest_token"`
	// GuestTokenFile holds GuestToken, so that the token need not be in
	// this config file.
	GuestTokenFile string `yaml:"guest_token_file"`
	// GuestHome, when set (an absolute path, e.g. /home/user), is where
	// each VM sees its own home directory: desktopd runs in a private mount
	// namespace with the VM's home bind-mounted there, so OSWorld tasks'
	// absolute paths work unchanged. Needs root.
	GuestHome string `yaml:"guest_home"`
}

// Docker configures the docker provider.
type Docker struct {
	// Image to run (default rolloutmesh/desktop:dev).
	Image string `yaml:"image"`
	// Flavor is "desktopd" (default: the guest listens on 5000 inside) or
	// "osworld" (happysixd/osworld-docker: qcow2 at /System.qcow2, ports
	// 5000/8006/9222/8080, /dev/kvm when present).
	Flavor string `yaml:"flavor"`
	// Qcow2 is the host path of the OSWorld disk image (flavor osworld).
	Qcow2 string `yaml:"qcow2"`
	// DiskSize, passed as DISK_SIZE to the osworld image (default 32G).
	DiskSize string `yaml:"disk_size"`
	// Args are extra arguments after the image's entrypoint (flavor desktopd).
	Args []string `yaml:"args"`
	// Env holds extra environment variables.
	Env map[string]string `yaml:"env"`
	// Host to publish ports on (default 127.0.0.1).
	Host string `yaml:"host"`
	// Network to attach containers to (default the engine's bridge).
	Network string `yaml:"network"`
	// GuestToken requires this bearer token on the guest API.
	GuestToken string `yaml:"guest_token"`
	// GuestTokenFile holds GuestToken, so that the token need not be in
	// this config file.
	GuestTokenFile string `yaml:"guest_token_file"`
	// KVM: "auto" (default: pass /dev/kvm when present), "on", "off".
	KVM string `yaml:"kvm"`
}

// Static configures a pool of guests started elsewhere.
type Static struct {
	// Endpoints are guest server URLs, one per VM (size+warm_spares of them).
	Endpoints []string `yaml:"endpoints"`
	// ResetCommand runs inside the guest through POST /execute to reset it.
	ResetCommand []string `yaml:"reset_command"`
	// ResetHook runs on this host with the endpoint in $VM_ENDPOINT.
	ResetHook []string `yaml:"reset_hook"`
	// HealthPath is the guest path probed (default /platform, which OSWorld's
	// own server answers).
	HealthPath string `yaml:"health_path"`
	// GuestToken is sent as a bearer token to the guest.
	GuestToken string `yaml:"guest_token"`
	// GuestTokenFile holds GuestToken, so that the token need not be in
	// this config file.
	GuestTokenFile string `yaml:"guest_token_file"`
}

// VMware configures the vmrun adapter.
type VMware struct {
	// Vmrun is the vmrun binary (default vmrun).
	Vmrun string `yaml:"vmrun"`
	// Type is vmrun's -T host type: ws (default) or fusion.
	Type string `yaml:"type"`
	// VMs are .vmx paths, one per VM (path_to_vm may stand for a single one).
	VMs []string `yaml:"vms"`
	// GuestPort is the guest server port (default 5000).
	GuestPort int `yaml:"guest_port"`
	// HealthPath is probed for readiness (default /screenshot, as OSWorld
	// waits for).
	HealthPath string `yaml:"health_path"`
}

// VirtualBox configures the VBoxManage adapter.
type VirtualBox struct {
	// VBoxManage is the binary (default VBoxManage).
	VBoxManage string `yaml:"vboxmanage"`
	// VMs are VM names or .vbox paths, one per VM.
	VMs []string `yaml:"vms"`
	// GuestPort is the guest server port (default 5000).
	GuestPort int `yaml:"guest_port"`
	// HealthPath is probed for readiness (default /screenshot, as OSWorld
	// waits for).
	HealthPath string `yaml:"health_path"`
}

// FieldError is a validation error naming the YAML key.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

func bad(key, format string, args ...any) error {
	return &FieldError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	// yaml.v3 says "field X not found in type config.Pool"; people wrote keys.
	unknownKeyRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// Parse decodes and validates a config file, filling defaults.
func Parse(data []byte) ([]Pool, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("config is %d bytes, at most %d allowed", len(data), MaxFileSize)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad("pools", "config is empty")
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n"), "\n", ";")
		msg = unknownKeyRE.ReplaceAllString(msg, `unknown key "$1"`)
		return nil, fmt.Errorf("decode yaml: %s", strings.TrimSpace(msg))
	}
	if err := Validate(f.Pools); err != nil {
		return nil, err
	}
	return f.Pools, nil
}

// Validate checks pools and fills their defaults in place.
func Validate(pools []Pool) error {
	if len(pools) == 0 {
		return bad("pools", "at least one pool is required")
	}
	seen := map[string]bool{}
	for i := range pools {
		if err := validatePool(fmt.Sprintf("pools[%d]", i), &pools[i]); err != nil {
			return err
		}
		if seen[pools[i].Name] {
			return bad(fmt.Sprintf("pools[%d].name", i), "duplicate pool name %q", pools[i].Name)
		}
		seen[pools[i].Name] = true
	}
	return nil
}

func validatePool(k string, p *Pool) error {
	if !nameRE.MatchString(p.Name) {
		return bad(k+".name", "must match %s, got %q", nameRE, p.Name)
	}
	if p.Size < 1 {
		return bad(k+".size", "must be >= 1, got %d", p.Size)
	}
	if p.WarmSpares < 0 {
		return bad(k+".warm_spares", "must be >= 0, got %d", p.WarmSpares)
	}
	// Compared without adding them: a sum that overflows int is negative.
	if p.Size > MaxPoolSize || p.WarmSpares > MaxPoolSize-p.Size {
		return bad(k+".size", "size + warm_spares must be <= %d, got %d + %d", MaxPoolSize, p.Size, p.WarmSpares)
	}
	if p.ScreenWidth == 0 {
		p.ScreenWidth = 1920
	}
	if p.ScreenHeight == 0 {
		p.ScreenHeight = 1080
	}
	if p.ScreenWidth < 64 || p.ScreenWidth > 7680 {
		return bad(k+".screen_width", "must be between 64 and 7680, got %d", p.ScreenWidth)
	}
	if p.ScreenHeight < 64 || p.ScreenHeight > 4320 {
		return bad(k+".screen_height", "must be between 64 and 4320, got %d", p.ScreenHeight)
	}
	if p.OSType == "" {
		p.OSType = defaultOSType(p)
	}
	if p.CPUs < 0 || p.CPUs > 256 {
		return bad(k+".cpus", "must be between 0 and 256, got %d", p.CPUs)
	}
	if p.MemoryMB < 0 || p.MemoryMB > 1<<20 {
		return bad(k+".memory_mb", "must be between 0 and 1048576, got %d", p.MemoryMB)
	}
	for key, d := range map[string]*Duration{"health_interval": &p.HealthInterval, "boot_timeout": &p.BootTimeout, "reset_timeout": &p.ResetTimeout} {
		if key != "health_interval" && *d < 0 {
			return bad(k+"."+key, "must be positive")
		}
		if *d > Duration(24*time.Hour) {
			return bad(k+"."+key, "must be at most 24h")
		}
	}
	if p.HealthInterval == 0 {
		p.HealthInterval = Duration(15 * time.Second)
	}
	if p.BootTimeout == 0 {
		p.BootTimeout = Duration(120 * time.Second)
		if p.Provider == ProviderQEMU {
			// A desktop boot under software emulation on a busy host took
			// up to 2.5 min here; the snapshot makes it a one-off.
			p.BootTimeout = Duration(5 * time.Minute)
		}
	}
	if p.ResetTimeout == 0 {
		p.ResetTimeout = Duration(120 * time.Second)
	}
	n := p.Size + p.WarmSpares
	// Exactly the section of the chosen provider may be present.
	sections := map[string]bool{
		ProviderProcess: p.Process != nil, ProviderDocker: p.Docker != nil, ProviderStatic: p.Static != nil,
		ProviderVMware: p.VMware != nil, ProviderVirtualBox: p.VirtualBox != nil, ProviderQEMU: p.QEMU != nil,
		ProviderKubernetes: p.Kubernetes != nil,
	}
	if _, ok := sections[p.Provider]; !ok {
		return bad(k+".provider", "must be one of process, docker, static, vmware, virtualbox, qemu, kubernetes; got %q", p.Provider)
	}
	for name, set := range sections {
		if set && name != p.Provider {
			return bad(k+"."+name, "section given but provider is %q", p.Provider)
		}
	}
	if err := resolveGuestTokenFile(k, p); err != nil {
		return err
	}
	switch p.Provider {
	case ProviderProcess:
		if p.Process == nil {
			p.Process = &Process{}
		}
		return validateProcess(k+".process", p.Process)
	case ProviderDocker:
		if p.Docker == nil {
			p.Docker = &Docker{}
		}
		return validateDocker(k+".docker", p.Docker)
	case ProviderStatic:
		if p.Static == nil {
			return bad(k+".static", "required for provider static")
		}
		return validateStatic(k+".static", p.Static, n)
	case ProviderVMware:
		if p.VMware == nil {
			p.VMware = &VMware{}
		}
		v := p.VMware
		if len(v.VMs) == 0 && p.PathToVM != "" {
			v.VMs = []string{p.PathToVM}
		}
		if v.Vmrun == "" {
			v.Vmrun = "vmrun"
		}
		if v.Type == "" {
			v.Type = "ws"
		}
		if v.Type != "ws" && v.Type != "fusion" {
			return bad(k+".vmware.type", "must be ws or fusion, got %q", v.Type)
		}
		if len(v.VMs) != n {
			return bad(k+".vmware.vms", "needs one .vmx path per VM (size + warm_spares = %d), got %d", n, len(v.VMs))
		}
		if v.GuestPort == 0 {
			v.GuestPort = 5000
		}
		if v.HealthPath == "" {
			v.HealthPath = "/screenshot"
		}
		if p.SnapshotName == "" {
			p.SnapshotName = "init_state"
		}
		if !strings.HasPrefix(v.HealthPath, "/") {
			return bad(k+".vmware.health_path", "must start with /, got %q", v.HealthPath)
		}
		return checkPort(k+".vmware.guest_port", v.GuestPort)
	case ProviderVirtualBox:
		if p.VirtualBox == nil {
			p.VirtualBox = &VirtualBox{}
		}
		v := p.VirtualBox
		if len(v.VMs) == 0 && p.PathToVM != "" {
			v.VMs = []string{p.PathToVM}
		}
		if v.VBoxManage == "" {
			v.VBoxManage = "VBoxManage"
		}
		if len(v.VMs) != n {
			return bad(k+".virtualbox.vms", "needs one VM name per VM (size + warm_spares = %d), got %d", n, len(v.VMs))
		}
		if v.GuestPort == 0 {
			v.GuestPort = 5000
		}
		if v.HealthPath == "" {
			v.HealthPath = "/screenshot"
		}
		if p.SnapshotName == "" {
			p.SnapshotName = "init_state"
		}
		if !strings.HasPrefix(v.HealthPath, "/") {
			return bad(k+".virtualbox.health_path", "must start with /, got %q", v.HealthPath)
		}
		return checkPort(k+".virtualbox.guest_port", v.GuestPort)
	case ProviderQEMU:
		if p.QEMU == nil {
			p.QEMU = &QEMU{}
		}
		return validateQEMU(k, p)
	case ProviderKubernetes:
		if p.Kubernetes == nil {
			p.Kubernetes = &Kubernetes{}
		}
		return validateKubernetes(k, p)
	}
	return nil
}

func checkPort(k string, port int) error {
	if port < 1 || port > 65535 {
		return bad(k, "must be a port between 1 and 65535, got %d", port)
	}
	return nil
}

// resolveGuestTokenFile reads guest_token_file into guest_token. Validating
// the same pools again is harmless: a token equal to the file's is not a
// conflict.
func resolveGuestTokenFile(k string, p *Pool) error {
	var token *string
	var file, section string
	switch {
	case p.Process != nil:
		token, file, section = &p.Process.GuestToken, p.Process.GuestTokenFile, "process"
	case p.Docker != nil:
		token, file, section = &p.Docker.GuestToken, p.Docker.GuestTokenFile, "docker"
	case p.Static != nil:
		token, file, section = &p.Static.GuestToken, p.Static.GuestTokenFile, "static"
	case p.QEMU != nil:
		token, file, section = &p.QEMU.GuestToken, p.QEMU.GuestTokenFile, "qemu"
	case p.Kubernetes != nil:
		token, file, section = &p.Kubernetes.GuestToken, p.Kubernetes.GuestTokenFile, "kubernetes"
	}
	if file == "" {
		return nil
	}
	key := k + "." + section + ".guest_token_file"
	v, err := secretflag.Read(file)
	if err != nil {
		return bad(key, "%v", err)
	}
	if *token != "" && *token != v {
		return bad(key, "set guest_token or guest_token_file, not both")
	}
	*token = v
	return nil
}

func validateProcess(k string, p *Process) error {
	if p.Host == "" {
		p.Host = "127.0.0.1"
	}
	if p.BasePort == 0 {
		p.BasePort = 5100
	}
	if p.BaseDisplay == 0 {
		p.BaseDisplay = 100
	}
	if err := checkPort(k+".base_port", p.BasePort); err != nil {
		return err
	}
	if p.BaseDisplay < 1 || p.BaseDisplay > 60000 {
		return bad(k+".base_display", "must be between 1 and 60000, got %d", p.BaseDisplay)
	}
	if p.GuestHome != "" && (!filepath.IsAbs(p.GuestHome) || filepath.Clean(p.GuestHome) == "/") {
		return bad(k+".guest_home", "must be an absolute path other than /, got %q", p.GuestHome)
	}
	return nil
}

func validateDocker(k string, d *Docker) error {
	if d.Flavor == "" {
		d.Flavor = "desktopd"
	}
	if d.Image == "" {
		switch d.Flavor {
		case "osworld":
			d.Image = "happysixd/osworld-docker"
		default:
			d.Image = "rolloutmesh/desktop:dev"
		}
	}
	if d.Host == "" {
		d.Host = "127.0.0.1"
	}
	if d.KVM == "" {
		d.KVM = "auto"
	}
	switch d.KVM {
	case "auto", "on", "off":
	default:
		return bad(k+".kvm", "must be auto, on or off, got %q", d.KVM)
	}
	// A token in args would be in the container's command line, which
	// every user of the host sees in ps; guest_token goes in its
	// environment instead.
	for i, a := range d.Args {
		if a == "--token" || a == "-token" || strings.HasPrefix(a, "--token=") || strings.HasPrefix(a, "-token=") {
			return bad(fmt.Sprintf("%s.args[%d]", k, i), "must not pass --token: set guest_token, which reaches desktopd through its environment")
		}
	}
	switch d.Flavor {
	case "desktopd":
		if d.Qcow2 != "" {
			return bad(k+".qcow2", "only used with flavor osworld")
		}
	case "osworld":
		if d.Qcow2 == "" {
			return bad(k+".qcow2", "required with flavor osworld (host path of Ubuntu.qcow2)")
		}
		if d.DiskSize == "" {
			d.DiskSize = "32G"
		}
	default:
		return bad(k+".flavor", "must be desktopd or osworld, got %q", d.Flavor)
	}
	return nil
}

func validateStatic(k string, s *Static, n int) error {
	if len(s.Endpoints) != n {
		return bad(k+".endpoints", "needs one endpoint per VM (size + warm_spares = %d), got %d", n, len(s.Endpoints))
	}
	for i, e := range s.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			return bad(fmt.Sprintf("%s.endpoints[%d]", k, i), "must be an http(s) URL, got %q", e)
		}
	}
	if len(s.ResetCommand) > 0 && len(s.ResetHook) > 0 {
		return bad(k+".reset_hook", "give reset_command or reset_hook, not both")
	}
	if s.HealthPath == "" {
		s.HealthPath = "/platform"
	}
	if !strings.HasPrefix(s.HealthPath, "/") {
		return bad(k+".health_path", "must start with /, got %q", s.HealthPath)
	}
	return nil
}

// defaultOSType is the guest OS a pool reports when its config names none:
// rolloutmesh's own guests (process VMs, the desktopd images, the qcow2
// built with its kernel next to it) are Debian;
// OSWorld's images and the VMs of the hypervisor providers are Ubuntu.
func defaultOSType(p *Pool) string {
	switch {
	case p.Provider == ProviderProcess:
		return "Debian"
	case p.Provider == ProviderDocker && (p.Docker == nil || p.Docker.Flavor == "" || p.Docker.Flavor == "desktopd"):
		return "Debian"
	case p.Provider == ProviderKubernetes && kubernetesDesktopImage(p):
		return "Debian"
	case p.Provider == ProviderQEMU && qemuDirectBoot(p):
		// deploy/guest/build-qcow2.sh's image, booted with its own kernel.
		return "Debian"
	}
	return "Ubuntu"
}
