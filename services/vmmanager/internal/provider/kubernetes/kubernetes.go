// Package kubernetes is the pod VM provider: each VM is a pod made from the
// pool's template, labelled with this vmmanager's instance id, the pool and
// the VM id, and reached at its pod IP (no Service per pod). A VM is ready
// when its pod is Running and Ready and its guest server answers; a reset
// replaces the pod with a fresh one (or runs the configured in-guest reset
// command). Pods are watched through an informer, so waiting for a pod and
// checking it cost no API requests; a pod that fails, is evicted, is deleted
// or loses its node fails Check, and the pool quarantines and replaces it.
//
// At start the provider asks the API server whether its Role allows every
// verb it uses, and refuses to start naming the missing ones. Creations are
// bounded per pool (create_concurrency) and every API call is
// retried with exponential backoff on 429, 5xx, timeouts and connection
// errors, honouring the server's Retry-After. After a restart pods of known
// VMs are adopted and Sweep deletes the rest: pods of this pool no VM owns,
// older pods of a VM that was reset while vmmanager was down, and pods of
// pools no longer configured.
package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/config"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/vmmanager/internal/pool"
)

var _ pool.Provider = (*Provider)(nil)

// Labels put on every pod.
const (
	LabelInstance = "rolloutmesh.io/vmmanager"
	LabelPool     = "rolloutmesh.io/pool"
	LabelVM       = "rolloutmesh.io/vm"
)

// Instance.Data keys.
const (
	dataUID       = "uid"
	dataNamespace = "namespace"
)

// containerName is the guest container's name in every pod.
const containerName = "guest"

// Options configure a Provider.
type Options struct {
	Config       config.Kubernetes
	Pool         string
	InstanceID   string
	ScreenWidth  int
	ScreenHeight int
	CPUs         int
	MemoryMB     int
	// Pools are the names of every configured pool: Sweep deletes this
	// vmmanager's pods labelled with any other pool.
	Pools  []string
	Logger *zap.Logger
	// Client talks to the API server; nil builds one from Config.Kubeconfig
	// or the in-cluster config.
	Client clientset.Interface
	// Clock times the API backoff; nil is the real clock.
	Clock clock.Clock
	// Guest reaches the guest servers; its zero value shares one pooled client.
	Guest guest.Client
}

// Provider runs VMs as pods.
type Provider struct {
	o        Options
	cfg      config.Kubernetes
	ns       string
	cli      clientset.Interface
	clk      clock.Clock
	log      *zap.Logger
	pods     listerscorev1.PodNamespaceLister
	stop     context.CancelFunc
	owner    *metav1.OwnerReference
	creating chan struct{} // semaphore: create_concurrency

	mu      sync.Mutex
	waiters map[string]chan struct{} // pod name -> closed at its next event
	adopted map[string]string        // vm id -> adopted pod name, for Sweep
}

// NewClient builds a client from a kubeconfig file, or from the in-cluster
// config when kubeconfig is empty and vmmanager runs in a pod, else from
// $KUBECONFIG. It also returns the namespace the config names ("" if none).
func NewClient(kubeconfig string, qps float64, burst int) (clientset.Interface, string, error) {
	var rc *rest.Config
	var ns string
	var err error
	if kubeconfig == "" {
		if rc, err = rest.InClusterConfig(); err == nil {
			if b, rerr := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); rerr == nil {
				ns = strings.TrimSpace(string(b))
			}
		} else if !errors.Is(err, rest.ErrNotInCluster) {
			return nil, "", fmt.Errorf("in-cluster config: %w", err)
		}
	}
	if rc == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if kubeconfig != "" {
			rules.ExplicitPath = kubeconfig
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
		if rc, err = cc.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig: %w", err)
		}
		ns, _, _ = cc.Namespace()
	}
	rc.QPS, rc.Burst = float32(qps), burst
	rc.UserAgent = "rolloutmesh-vmmanager"
	// Every watch event and most answers are a pod to decode. Protobuf,
	// which the API server speaks for the built-in types, instead of
	// client-go's default JSON (a pod with its managedFields: 16 µs instead of
	// 100-170 µs here), and no gzip: the API server compresses a watch event
	// by event, and unpacking each cost another 50-100 µs (11 % of
	// vmmanager's CPU samples in the pod event benchmark). Together they cut
	// vmmanager's CPU per pod event by ~20 % (docs/benchmarks.md).
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.DisableCompression = true
	cli, err := clientset.NewForConfig(rc)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes client: %w", err)
	}
	return cli, ns, nil
}

// New returns a provider whose pod informer has synced; ctx bounds the
// start-up (client, owner lookup, first list). Close stops the informer.
func New(ctx context.Context, o Options) (*Provider, error) {
	c := o.Config
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	cli, ns := o.Client, c.Namespace
	if cli == nil {
		var cfgNS string
		var err error
		if cli, cfgNS, err = NewClient(c.Kubeconfig, c.QPS, c.Burst); err != nil {
			return nil, err
		}
		if ns == "" {
			ns = cfgNS
		}
	}
	if ns == "" {
		ns = "default"
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	p := &Provider{
		o: o, cfg: c, ns: ns, cli: cli, clk: o.Clock, log: o.Logger,
		creating: make(chan struct{}, max(1, c.CreateConcurrency)),
		waiters:  map[string]chan struct{}{}, adopted: map[string]string{},
	}
	// The template is checked once, with a placeholder id, so that a bad
	// quantity or label is refused at start with the key named.
	if _, err := p.podFor("check-00000000", "x"); err != nil {
		return nil, err
	}
	if err := p.checkAccess(ctx); err != nil {
		return nil, err
	}
	if c.Owner != "" {
		kind, name, _ := strings.Cut(c.Owner, "/")
		meta, err := retryValue(ctx, p, "get owner", func(ctx context.Context) (*metav1.ObjectMeta, error) {
			if kind == "deployment" {
				d, err := cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return &d.ObjectMeta, nil
			}
			s, err := cli.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return &s.ObjectMeta, nil
		})
		if err != nil {
			return nil, fmt.Errorf("kubernetes.owner %s in %s: %w", c.Owner, ns, err)
		}
		k := map[string]string{"deployment": "Deployment", "statefulset": "StatefulSet"}[kind]
		p.owner = &metav1.OwnerReference{APIVersion: "apps/v1", Kind: k, Name: meta.Name, UID: meta.UID}
	}
	sel := labels.Set{LabelInstance: o.InstanceID, LabelPool: o.Pool}.AsSelector().String()
	factory := informers.NewSharedInformerFactoryWithOptions(cli, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel }))
	inf := factory.Core().V1().Pods()
	notify := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			p.notify(pod.Name)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: notify, UpdateFunc: func(_, obj any) { notify(obj) }, DeleteFunc: notify,
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	// The informer retries a failed list or watch forever, logging through
	// klog, which vmmanager does not show: say it in vmmanager's log.
	if err := inf.Informer().SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return // a watch closed by the server: the informer watches again
		}
		p.log.Warn("pod watch failed; the informer retries", zap.String("namespace", ns), zap.Error(err))
	}); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	p.pods = inf.Lister().Pods(ns)
	ictx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	factory.Start(ictx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		cancel()
		return nil, fmt.Errorf("list pods in namespace %s: not synced: %w", ns, context.Cause(ctx))
	}
	return p, nil
}

// checkAccess asks the API server (SelfSubjectAccessReview, which every
// authenticated user may create) whether vmmanager may do everything the
// provider does: get, list, watch, create and delete pods in the namespace,
// and get its owner. A Role missing a verb then fails the start, naming it,
// instead of the first reset hours later (a missing watch would not even
// fail: the informer falls back to relisting). When the review itself is
// refused or unavailable the check is skipped with a warning.
func (p *Provider) checkAccess(ctx context.Context) error {
	var need []authorizationv1.ResourceAttributes
	for _, verb := range []string{"get", "list", "watch", "create", "delete"} {
		need = append(need, authorizationv1.ResourceAttributes{Namespace: p.ns, Verb: verb, Resource: "pods"})
	}
	if p.cfg.Owner != "" {
		kind, name, _ := strings.Cut(p.cfg.Owner, "/")
		need = append(need, authorizationv1.ResourceAttributes{Namespace: p.ns, Verb: "get", Group: "apps", Resource: kind + "s", Name: name})
	}
	var denied []string
	for _, ra := range need {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}
		got, err := retryValue(ctx, p, "access review", func(ctx context.Context) (*authorizationv1.SelfSubjectAccessReview, error) {
			return p.cli.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("access review: %w", err)
			}
			p.log.Warn("cannot review vmmanager's access to pods; not checked", zap.String("namespace", p.ns), zap.Error(err))
			return nil
		}
		if !got.Status.Allowed {
			what := ra.Verb + " " + ra.Resource
			if ra.Group != "" {
				what = ra.Verb + " " + ra.Resource + "." + ra.Group
			}
			if ra.Name != "" {
				what += " " + ra.Name
			}
			denied = append(denied, what)
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("namespace %s: vmmanager may not %s (its Role needs get, list, watch, create and delete on pods, and get on its owner: see deploy/k8s/vmmanager.yaml)",
			p.ns, strings.Join(denied, ", "))
	}
	return nil
}

// Close stops the informer; pods are left alone.
func (p *Provider) Close() { p.stop() }

// Namespace is where the pods live.
func (p *Provider) Namespace() string { return p.ns }

// notify wakes whoever waits on the pod's next event.
func (p *Provider) notify(name string) {
	p.mu.Lock()
	if ch, ok := p.waiters[name]; ok {
		close(ch)
		delete(p.waiters, name)
	}
	p.mu.Unlock()
}

// changed returns a channel closed at the pod's next event. Take it before
// reading the cache, so that an event in between is not missed.
func (p *Provider) changed(name string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.waiters[name]
	if !ok {
		ch = make(chan struct{})
		p.waiters[name] = ch
	}
	return ch
}

func (p *Provider) forget(name string) {
	p.mu.Lock()
	delete(p.waiters, name)
	p.mu.Unlock()
}

// podName is unique per pod, not per VM, so that a reset's new pod never
// waits for the old one's graceful termination to free the name.
func podName(id string) string {
	b := make([]byte, 3)
	rand.Read(b)
	return "rm-" + id + "-" + hex.EncodeToString(b)
}

// podFor builds VM id's pod.
func (p *Provider) podFor(id, name string) (*corev1.Pod, error) {
	c := p.cfg
	k := "kubernetes"
	lbl := map[string]string{}
	for key, v := range c.Labels {
		lbl[key] = v
	}
	lbl[LabelInstance], lbl[LabelPool], lbl[LabelVM] = p.o.InstanceID, p.o.Pool, id
	for key, v := range lbl {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("%s.labels: key %q: %s", k, key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("%s.labels: %s value %q: %s", k, key, v, strings.Join(errs, "; "))
		}
	}
	env := []corev1.EnvVar{
		{Name: "SCREEN_WIDTH", Value: strconv.Itoa(p.o.ScreenWidth)},
		{Name: "SCREEN_HEIGHT", Value: strconv.Itoa(p.o.ScreenHeight)},
	}
	switch {
	case c.GuestTokenSecret != "":
		env = append(env, corev1.EnvVar{Name: "DESKTOPD_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: c.GuestTokenSecret}, Key: "token"},
		}})
	case c.GuestToken != "":
		env = append(env, corev1.EnvVar{Name: "DESKTOPD_TOKEN", Value: c.GuestToken})
	}
	keys := make([]string, 0, len(c.Env))
	for key := range c.Env {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		env = append(env, corev1.EnvVar{Name: key, Value: c.Env[key]})
	}
	res, err := p.resources()
	if err != nil {
		return nil, err
	}
	ports := []corev1.ContainerPort{{Name: "server", ContainerPort: int32(c.GuestPort), Protocol: corev1.ProtocolTCP}}
	names := make([]string, 0, len(c.Ports))
	for n := range c.Ports {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cp := corev1.ContainerPort{ContainerPort: int32(c.Ports[n]), Protocol: corev1.ProtocolTCP}
		if len(n) <= 15 && len(validation.IsValidPortName(n)) == 0 {
			cp.Name = n
		}
		ports = append(ports, cp)
	}
	ctr := corev1.Container{
		Name: containerName, Image: c.Image, Command: c.Command, Args: c.Args, Env: env, Ports: ports,
		Resources:       res,
		ImagePullPolicy: corev1.PullPolicy(c.ImagePullPolicy),
		// The kubelet's view of readiness; vmmanager probes the guest too.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(c.GuestPort))}},
			PeriodSeconds: 2, FailureThreshold: 3,
		},
	}
	grace := int64(time.Duration(c.TerminationGracePeriod) / time.Second)
	automount := false
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{ctr},
		RestartPolicy:                 corev1.RestartPolicyNever,
		NodeSelector:                  c.NodeSelector,
		TerminationGracePeriodSeconds: &grace,
		ServiceAccountName:            c.ServiceAccount,
		AutomountServiceAccountToken:  &automount,
		PriorityClassName:             c.PriorityClass,
		EnableServiceLinks:            new(false),
	}
	if c.RuntimeClass != "" {
		rc := c.RuntimeClass
		spec.RuntimeClassName = &rc
	}
	for _, s := range c.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	for _, t := range c.Tolerations {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds,
		})
	}
	privileged := c.Privileged
	switch c.KVM {
	case "device_plugin":
		q := resource.MustParse("1")
		rn := corev1.ResourceName(c.KVMResource)
		if spec.Containers[0].Resources.Limits == nil {
			spec.Containers[0].Resources.Limits = corev1.ResourceList{}
		}
		spec.Containers[0].Resources.Limits[rn] = q
	case "host_path":
		// A hostPath device is outside the container's device cgroup
		// unless the container is privileged.
		privileged = true
		hp := corev1.HostPathCharDev
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kvm", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: "/dev/kvm", Type: &hp},
		}})
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "kvm", MountPath: "/dev/kvm"})
	}
	if privileged {
		spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &privileged}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: lbl, Annotations: c.Annotations},
		Spec:       spec,
	}
	if p.owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*p.owner}
	}
	return pod, nil
}

// resources merges the pool's cpus/memory_mb with the explicit resources.
func (p *Provider) resources() (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	parse := func(key string, m map[string]string) (corev1.ResourceList, error) {
		if len(m) == 0 {
			return nil, nil
		}
		out := corev1.ResourceList{}
		for n, v := range m {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("kubernetes.resources.%s.%s: %q is not a quantity like 2, 500m or 4Gi", key, n, v)
			}
			out[corev1.ResourceName(n)] = q
		}
		return out, nil
	}
	var err error
	if r.Requests, err = parse("requests", p.cfg.Resources.Requests); err != nil {
		return r, err
	}
	if r.Limits, err = parse("limits", p.cfg.Resources.Limits); err != nil {
		return r, err
	}
	set := func(n corev1.ResourceName, q resource.Quantity) {
		for _, l := range []*corev1.ResourceList{&r.Requests, &r.Limits} {
			if *l == nil {
				*l = corev1.ResourceList{}
			}
			if _, ok := (*l)[n]; !ok {
				(*l)[n] = q
			}
		}
	}
	if p.o.CPUs > 0 {
		set(corev1.ResourceCPU, *resource.NewQuantity(int64(p.o.CPUs), resource.DecimalSI))
	}
	if p.o.MemoryMB > 0 {
		set(corev1.ResourceMemory, *resource.NewQuantity(int64(p.o.MemoryMB)<<20, resource.BinarySI))
	}
	return r, nil
}

// Create makes VM id's pod and waits until it is Running and Ready and its
// guest answers. At most create_concurrency creations of this pool are in
// flight; the others wait their turn (bounded by ctx).
func (p *Provider) Create(ctx context.Context, id string) (pool.Instance, error) {
	select {
	case p.creating <- struct{}{}:
	case <-ctx.Done():
		return pool.Instance{}, fmt.Errorf("wait for a creation slot: %w", ctx.Err())
	}
	defer func() { <-p.creating }()
	var pod *corev1.Pod
	for attempt := 0; ; attempt++ {
		want, err := p.podFor(id, podName(id))
		if err != nil {
			return pool.Instance{}, err
		}
		pod, err = retryValue(ctx, p, "create pod", func(ctx context.Context) (*corev1.Pod, error) {
			return p.cli.CoreV1().Pods(p.ns).Create(ctx, want, metav1.CreateOptions{})
		})
		// A name taken (409) is either a create of ours that succeeded
		// before its answer was lost (retried, or a proxy in between): the
		// pod carries this VM's labels and is taken as is; or a collision of
		// the random suffix: try another name.
		if apierrors.IsAlreadyExists(err) {
			got, gerr := retryValue(ctx, p, "get pod", func(ctx context.Context) (*corev1.Pod, error) {
				return p.cli.CoreV1().Pods(p.ns).Get(ctx, want.Name, metav1.GetOptions{})
			})
			if gerr == nil && got.DeletionTimestamp == nil && got.Labels[LabelVM] == id &&
				got.Labels[LabelInstance] == p.o.InstanceID && got.Labels[LabelPool] == p.o.Pool {
				pod, err = got, nil
			} else if attempt < 3 {
				continue
			}
		}
		if err != nil {
			return pool.Instance{}, err
		}
		break
	}
	inst := pool.Instance{Ref: pod.Name, Data: map[string]string{dataUID: string(pod.UID), dataNamespace: p.ns}}
	if err := p.waitReady(ctx, &inst); err != nil {
		p.deletePod(inst.Ref, string(pod.UID))
		return inst, err
	}
	return inst, nil
}

// waitReady waits on the informer until the pod is Running and Ready with an
// IP, fills the endpoint, then probes the guest until it answers. A pod that
// fails or goes away ends the wait at once.
func (p *Provider) waitReady(ctx context.Context, inst *pool.Instance) error {
	defer p.forget(inst.Ref)
	for {
		ch := p.changed(inst.Ref)
		pod, err := p.pods.Get(inst.Ref)
		switch {
		case apierrors.IsNotFound(err):
			// Not yet in the cache right after Create; an event follows.
		case err != nil:
			return fmt.Errorf("pod %s: %w", inst.Ref, err)
		default:
			if string(pod.UID) != inst.Data[dataUID] {
				break
			}
			if bad := podBroken(pod); bad != "" {
				return fmt.Errorf("pod %s: %s", inst.Ref, bad)
			}
			if podReady(pod) {
				p.locate(pod, inst)
				return p.o.Guest.WaitReady(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken, func() error {
					return p.alive(inst.Ref, inst.Data[dataUID])
				})
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			state := "not in the cache"
			if pod != nil {
				state = podState(pod)
			}
			return fmt.Errorf("pod %s not ready (%s): %w", inst.Ref, state, ctx.Err())
		}
	}
}

// locate fills the endpoint and ports from the pod IP.
func (p *Provider) locate(pod *corev1.Pod, inst *pool.Instance) {
	ip := pod.Status.PodIP
	inst.Endpoint = "http://" + net.JoinHostPort(ip, strconv.Itoa(p.cfg.GuestPort))
	inst.Ports = nil
	for name, port := range p.cfg.Ports {
		if inst.Ports == nil {
			inst.Ports = map[string]string{}
		}
		inst.Ports[name] = net.JoinHostPort(ip, strconv.Itoa(port))
	}
}

// alive reads the informer cache: the pod must still be this one, not
// failed, evicted or going away, and Ready.
func (p *Provider) alive(name, uid string) error {
	pod, err := p.pods.Get(name)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s is gone", name)
	}
	if err != nil {
		return fmt.Errorf("pod %s: %w", name, err)
	}
	if uid != "" && string(pod.UID) != uid {
		return fmt.Errorf("pod %s was replaced (uid %s, want %s)", name, pod.UID, uid)
	}
	if bad := podBroken(pod); bad != "" {
		return fmt.Errorf("pod %s: %s", name, bad)
	}
	if !podReady(pod) {
		return fmt.Errorf("pod %s is not ready (%s)", name, podState(pod))
	}
	return nil
}

// podBroken says why a pod can never serve again, or "".
func podBroken(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "is being deleted"
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		if pod.Status.Reason == "Evicted" {
			return "evicted: " + pod.Status.Message
		}
		return fmt.Sprintf("failed (%s: %s)", pod.Status.Reason, pod.Status.Message)
	case corev1.PodSucceeded:
		return "exited"
	}
	for _, c := range pod.Status.Conditions {
		// Set by the eviction API, preemption, taint manager and the node
		// lifecycle controller when the node goes away.
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("disrupted (%s: %s)", c.Reason, c.Message)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName && cs.State.Terminated != nil {
			return fmt.Sprintf("guest container terminated (%s, exit %d)", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		if w := cs.State.Waiting; cs.Name == containerName && w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "CrashLoopBackOff":
				return fmt.Sprintf("guest container %s: %s", w.Reason, w.Message)
			}
		}
	}
	return ""
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podState(pod *corev1.Pod) string {
	s := string(pod.Status.Phase)
	if pod.Spec.NodeName == "" {
		s += ", unscheduled"
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Reason != "" {
			s += fmt.Sprintf(", %s: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	return s
}

// deletePod deletes one pod (only that uid when given); it must finish even
// when the caller's context is done, and a pod already gone is fine.
func (p *Provider) deletePod(name, uid string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := metav1.DeleteOptions{}
	if uid != "" {
		u := types.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	err := p.retry(ctx, "delete pod", func(ctx context.Context) error {
		return p.cli.CoreV1().Pods(p.ns).Delete(ctx, name, opts)
	})
	// NotFound: already gone. Conflict: the uid precondition failed, the
	// name belongs to another pod now (never with our random names).
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	return nil
}

// Reset runs the in-guest reset command when one is configured, and
// otherwise, or when it fails, replaces the pod with a fresh one.
func (p *Provider) Reset(ctx context.Context, id string, inst pool.Instance) (pool.Instance, error) {
	if len(p.cfg.ResetCommand) > 0 && p.alive(inst.Ref, inst.Data[dataUID]) == nil {
		_, err := p.o.Guest.Execute(ctx, inst.Endpoint, p.cfg.GuestToken, p.cfg.ResetCommand)
		if err == nil {
			err = p.o.Guest.WaitReady(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken, func() error {
				return p.alive(inst.Ref, inst.Data[dataUID])
			})
		}
		if err == nil {
			return inst, nil
		}
		p.log.Warn("in-guest reset failed; replacing the pod", zap.String("vm_id", id), zap.String("pod", inst.Ref), zap.Error(err))
	}
	if err := p.Destroy(ctx, id, inst); err != nil {
		return inst, err
	}
	return p.Create(ctx, id)
}

// Destroy deletes the VM's pod (every pod of the VM when the record has
// none).
func (p *Provider) Destroy(ctx context.Context, id string, inst pool.Instance) error {
	if inst.Ref != "" {
		return p.deletePod(inst.Ref, inst.Data[dataUID])
	}
	pods, err := p.pods.List(labels.SelectorFromSet(labels.Set{LabelInstance: p.o.InstanceID, LabelPool: p.o.Pool, LabelVM: id}))
	if err != nil {
		return fmt.Errorf("list pods of vm %s: %w", id, err)
	}
	var errs []error
	for _, pod := range pods {
		errs = append(errs, p.deletePod(pod.Name, string(pod.UID)))
	}
	return errors.Join(errs...)
}

// Check wants the pod Running, Ready and not going away (from the informer
// cache: no API request), and the guest answering.
func (p *Provider) Check(ctx context.Context, inst pool.Instance) error {
	if err := p.alive(inst.Ref, inst.Data[dataUID]); err != nil {
		return err
	}
	return p.o.Guest.Probe(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken)
}

// Adopt takes over a pod of a previous run: it must carry this VM's labels,
// be the recorded pod (same uid), be ready at the recorded address and
// answer.
func (p *Provider) Adopt(ctx context.Context, id string, inst pool.Instance) error {
	pod, err := p.pods.Get(inst.Ref)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s is gone", inst.Ref)
	}
	if err != nil {
		return fmt.Errorf("pod %s: %w", inst.Ref, err)
	}
	if pod.Labels[LabelVM] != id || pod.Labels[LabelInstance] != p.o.InstanceID || pod.Labels[LabelPool] != p.o.Pool {
		return fmt.Errorf("pod %s does not carry vm %s's labels", inst.Ref, id)
	}
	if err := p.alive(inst.Ref, inst.Data[dataUID]); err != nil {
		return err
	}
	got := pool.Instance{Data: inst.Data}
	p.locate(pod, &got)
	if got.Endpoint != inst.Endpoint {
		return fmt.Errorf("pod %s is at %s, recorded at %s", inst.Ref, got.Endpoint, inst.Endpoint)
	}
	if err := p.o.Guest.Probe(ctx, inst.Endpoint, p.cfg.HealthPath, p.cfg.GuestToken); err != nil {
		return err
	}
	p.mu.Lock()
	p.adopted[id] = inst.Ref
	p.mu.Unlock()
	return nil
}

// Sweep deletes this vmmanager's pods that no known VM owns: pods of this
// pool labelled with an unknown VM, pods of a known VM other than the one
// adopted (a reset's new pod recorded nowhere), and pods of pools no longer
// configured.
func (p *Provider) Sweep(ctx context.Context, known map[string]bool) error {
	// The informer lists only this pool's pods; the selector says so again
	// so that a cache filled otherwise never makes Sweep delete others'.
	pods, err := p.pods.List(labels.SelectorFromSet(labels.Set{LabelInstance: p.o.InstanceID, LabelPool: p.o.Pool}))
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	p.mu.Lock()
	adopted := make(map[string]string, len(p.adopted))
	for k, v := range p.adopted {
		adopted[k] = v
	}
	p.mu.Unlock()
	var errs []error
	for _, pod := range pods {
		vm := pod.Labels[LabelVM]
		if known[vm] && (adopted[vm] == "" || adopted[vm] == pod.Name) {
			continue
		}
		p.log.Warn("stray pod deleted", zap.String("vm_id", vm), zap.String("pod", pod.Name))
		errs = append(errs, p.deletePod(pod.Name, string(pod.UID)))
	}
	// Pools no longer configured have no provider to sweep them: any
	// kubernetes pool's does. The selector names the configured pools.
	configured := append([]string{p.o.Pool}, p.o.Pools...)
	req, err := labels.NewRequirement(LabelPool, "notin", configured)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("pool selector: %w", err))...)
	}
	inst, _ := labels.NewRequirement(LabelInstance, "=", []string{p.o.InstanceID})
	sel := labels.NewSelector().Add(*inst, *req).String()
	list, err := retryValue(ctx, p, "list pods of removed pools", func(ctx context.Context) (*corev1.PodList, error) {
		return p.cli.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, pod := range list.Items {
		p.log.Warn("pod of a pool no longer configured deleted", zap.String("pool", pod.Labels[LabelPool]), zap.String("pod", pod.Name))
		errs = append(errs, p.deletePod(pod.Name, string(pod.UID)))
	}
	return errors.Join(errs...)
}

// Backoff bounds of API retries.
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 10 * time.Second
)

// retryable reports whether an API error is worth retrying: throttling,
// server-side errors and timeouts, and transport errors (connection
// refused or reset while the API server restarts).
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || code >= 500
	}
	// Not an API status: a transport error.
	return true
}

// retry calls fn until it succeeds, fails with a non-retryable error or ctx
// ends, sleeping with exponential backoff (or the server's Retry-After).
func (p *Provider) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		if err = fn(ctx); !retryable(err) {
			return err
		}
		d := backoffBase * time.Duration(math.Pow(2, float64(min(attempt, 10))))
		d = min(d, backoffMax)
		if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
			d = max(d, time.Duration(s)*time.Second)
		}
		p.log.Warn("kubernetes API error; retrying", zap.String("op", what), zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))
		fired := make(chan struct{})
		t := p.clk.AfterFunc(d, func() { close(fired) })
		select {
		case <-fired:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		}
	}
}

func retryValue[T any](ctx context.Context, p *Provider, what string, fn func(context.Context) (T, error)) (T, error) {
	var out T
	err := p.retry(ctx, what, func(ctx context.Context) error {
		v, err := fn(ctx)
		out = v
		return err
	})
	return out, err
}
