package launch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Launcher runs a set of replicas.
type Launcher struct {
	reps []*Replica

	mu      sync.Mutex
	model   string // newest weights, once SetModel was called
	version int64
	set     bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New prepares the replicas; Start starts them.
func New(specs []Spec, opts Options) *Launcher {
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	l := &Launcher{}
	for _, s := range specs {
		r := &Replica{spec: s, opts: opts, state: Starting}
		r.model = func() (string, int64) { return l.modelFor(s) }
		l.reps = append(l.reps, r)
	}
	return l
}

// SetModel makes the replicas (re)start on weights path at version: the
// gateway calls it after moving the running ones there.
func (l *Launcher) SetModel(path string, version int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.model, l.version, l.set = path, version, true
}

// SetInitialVersion records the version of the configured model_path.
func (l *Launcher) SetInitialVersion(version int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.set {
		l.version = version
	}
}

func (l *Launcher) modelFor(s Spec) (string, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set {
		return l.model, l.version
	}
	return s.Config.ModelPath, l.version
}

// Replicas lists the replicas in spec order.
func (l *Launcher) Replicas() []*Replica { return l.reps }

// Start starts every replica.
func (l *Launcher) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for _, r := range l.reps {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			r.run(ctx)
		}()
	}
}

// Stop stops every replica (SIGTERM, then SIGKILL after its grace period)
// and waits until each process is gone.
func (l *Launcher) Stop() {
	if l.cancel != nil {
		l.cancel()
	}
	l.wg.Wait()
}

// AllocatePorts picks n ports in [lo, hi] on host that nothing listens on
// and that are not in taken, skipping the others (reported in skipped).
func AllocatePorts(host string, lo, hi, n int, taken map[int]bool) (ports, skipped []int, err error) {
	for p := lo; p <= hi && len(ports) < n; p++ {
		if taken[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			skipped = append(skipped, p)
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, skipped, fmt.Errorf("%d free ports needed in %d-%d on %s, found %d (in use: %v)", n, lo, hi, host, len(ports), skipped)
	}
	return ports, skipped, nil
}
