package config

import (
	"fmt"
	"strings"
	"time"
)

// ProviderKubernetes runs each VM as a pod.
const ProviderKubernetes = "kubernetes"

// Kubernetes configures the kubernetes provider: each VM is a pod made from
// this template in Namespace, labelled with the vmmanager's instance id, the
// pool and the VM id, and reached at its pod IP (no Service per pod). The
// pool's cpus and memory_mb, when set, become the container's requests and
// limits unless Resources says otherwise.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; empty means the in-cluster config
	// (the pod's ServiceAccount), then $KUBECONFIG.
	Kubeconfig string `yaml:"kubeconfig"`
	// Namespace the pods live in; empty means the vmmanager's own namespace
	// in a cluster, else the kubeconfig's, else "default".
	Namespace string `yaml:"namespace"`
	// Image of the guest (default rolloutmesh/desktop:full).
	Image string `yaml:"image"`
	// ImagePullPolicy: Always, IfNotPresent or Never (default: Kubernetes').
	ImagePullPolicy string `yaml:"image_pull_policy"`
	// ImagePullSecrets name Secrets of the namespace.
	ImagePullSecrets []string `yaml:"image_pull_secrets"`
	// Command and Args override the image's entrypoint and arguments.
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	// Env holds extra environment variables.
	Env map[string]string `yaml:"env"`
	// GuestPort is the guest server's port in the pod (default 5000).
	GuestPort int `yaml:"guest_port"`
	// Ports are other guest ports leases report as <pod IP>:<port>, by name
	// (e.g. chrome: 9222, vlc: 8080).
	Ports map[string]int `yaml:"ports"`
	// HealthPath is probed for readiness (default /healthz, desktopd's;
	// /screenshot for OSWorld's server).
	HealthPath string `yaml:"health_path"`
	// Resources are the container's requests and limits, by resource name
	// ("cpu": "2", "memory": "4Gi").
	Resources Resources `yaml:"resources"`
	// NodeSelector, Tolerations, Affinity-free placement.
	NodeSelector map[string]string `yaml:"node_selector"`
	Tolerations  []Toleration      `yaml:"tolerations"`
	// RuntimeClass names a RuntimeClass (gVisor, Kata...).
	RuntimeClass string `yaml:"runtime_class"`
	// PriorityClass names a PriorityClass.
	PriorityClass string `yaml:"priority_class"`
	// ServiceAccount the pods run as (default: none mounted).
	ServiceAccount string `yaml:"service_account"`
	// KVM gives the pod /dev/kvm for QEMU-in-pod images (OSWorld's):
	// "none" (default), "device_plugin" (requests one KVMResource, e.g. from
	// the KubeVirt or generic device plugin) or "host_path" (mounts the
	// node's /dev/kvm; needs a privileged container).
	KVM string `yaml:"kvm"`
	// KVMResource is the extended resource of kvm: device_plugin (default
	// devices.kubevirt.io/kvm).
	KVMResource string `yaml:"kvm_resource"`
	// Privileged runs the guest container privileged (implied by kvm:
	// host_path).
	Privileged bool `yaml:"privileged"`
	// Labels and Annotations are added to every pod.
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
	// TerminationGracePeriod bounds a pod's shutdown (default 5s: a reset
	// does not wait for it, but the node keeps the resources until then).
	TerminationGracePeriod Duration `yaml:"termination_grace_period"`
	// ResetCommand, when set, resets a VM in place by running this command
	// in the guest (POST /execute) instead of replacing its pod; the pod is
	// replaced when the command fails.
	ResetCommand []string `yaml:"reset_command"`
	// Owner is the vmmanager's own workload in Namespace, as
	// "statefulset/NAME" or "deployment/NAME": pods get an owner reference
	// to it, so that deleting it deletes them.
	Owner string `yaml:"owner"`
	// CreateConcurrency bounds the pod creations (and the waits for them)
	// in flight at once for this pool (default 16).
	CreateConcurrency int `yaml:"create_concurrency"`
	// QPS and Burst bound the client's request rate (default 20 and 40).
	QPS   float64 `yaml:"qps"`
	Burst int     `yaml:"burst"`
	// GuestToken requires this bearer token on the guest API; pods get it
	// as $DESKTOPD_TOKEN, from GuestTokenSecret when set (so that it is not
	// in the pod spec) or else as a plain value.
	GuestToken     string `yaml:"guest_token"`
	GuestTokenFile string `yaml:"guest_token_file"`
	// GuestTokenSecret names a Secret of Namespace whose key "token" pods
	// read DESKTOPD_TOKEN from.
	GuestTokenSecret string `yaml:"guest_token_secret"`
}

// Resources are requests and limits by resource name.
type Resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

// Toleration mirrors the pod toleration fields.
type Toleration struct {
	Key               string `yaml:"key"`
	Operator          string `yaml:"operator"`
	Value             string `yaml:"value"`
	Effect            string `yaml:"effect"`
	TolerationSeconds *int64 `yaml:"toleration_seconds"`
}

// MaxKubernetesPoolName keeps "rm-<pool>-<vm>-<suffix>" pod names and the
// VM id label (<pool>-<8 hex>) within Kubernetes' 63-character limit.
const MaxKubernetesPoolName = 40

// validateKubernetes checks the kubernetes section of pool p (k is the
// pool's key) and fills its defaults. Quantities and names are checked by
// the provider, which has the Kubernetes parsers.
func validateKubernetes(k string, p *Pool) error {
	c := p.Kubernetes
	kk := k + ".kubernetes"
	if len(p.Name) > MaxKubernetesPoolName || strings.Contains(p.Name, "_") {
		return bad(k+".name", "a kubernetes pool name must be at most %d characters of [a-z0-9-] (it goes into pod names and labels), got %q", MaxKubernetesPoolName, p.Name)
	}
	if c.Image == "" {
		c.Image = "rolloutmesh/desktop:full"
	}
	switch c.ImagePullPolicy {
	case "", "Always", "IfNotPresent", "Never":
	default:
		return bad(kk+".image_pull_policy", "must be Always, IfNotPresent or Never, got %q", c.ImagePullPolicy)
	}
	if c.GuestPort == 0 {
		c.GuestPort = 5000
	}
	if err := checkPort(kk+".guest_port", c.GuestPort); err != nil {
		return err
	}
	for _, name := range sortedKeys(c.Ports) {
		pk := kk + ".ports." + name
		if !portNameRE.MatchString(name) || name == "server" {
			return bad(pk, "name must match %s and not be \"server\" (the guest server's own)", portNameRE)
		}
		if err := checkPort(pk, c.Ports[name]); err != nil {
			return err
		}
	}
	if c.HealthPath == "" {
		c.HealthPath = "/healthz"
	}
	if !strings.HasPrefix(c.HealthPath, "/") {
		return bad(kk+".health_path", "must start with /, got %q", c.HealthPath)
	}
	if c.KVM == "" {
		c.KVM = "none"
	}
	switch c.KVM {
	case "none", "host_path":
	case "device_plugin":
		if c.KVMResource == "" {
			c.KVMResource = "devices.kubevirt.io/kvm"
		}
	default:
		return bad(kk+".kvm", "must be none, device_plugin or host_path, got %q", c.KVM)
	}
	for i, t := range c.Tolerations {
		tk := fmt.Sprintf("%s.tolerations[%d]", kk, i)
		switch t.Operator {
		case "", "Equal", "Exists":
		default:
			return bad(tk+".operator", "must be Equal or Exists, got %q", t.Operator)
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			return bad(tk+".effect", "must be NoSchedule, PreferNoSchedule or NoExecute, got %q", t.Effect)
		}
	}
	if c.TerminationGracePeriod < 0 || c.TerminationGracePeriod > Duration(time.Hour) {
		return bad(kk+".termination_grace_period", "must be between 0s and 1h")
	}
	if c.TerminationGracePeriod == 0 {
		c.TerminationGracePeriod = Duration(5 * time.Second)
	}
	if c.Owner != "" {
		kind, name, ok := strings.Cut(c.Owner, "/")
		if !ok || (kind != "statefulset" && kind != "deployment") || name == "" {
			return bad(kk+".owner", "must be statefulset/NAME or deployment/NAME, got %q", c.Owner)
		}
	}
	if c.CreateConcurrency == 0 {
		c.CreateConcurrency = 16
	}
	if c.CreateConcurrency < 1 || c.CreateConcurrency > 256 {
		return bad(kk+".create_concurrency", "must be between 1 and 256, got %d", c.CreateConcurrency)
	}
	if c.QPS == 0 {
		c.QPS = 20
	}
	if c.Burst == 0 {
		c.Burst = 40
	}
	if c.QPS < 0 || c.Burst < 0 {
		return bad(kk+".qps", "qps and burst must be positive")
	}
	for i, a := range c.Args {
		if a == "--token" || strings.HasPrefix(a, "--token=") {
			return bad(fmt.Sprintf("%s.args[%d]", kk, i), "must not pass --token: set guest_token (and guest_token_secret), which reaches desktopd through its environment")
		}
	}
	return nil
}

// kubernetesDesktopImage reports whether a kubernetes pool runs one of
// rolloutmesh's own (Debian) desktop images, the default.
func kubernetesDesktopImage(p *Pool) bool {
	return p.Kubernetes == nil || p.Kubernetes.Image == "" || strings.HasPrefix(p.Kubernetes.Image, "rolloutmesh/desktop")
}
