// Package breaker is a per-backend circuit breaker: after a run of consecutive
// failures it refuses requests for a cooldown, then lets trial requests
// through (half-open) and closes again after enough of them succeed.
package breaker

import (
	"sync"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/clock"
)

// State is a breaker state.
type State int

// Breaker states.
const (
	Closed State = iota + 1
	Open
	HalfOpen
)

// String names the state for metrics and logs.
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "unknown"
}

// Config tunes a Breaker. Zero fields take the defaults.
type Config struct {
	// FailureThreshold consecutive failures open the breaker (default 5).
	FailureThreshold int `yaml:"failure_threshold"`
	// OpenFor is how long it stays open before half-opening (default 10s).
	OpenFor time.Duration `yaml:"open_for"`
	// HalfOpenSuccesses trial successes close it again (default 2).
	HalfOpenSuccesses int `yaml:"half_open_successes"`
}

func (c Config) withDefaults() Config {
	if c.FailureThreshold <= 0 {
		c.FailureThreshold = 5
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 10 * time.Second
	}
	if c.HalfOpenSuccesses <= 0 {
		c.HalfOpenSuccesses = 2
	}
	return c
}

// Breaker is safe for concurrent use.
type Breaker struct {
	cfg      Config
	clk      clock.Clock
	onChange func(from, to State)

	mu        sync.Mutex
	state     State
	failures  int
	successes int
	openedAt  time.Time
	// trial is true while a half-open trial request is outstanding, so only
	// one probe request at a time reaches a backend that may still be down.
	trial bool
}

// New returns a closed breaker. onChange, if not nil, is called (under the
// breaker's lock, so it must be quick) on every state transition.
func New(cfg Config, clk clock.Clock, onChange func(from, to State)) *Breaker {
	return &Breaker{cfg: cfg.withDefaults(), clk: clk, onChange: onChange, state: Closed}
}

// State reports the current state, moving open to half-open when the
// cooldown is over.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maybeHalfOpen()
	return b.state
}

// Allow reports whether a request may be sent now. A true answer in the
// half-open state reserves the single trial slot: the caller must call
// Record.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maybeHalfOpen()
	switch b.state {
	case Closed:
		return true
	case HalfOpen:
		if b.trial {
			return false
		}
		b.trial = true
		return true
	}
	return false
}

// Peek is Allow without reserving the trial slot, for routing decisions.
func (b *Breaker) Peek() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maybeHalfOpen()
	return b.state == Closed || (b.state == HalfOpen && !b.trial)
}

// Record reports the outcome of an allowed request.
func (b *Breaker) Record(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maybeHalfOpen()
	switch b.state {
	case Closed:
		if ok {
			b.failures = 0
			return
		}
		b.failures++
		if b.failures >= b.cfg.FailureThreshold {
			b.set(Open)
		}
	case HalfOpen:
		b.trial = false
		if !ok {
			b.set(Open)
			return
		}
		b.successes++
		if b.successes >= b.cfg.HalfOpenSuccesses {
			b.set(Closed)
		}
	case Open:
		// A request allowed before the breaker opened finished late; it
		// says nothing new.
	}
}

// Cancel gives back a trial slot reserved by Allow when the request ended
// without telling anything about the backend (the caller went away).
func (b *Breaker) Cancel() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == HalfOpen {
		b.trial = false
	}
}

func (b *Breaker) maybeHalfOpen() {
	if b.state == Open && !b.clk.Now().Before(b.openedAt.Add(b.cfg.OpenFor)) {
		b.set(HalfOpen)
	}
}

func (b *Breaker) set(to State) {
	from := b.state
	b.state = to
	b.failures, b.successes, b.trial = 0, 0, false
	if to == Open {
		b.openedAt = b.clk.Now()
	}
	if b.onChange != nil && from != to {
		b.onChange(from, to)
	}
}
