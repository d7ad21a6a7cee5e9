package kubernetes

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
)

// benchPods is the pool size the benchmarks model: 1,024 pods.
const benchPods = 1024

// benchProvider is a provider whose informer is fed by a fake watch, so that
// what is measured is vmmanager's side of a pod event (the informer's store
// update, the event handler, waking the waiter), not an API server's.
func benchProvider(b *testing.B) (*Provider, *watch.FakeWatcher, []*corev1.Pod) {
	b.Helper()
	fw := watch.NewFakeWithChanSize(benchPods, false)
	cli := fake.NewClientset()
	cli.PrependWatchReactor("pods", k8stesting.DefaultWatchReactor(fw, nil))
	allowAll(cli)
	cfg := testConfigB(b)
	p, err := New(context.Background(), Options{Config: cfg, Pool: "desk", InstanceID: "i1", Client: cli})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	pods := make([]*corev1.Pod, benchPods)
	for i := range pods {
		id := fmt.Sprintf("desk-%08x", i)
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "rm-" + id + "-000000", Namespace: "ns", UID: types.UID("uid-" + id), ResourceVersion: "1",
				Labels: map[string]string{LabelInstance: "i1", LabelPool: "desk", LabelVM: id}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	// Fill the cache with all 1,024 pods first.
	for _, pod := range pods {
		ch := p.changed(pod.Name)
		fw.Add(pod.DeepCopy())
		<-ch
	}
	return p, fw, pods
}

func testConfigB(b *testing.B) (c config.Kubernetes) {
	b.Helper()
	c.Namespace, c.Image, c.GuestPort, c.HealthPath, c.CreateConcurrency = "ns", "img", 5000, "/healthz", 16
	return c
}

// BenchmarkPodEvent: one pod status update of a pool of 1,024 pods, from
// the watch to the waiter woken; reports p50 and p99.
func BenchmarkPodEvent(b *testing.B) {
	p, fw, pods := benchProvider(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := pods[i%benchPods].DeepCopy()
		pod.ResourceVersion = strconv.Itoa(i + 2)
		ch := p.changed(pod.Name)
		start := time.Now()
		fw.Modify(pod)
		<-ch
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkCheckCache: the pod part of a health check or lease (Check
// without the guest's HTTP probe) on a pool of 1,024 pods: a cache lookup,
// no API request.
func BenchmarkCheckCache(b *testing.B) {
	p, _, pods := benchProvider(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := pods[i%benchPods]
		start := time.Now()
		if err := p.alive(pod.Name, string(pod.UID)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}
