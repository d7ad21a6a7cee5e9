// Package routing chooses the backend for each request: round robin, least
// loaded (in-flight requests), sticky least loaded (a routing key stays on the
// backend that has its prefix cached until load is too imbalanced) and
// weighted round robin.
package routing

import (
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
)

// Target is a backend as routing sees it.
type Target interface {
	// ID is stable across calls; sticky pins refer to it.
	ID() string
	// Load is the number of requests in flight on it now.
	Load() int
	// Weight is its share for the weighted policy.
	Weight() float64
}

// Policy picks one of the eligible targets (never empty) for a routing key
// and returns its index.
type Policy interface {
	Pick(key string, ts []Target) int
	Name() string
}

// Policy names.
const (
	RoundRobin        = "round_robin"
	LeastLoaded       = "least_loaded"
	StickyLeastLoaded = "sticky_least_loaded"
	Weighted          = "weighted"
)

// Config tunes the policies. Zero fields take the defaults.
type Config struct {
	// Policy is one of the policy names (default sticky_least_loaded).
	Policy string `yaml:"policy"`
	// MaxPinnedKeys bounds the sticky LRU (default 100000).
	MaxPinnedKeys int `yaml:"max_pinned_keys"`
	// ImbalanceAbs and ImbalanceRel: a pinned key moves when its backend's
	// load exceeds the least loaded one's by more than ImbalanceAbs requests
	// AND by more than ImbalanceRel times (defaults 8 and 1.5), the test the
	// SGLang router uses.
	ImbalanceAbs int     `yaml:"imbalance_abs"`
	ImbalanceRel float64 `yaml:"imbalance_rel"`
}

// Hooks observe pin changes (metrics). Nil funcs are skipped.
type Hooks struct {
	Pin   func(id string)
	Unpin func(id string)
}

// New builds the policy cfg names.
func New(cfg Config, hooks Hooks) (Policy, error) {
	switch cfg.Policy {
	case RoundRobin:
		return &roundRobin{}, nil
	case LeastLoaded:
		return &leastLoaded{}, nil
	case "", StickyLeastLoaded:
		return newSticky(cfg, hooks), nil
	case Weighted:
		return &weighted{current: map[string]float64{}}, nil
	}
	return nil, fmt.Errorf("unknown routing policy %q (want round_robin, least_loaded, sticky_least_loaded or weighted)", cfg.Policy)
}

type roundRobin struct{ next atomic.Uint64 }

func (p *roundRobin) Name() string { return RoundRobin }

func (p *roundRobin) Pick(_ string, ts []Target) int {
	return int((p.next.Add(1) - 1) % uint64(len(ts)))
}

type leastLoaded struct{ next atomic.Uint64 }

func (p *leastLoaded) Name() string { return LeastLoaded }

func (p *leastLoaded) Pick(_ string, ts []Target) int { return pickLeast(ts, &p.next) }

// pickLeast returns the least loaded target. The scan starts at a rotating
// offset so that ties (e.g. an idle cluster) spread instead of all landing on
// the first backend.
func pickLeast(ts []Target, next *atomic.Uint64) int {
	start := int(next.Add(1) % uint64(len(ts)))
	best, bestLoad := -1, 0
	for i := range ts {
		j := (start + i) % len(ts)
		if l := ts[j].Load(); best < 0 || l < bestLoad {
			best, bestLoad = j, l
		}
	}
	return best
}

// weighted is smooth weighted round robin (nginx's): deterministic, and
// spreads a heavy backend's turns instead of bunching them.
type weighted struct {
	mu      sync.Mutex
	current map[string]float64
}

func (p *weighted) Name() string { return Weighted }

func (p *weighted) Pick(_ string, ts []Target) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	total, best := 0.0, -1
	for i, t := range ts {
		w := t.Weight()
		if w <= 0 {
			w = 1
		}
		total += w
		p.current[t.ID()] += w
		if best < 0 || p.current[t.ID()] > p.current[ts[best].ID()] {
			best = i
		}
	}
	p.current[ts[best].ID()] -= total
	return best
}

// sticky pins routing keys to backends in a bounded LRU.
type sticky struct {
	cfg   Config
	hooks Hooks
	next  atomic.Uint64

	mu   sync.Mutex
	lru  *list.List // of *pin, most recent at the front
	pins map[string]*list.Element
}

type pin struct {
	key string
	id  string
}

func newSticky(cfg Config, hooks Hooks) *sticky {
	if cfg.MaxPinnedKeys <= 0 {
		cfg.MaxPinnedKeys = 100000
	}
	if cfg.ImbalanceAbs <= 0 {
		cfg.ImbalanceAbs = 8
	}
	if cfg.ImbalanceRel <= 0 {
		cfg.ImbalanceRel = 1.5
	}
	return &sticky{cfg: cfg, hooks: hooks, lru: list.New(), pins: map[string]*list.Element{}}
}

func (p *sticky) Name() string { return StickyLeastLoaded }

func (p *sticky) Pick(key string, ts []Target) int {
	least := pickLeast(ts, &p.next)
	if key == "" {
		return least
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.pins[key]; ok {
		pn := el.Value.(*pin)
		for i, t := range ts {
			if t.ID() != pn.id {
				continue
			}
			if !p.imbalanced(t.Load(), ts[least].Load()) {
				p.lru.MoveToFront(el)
				return i
			}
			break
		}
		// The pinned backend is missing (unhealthy, updating, already
		// tried) or overloaded: move the key to the least loaded one.
		p.unpin(el)
	}
	p.pinKey(key, ts[least].ID())
	return least
}

func (p *sticky) imbalanced(load, minLoad int) bool {
	return load-minLoad > p.cfg.ImbalanceAbs && float64(load) > p.cfg.ImbalanceRel*float64(minLoad)
}

func (p *sticky) pinKey(key, id string) {
	p.pins[key] = p.lru.PushFront(&pin{key: key, id: id})
	if p.hooks.Pin != nil {
		p.hooks.Pin(id)
	}
	for p.lru.Len() > p.cfg.MaxPinnedKeys {
		p.unpin(p.lru.Back())
	}
}

func (p *sticky) unpin(el *list.Element) {
	pn := el.Value.(*pin)
	p.lru.Remove(el)
	delete(p.pins, pn.key)
	if p.hooks.Unpin != nil {
		p.hooks.Unpin(pn.id)
	}
}

// PinCounts reports how many keys are pinned to each backend id. Policies
// without pins report nil.
func PinCounts(p Policy) map[string]int {
	s, ok := p.(*sticky)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for el := s.lru.Front(); el != nil; el = el.Next() {
		counts[el.Value.(*pin).id]++
	}
	return counts
}
