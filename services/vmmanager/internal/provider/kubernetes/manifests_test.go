package kubernetes

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// TestManifests decodes every object of deploy/k8s strictly into the
// k8s.io/api types (an unknown or misspelt field fails), parses the
// vmmanager ConfigMap's pool config with vmmanager's own parser, and checks
// that the vmmanager's Role grants what the provider uses on pods and
// nothing cluster-wide.
func TestManifests(t *testing.T) {
	objs := decodeManifests(t)
	var err error
	var pools []config.Pool
	var role *rbacv1.Role
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.ConfigMap:
			if o.Name == "vmmanager-config" {
				if pools, err = config.Parse([]byte(o.Data["vmmanager.yaml"])); err != nil {
					t.Errorf("vmmanager-config: %v", err)
				}
			}
		case *rbacv1.Role:
			if o.Name == "vmmanager" {
				role = o
			}
		}
	}
	if len(pools) == 0 || pools[0].Provider != config.ProviderKubernetes {
		t.Fatalf("vmmanager-config pools = %+v, want a kubernetes pool", pools)
	}
	if role == nil {
		t.Fatal("no Role vmmanager")
	}
	need := map[string]bool{"get": true, "list": true, "watch": true, "create": true, "delete": true}
	for _, r := range role.Rules {
		if len(r.APIGroups) == 1 && r.APIGroups[0] == "" && strings.Join(r.Resources, ",") == "pods" {
			for _, v := range r.Verbs {
				delete(need, v)
			}
		}
		for _, v := range r.Verbs {
			if v == "*" {
				t.Errorf("Role rule %+v grants every verb", r)
			}
		}
	}
	if len(need) > 0 {
		t.Errorf("Role vmmanager lacks pod verbs %v", need)
	}
}

// decodeManifests decodes every object of deploy/k8s strictly into the
// k8s.io/api types; an unknown or misspelt field fails the test.
func decodeManifests(t *testing.T) []runtime.Object {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "..", "..", "deploy", "k8s")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" || base == "prometheus-adapter-values.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s document %d: %v", base, i, err)
				continue
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// sandboxCaps are the capabilities the runner's local Python sandbox
// (services/runner/internal/env/py) needs when the runner is root, found by
// running its tests in a container given all of them but one: SYS_ADMIN for
// `unshare --net`, SETUID and SETGID to become nobody, CHOWN to give the
// program its directory, DAC_OVERRIDE to reach into and remove that
// directory (nobody's, 0700) afterwards, KILL to end the program (nobody's)
// at its wall-clock limit.
var sandboxCaps = []string{"CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID", "SYS_ADMIN"}

// TestRunnerSandboxSecurityContext checks that the runner pod of deploy/k8s
// can run local py tasks, with no more privilege than that takes: root
// (only root holds capabilities in a pod), all capabilities dropped but
// sandboxCaps, not privileged, a writable /tmp for the programs, the
// network namespace not switched off; and that a real API server accepts
// the Deployment (it refuses some combinations, such as
// allowPrivilegeEscalation false with privileged).
func TestRunnerSandboxSecurityContext(t *testing.T) {
	var dep *appsv1.Deployment
	for _, o := range decodeManifests(t) {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == "runner" {
			dep = d
		}
	}
	if dep == nil {
		t.Fatal("no Deployment runner in deploy/k8s")
	}
	pod := dep.Spec.Template.Spec
	var c *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "runner" {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("Deployment runner has no container runner")
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	// The container's settings win over the pod's, as the kubelet applies them.
	uid, nonRoot := psc.RunAsUser, psc.RunAsNonRoot
	if sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if uid == nil || *uid != 0 {
		t.Errorf("runner runs as uid %v, want 0: only root holds the capabilities the sandbox needs, and root programs run as nobody", ptrString(uid))
	}
	if nonRoot != nil && *nonRoot {
		t.Errorf("runAsNonRoot is true: the kubelet refuses to start the runner as root")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("runner is privileged; it needs only %v", sandboxCaps)
	}
	if psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined ||
		sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		t.Errorf("runner's seccomp profile is Unconfined; RuntimeDefault allows unshare to a holder of SYS_ADMIN")
	}
	var add, drop []string
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Add {
			add = append(add, strings.TrimPrefix(string(c), "CAP_"))
		}
		for _, c := range sc.Capabilities.Drop {
			drop = append(drop, string(c))
		}
	}
	slices.Sort(add)
	if !slices.Equal(add, sandboxCaps) {
		t.Errorf("runner adds capabilities %v, want exactly %v (fewer breaks py tasks, more is more than they need)", add, sandboxCaps)
	}
	if !slices.Contains(drop, "ALL") {
		t.Errorf("runner drops capabilities %v, want ALL (then adds back what the sandbox needs)", drop)
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		tmp := false
		for _, m := range c.VolumeMounts {
			tmp = tmp || m.MountPath == "/tmp" && !m.ReadOnly
		}
		if !tmp {
			t.Errorf("read-only root filesystem without a writable volume at /tmp: the sandbox writes each program there")
		}
	}
	for _, e := range c.Env {
		if e.Name == "ROLLOUTMESH_PY_ALLOW_NETWORK" && e.Value != "" && e.Value != "false" {
			t.Errorf("%s=%s: py programs would run with the pod's network", e.Name, e.Value)
		}
	}

	needRealAPI(t)
	ns := namespace(t)
	d := dep.DeepCopy()
	d.Namespace = ns
	ctx := context.Background()
	if _, err := env.cli.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("the API server refuses the runner Deployment: %v", err)
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
