package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// vmmanagerManifest is deploy/k8s/vmmanager.yaml's ServiceAccount, Role,
// RoleBinding and StatefulSet, moved into namespace ns.
type vmmanagerManifest struct {
	sa      *corev1.ServiceAccount
	role    *rbacv1.Role
	binding *rbacv1.RoleBinding
	sts     *appsv1.StatefulSet
}

func loadVMManagerManifest(t *testing.T, ns string) vmmanagerManifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "..", "deploy", "k8s", "vmmanager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	var m vmmanagerManifest
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("vmmanager.yaml document %d: %v", i, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			m.sa = o
		case *rbacv1.Role:
			m.role = o
		case *rbacv1.RoleBinding:
			m.binding = o
		case *appsv1.StatefulSet:
			m.sts = o
		}
	}
	if m.sa == nil || m.role == nil || m.binding == nil || m.sts == nil {
		t.Fatalf("vmmanager.yaml: want a ServiceAccount, Role, RoleBinding and StatefulSet, got %+v", m)
	}
	m.sa.Namespace, m.role.Namespace, m.binding.Namespace, m.sts.Namespace = ns, ns, ns, ns
	for i := range m.binding.Subjects {
		if m.binding.Subjects[i].Kind == rbacv1.ServiceAccountKind {
			m.binding.Subjects[i].Namespace = ns
		}
	}
	return m
}

// TestAPIRole runs the provider as the ServiceAccount of
// deploy/k8s/vmmanager.yaml, bound to exactly its Role, on an API server
// with RBAC on, with the owner the manifest names (statefulset/vmmanager,
// the manifest's StatefulSet created in the test's namespace). Everything
// the provider does must be allowed: the start (access review, owner
// lookup, the informer's list and watch), creates (with the 409 path's
// get), a reset, Sweep's list and deletes, Destroy. Then each verb of the
// Role is taken away in turn, and the provider must refuse to start,
// naming it. The pods' owner reference must name the StatefulSet, so that
// deleting it deletes them (the garbage collector does not run here: the
// reference is checked on the pods).
func TestAPIRole(t *testing.T) {
	needRealAPI(t)
	s := newSetup(t, func(c *config.Kubernetes) { c.Owner = "statefulset/vmmanager" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := loadVMManagerManifest(t, s.ns)
	if m.sts.Name != "vmmanager" || m.binding.RoleRef.Name != m.role.Name {
		t.Fatalf("vmmanager.yaml: StatefulSet %q, RoleBinding to %q, Role %q; want vmmanager and the binding to name the Role",
			m.sts.Name, m.binding.RoleRef.Name, m.role.Name)
	}
	sa, err := env.cli.CoreV1().ServiceAccounts(s.ns).Create(ctx, m.sa, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.cli.RbacV1().Roles(s.ns).Create(ctx, m.role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.cli.RbacV1().RoleBindings(s.ns).Create(ctx, m.binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sts, err := env.cli.AppsV1().StatefulSets(s.ns).Create(ctx, m.sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := env.cli.CoreV1().ServiceAccounts(s.ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s: %v", sa.Name, err)
	}
	cli := s.proxy.clientWithToken(tok.Status.Token)
	// The token is the ServiceAccount's, not an administrator's.
	if _, err := cli.CoreV1().Secrets(s.ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount lists secrets: err = %v, want Forbidden (is RBAC on?)", err)
	}

	p := s.providerWith(t, ctx, cli, "desk", "inst1", "desk")
	inst, err := p.Create(ctx, "desk-00000060")
	if err != nil {
		t.Fatalf("Create as the ServiceAccount: %v", err)
	}
	pod, err := env.cli.CoreV1().Pods(s.ns).Get(ctx, inst.Ref, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "vmmanager", UID: sts.UID}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0] != want {
		t.Errorf("owner references = %+v, want exactly %+v", pod.OwnerReferences, want)
	}
	if err := p.Check(ctx, inst); err != nil {
		t.Errorf("Check: %v", err)
	}
	// A create whose answer is lost: the provider gets the pod by name.
	gets := s.proxy.count("GET pod")
	s.proxy.add(fault{method: "POST", suffix: "/pods", code: 409, reason: metav1.StatusReasonAlreadyExists, forward: true, n: 1})
	second, err := p.Create(ctx, "desk-00000061")
	if err != nil {
		t.Fatalf("Create through a lost answer (409) as the ServiceAccount: %v", err)
	}
	if s.proxy.count("GET pod") == gets {
		t.Error("the 409 path sent no GET of the pod")
	}
	reset, err := p.Reset(ctx, "desk-00000060", inst)
	if err != nil {
		t.Fatalf("Reset as the ServiceAccount: %v", err)
	}
	// Sweep: a stray of this pool (from the informer's cache) and a pod of
	// a pool no longer configured (a list of its own), both deleted.
	s.kube.setBehave(func(*corev1.Pod) behaviour { return neverReady })
	for _, sp := range []struct{ name, pool, vm string }{{"stray", "desk", "desk-deadbeef"}, {"removed-pool", "old", "old-deadbeef"}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: sp.name, Labels: map[string]string{LabelInstance: "inst1", LabelPool: sp.pool, LabelVM: sp.vm}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "rolloutmesh/desktop:full"}}},
		}
		if _, err := env.cli.CoreV1().Pods(s.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the stray in the provider's cache", func() error {
		_, err := p.pods.Get("stray")
		return err
	})
	if err := p.Sweep(ctx, map[string]bool{"desk-00000060": true, "desk-00000061": true}); err != nil {
		t.Fatalf("Sweep as the ServiceAccount: %v", err)
	}
	for _, gone := range []string{"stray", "removed-pool"} {
		if _, err := env.cli.CoreV1().Pods(s.ns).Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s after Sweep: err = %v, want NotFound", gone, err)
		}
	}
	for id, in := range map[string]string{"desk-00000060": reset.Ref, "desk-00000061": second.Ref} {
		if got := podOf(t, s, id); got != in {
			t.Errorf("pod of %s after Sweep = %q, want %s", id, got, in)
		}
	}
	if err := p.Destroy(ctx, "desk-00000060", reset); err != nil {
		t.Errorf("Destroy as the ServiceAccount: %v", err)
	}
	if err := p.Destroy(ctx, "desk-00000061", second); err != nil {
		t.Errorf("Destroy as the ServiceAccount: %v", err)
	}
	if pods := s.pods(t, LabelInstance+"=inst1"); len(pods) != 0 {
		t.Errorf("%d pods left, want 0", len(pods))
	}

	// Each verb of the Role taken away, one at a time: the start fails and
	// says which.
	for i, rule := range m.role.Rules {
		for _, verb := range rule.Verbs {
			name := fmt.Sprintf("without %s %s", verb, strings.Join(rule.Resources, ","))
			t.Run(name, func(t *testing.T) {
				r := m.role.DeepCopy()
				r.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
				if len(r.Rules[i].Verbs) == 0 {
					r.Rules = slices.Delete(r.Rules, i, i+1)
				}
				setRole(t, ctx, r)
				defer setRole(t, ctx, m.role)
				// RBAC's cache follows the Role within moments.
				eventually(t, 10*time.Second, "the start refused", func() error {
					err := startAs(ctx, s, cli)
					if err == nil {
						return errors.New("the provider started")
					}
					if !strings.Contains(err.Error(), "may not "+verb+" "+rule.Resources[0]) {
						t.Fatalf("start without %s: %v; want it to name %q", name, err, verb+" "+rule.Resources[0])
					}
					return nil
				})
			})
		}
	}
	eventually(t, 10*time.Second, "a start with the Role restored", func() error { return startAs(ctx, s, cli) })
}

// setRole replaces the test namespace's Role with r.
func setRole(t *testing.T, ctx context.Context, r *rbacv1.Role) {
	t.Helper()
	cur, err := env.cli.RbacV1().Roles(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Rules = r.Rules
	if _, err := env.cli.RbacV1().Roles(r.Namespace).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startAs starts (and closes) a provider with cli.
func startAs(ctx context.Context, s *setup, cli clientset.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	p, err := New(ctx, Options{Config: s.cfg, Pool: "desk", InstanceID: "inst1", Pools: []string{"desk"}, Logger: s.log, Client: cli, Guest: *guestClient()})
	if err != nil {
		return err
	}
	p.Close()
	return nil
}
