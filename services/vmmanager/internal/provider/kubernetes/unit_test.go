package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// TestPodTemplate renders the pod of a VM from the config, without an API
// server.
func TestPodTemplate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*config.Kubernetes)
		cpus  int
		mem   int
		check func(t *testing.T, pod *corev1.Pod)
	}{
		{"defaults", nil, 0, 0, func(t *testing.T, pod *corev1.Pod) {
			c := pod.Spec.Containers[0]
			if c.Image != "rolloutmesh/desktop:full" || c.Ports[0].ContainerPort != 5000 {
				t.Errorf("image, port = %s, %d; want rolloutmesh/desktop:full, 5000", c.Image, c.Ports[0].ContainerPort)
			}
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("restart policy = %s, want Never (a crashed guest is replaced, not restarted dirty)", pod.Spec.RestartPolicy)
			}
			if *pod.Spec.TerminationGracePeriodSeconds != 5 {
				t.Errorf("grace = %d, want 5", *pod.Spec.TerminationGracePeriodSeconds)
			}
			if len(c.Resources.Requests) != 0 || c.SecurityContext != nil || len(pod.Spec.Volumes) != 0 {
				t.Errorf("unexpected resources %v, security %v, volumes %v", c.Resources, c.SecurityContext, pod.Spec.Volumes)
			}
		}},
		{"pool cpus and memory", nil, 2, 4096, func(t *testing.T, pod *corev1.Pod) {
			r := pod.Spec.Containers[0].Resources
			for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
				if l.Cpu().Cmp(resource.MustParse("2")) != 0 || l.Memory().Cmp(resource.MustParse("4Gi")) != 0 {
					t.Errorf("resources = %v, want cpu 2 memory 4Gi", l)
				}
			}
		}},
		{"explicit resources win", func(c *config.Kubernetes) {
			c.Resources.Requests = map[string]string{"cpu": "500m"}
		}, 2, 0, func(t *testing.T, pod *corev1.Pod) {
			r := pod.Spec.Containers[0].Resources
			if r.Requests.Cpu().String() != "500m" || r.Limits.Cpu().String() != "2" {
				t.Errorf("requests %v limits %v, want cpu 500m / 2", r.Requests, r.Limits)
			}
		}},
		{"kvm device plugin", func(c *config.Kubernetes) { c.KVM = "device_plugin" }, 0, 0, func(t *testing.T, pod *corev1.Pod) {
			q := pod.Spec.Containers[0].Resources.Limits["devices.kubevirt.io/kvm"]
			if q.Value() != 1 {
				t.Errorf("kvm limit = %v, want 1", q.String())
			}
		}},
		{"kvm host path", func(c *config.Kubernetes) { c.KVM = "host_path" }, 0, 0, func(t *testing.T, pod *corev1.Pod) {
			c := pod.Spec.Containers[0]
			if c.SecurityContext == nil || !*c.SecurityContext.Privileged {
				t.Error("host_path kvm without a privileged container")
			}
			if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].HostPath.Path != "/dev/kvm" || c.VolumeMounts[0].MountPath != "/dev/kvm" {
				t.Errorf("volumes %v mounts %v, want /dev/kvm", pod.Spec.Volumes, c.VolumeMounts)
			}
		}},
		{"placement", func(c *config.Kubernetes) {
			c.RuntimeClass = "kata"
			c.NodeSelector = map[string]string{"pool": "desktops"}
			c.Tolerations = []config.Toleration{{Key: "desktops", Operator: "Exists", Effect: "NoSchedule"}}
			c.PriorityClass = "low"
		}, 0, 0, func(t *testing.T, pod *corev1.Pod) {
			s := pod.Spec
			if *s.RuntimeClassName != "kata" || s.NodeSelector["pool"] != "desktops" || s.PriorityClassName != "low" ||
				len(s.Tolerations) != 1 || s.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
				t.Errorf("placement = %s %v %s %v", *s.RuntimeClassName, s.NodeSelector, s.PriorityClassName, s.Tolerations)
			}
		}},
		{"token from a secret", func(c *config.Kubernetes) { c.GuestToken, c.GuestTokenSecret = "s3cret", "guest-token" }, 0, 0, func(t *testing.T, pod *corev1.Pod) {
			for _, e := range pod.Spec.Containers[0].Env {
				if e.Name == "DESKTOPD_TOKEN" {
					if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "guest-token" {
						t.Errorf("DESKTOPD_TOKEN = %+v, want from Secret guest-token", e)
					}
					return
				}
			}
			t.Error("no DESKTOPD_TOKEN")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "ns", 5000, tc.edit)
			p := &Provider{o: Options{Pool: "desk", InstanceID: "i1", CPUs: tc.cpus, MemoryMB: tc.mem, ScreenWidth: 1280, ScreenHeight: 720}, cfg: cfg, ns: "ns"}
			pod, err := p.podFor("desk-0000abcd", podName("desk-0000abcd"))
			if err != nil {
				t.Fatalf("podFor: %v", err)
			}
			if pod.Labels[LabelVM] != "desk-0000abcd" || pod.Labels[LabelPool] != "desk" || pod.Labels[LabelInstance] != "i1" {
				t.Errorf("labels = %v", pod.Labels)
			}
			if !strings.HasPrefix(pod.Name, "rm-desk-0000abcd-") || len(pod.Name) > 63 {
				t.Errorf("name = %q", pod.Name)
			}
			tc.check(t, pod)
		})
	}
}

// TestPodTemplateErrors: a bad quantity or label is refused with the key.
func TestPodTemplateErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(*config.Kubernetes)
		want string
	}{
		{"bad quantity", func(c *config.Kubernetes) { c.Resources.Limits = map[string]string{"memory": "4 GB"} }, "kubernetes.resources.limits.memory"},
		{"bad label", func(c *config.Kubernetes) { c.Labels = map[string]string{"team": "a b"} }, "kubernetes.labels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "ns", 5000, tc.edit)
			p := &Provider{o: Options{Pool: "desk", InstanceID: "i1"}, cfg: cfg, ns: "ns"}
			if _, err := p.podFor("desk-1", "rm-desk-1-abcdef"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("podFor = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"long pool name", "pools:\n  - name: " + strings.Repeat("a", 41) + "\n    provider: kubernetes\n    size: 1\n", "pools[0].name"},
		{"underscore", "pools:\n  - name: a_b\n    provider: kubernetes\n    size: 1\n", "pools[0].name"},
		{"kvm", "pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n    kubernetes: {kvm: yes}\n", "pools[0].kubernetes.kvm"},
		{"toleration", "pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n    kubernetes: {tolerations: [{key: a, effect: Never}]}\n", "pools[0].kubernetes.tolerations[0].effect"},
		{"token arg", "pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n    kubernetes: {args: [--token=x]}\n", "pools[0].kubernetes.args[0]"},
		{"concurrency", "pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n    kubernetes: {create_concurrency: 1000}\n", "pools[0].kubernetes.create_concurrency"},
		{"unknown key", "pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n    kubernetes: {imag: x}\n", `unknown key "imag"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	pools, err := config.Parse([]byte("pools:\n  - name: a\n    provider: kubernetes\n    size: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k := pools[0].Kubernetes; k.Image != "rolloutmesh/desktop:full" || k.GuestPort != 5000 || k.HealthPath != "/healthz" || pools[0].OSType != "Debian" {
		t.Errorf("defaults = %+v os %s", k, pools[0].OSType)
	}
}

func TestPodBroken(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		name string
		pod  corev1.Pod
		want string // "" healthy
	}{
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, ""},
		{"pending", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, ""},
		{"evicted", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, "evicted"},
		{"failed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OOMKilled"}}, "failed"},
		{"deleting", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, "deleted"},
		{"node lost", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}}}, "disrupted"},
		{"image pull", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}, "ImagePullBackOff"},
		{"container creating", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := podBroken(&tc.pod)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Errorf("podBroken = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRetryable(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"500", apierrors.NewInternalError(errors.New("boom")), true},
		{"503", apierrors.NewServiceUnavailable("down"), true},
		{"504", apierrors.NewTimeoutError("slow", 1), true},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"409", apierrors.NewAlreadyExists(gr, "x"), false},
		{"404", apierrors.NewNotFound(gr, "x"), false},
		{"403", apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "x", nil), false},
		{"canceled", fmt.Errorf("get: %w", context.Canceled), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryable(tc.err); got != tc.want {
				t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestRetryBackoff: retries wait 200ms, 400ms, 800ms... on the injected
// clock, and the server's Retry-After when longer.
func TestRetryBackoff(t *testing.T) {
	clk := armedClock{Fake: clock.NewFake(time.Unix(0, 0)), armed: make(chan struct{}, 1)}
	p := &Provider{clk: clk, log: zap.NewNop()}
	errs := []error{apierrors.NewInternalError(errors.New("a")), apierrors.NewTooManyRequests("b", 3), apierrors.NewInternalError(errors.New("c")), nil}
	done := make(chan error, 1)
	calls := 0
	go func() {
		done <- p.retry(context.Background(), "op", func(context.Context) error {
			calls++
			return errs[calls-1]
		})
	}()
	// Each step: wait until the retry is asleep, then advance the clock by
	// the expected delay; one nanosecond less must not wake it.
	for _, d := range []time.Duration{200 * time.Millisecond, 3 * time.Second, 800 * time.Millisecond} {
		select {
		case <-clk.armed:
		case <-time.After(30 * time.Second):
			t.Fatalf("retry did not sleep before %v", d)
		}
		clk.Advance(d - time.Nanosecond)
		select {
		case <-done:
			t.Fatalf("retry returned before %v", d)
		case <-time.After(20 * time.Millisecond):
		}
		clk.Advance(time.Nanosecond)
	}
	select {
	case err := <-done:
		if err != nil || calls != 4 {
			t.Errorf("retry = %v after %d calls, want nil after 4", err, calls)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("retry did not finish")
	}
}

// armedClock tells when a timer is set, so that the test advances the fake
// clock only once the retry sleeps.
type armedClock struct {
	*clock.Fake
	armed chan struct{}
}

func (c armedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.Fake.AfterFunc(d, f)
	c.armed <- struct{}{}
	return t
}
