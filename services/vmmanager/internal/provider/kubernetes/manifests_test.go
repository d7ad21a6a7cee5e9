package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
