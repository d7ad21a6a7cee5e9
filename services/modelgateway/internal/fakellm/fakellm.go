// Package fakellm is a stand-in for a GPU model server: an HTTP server that
// speaks OpenAI's chat API the way vLLM does (return_token_ids, logprobs,
// tool calls, streaming, /health, /v1/models, vLLM's and SGLang's
// weight-update endpoints) with deterministic fake tokens, configurable
// latency, failure injection, a per-routing-key prefix-cache model and
// scripted replies. It is not a model: it answers from its script.
package fakellm

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Server. Zero values mean: no latency, no faults.
type Config struct {
	// Model is the served model name (default "fake-model").
	Model string
	// TTFT is the time to the first token on a prefix-cache miss.
	TTFT time.Duration
	// CachedTTFT is the time to the first token on a prefix-cache hit.
	CachedTTFT time.Duration
	// PerToken is the time between tokens after the first.
	PerToken time.Duration
	// CacheKeys is how many routing keys the prefix cache holds (LRU,
	// default 256); it models a KV cache too small to hold everything.
	CacheKeys int
	// SlowStart keeps /health and chat answering 503 this long after New,
	// like a server that is still loading weights.
	SlowStart time.Duration
	// Faults injected into chat requests.
	Faults Faults
	// Script rules, first match wins.
	Script []Rule
	// Seed seeds fault injection so runs repeat.
	Seed uint64
	// CheckWeights refuses (500) a weights path that is not a directory
	// holding config.json, as a real server fails to load a broken
	// checkpoint.
	CheckWeights bool
}

// checkWeights is the CheckWeights test of a weights path.
func (s *Server) checkWeights(path string) error {
	if !s.cfg.CheckWeights || path == "" {
		return nil
	}
	if fi, err := os.Stat(filepath.Join(path, "config.json")); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("cannot load weights from %s: no config.json", path)
	}
	return nil
}

// Faults are the failure-injection rates, each a fraction in [0, 1] of chat
// requests.
type Faults struct {
	// ErrorRate answers 500.
	ErrorRate float64 `json:"error_rate"`
	// HangRate never answers until the client goes away.
	HangRate float64 `json:"hang_rate"`
	// DropRate closes the connection without an answer.
	DropRate float64 `json:"drop_rate"`
	// HealthDown makes /health answer 503 while chat still works, the
	// way a wedged engine looks to a prober.
	HealthDown bool `json:"health_down"`
}

func (f Faults) validate() error {
	for name, v := range map[string]float64{"error_rate": f.ErrorRate, "hang_rate": f.HangRate, "drop_rate": f.DropRate} {
		if v < 0 || v > 1 {
			return fmt.Errorf("%s: %v is not in [0, 1]", name, v)
		}
	}
	return nil
}

// Stats are counters a test or benchmark reads back.
type Stats struct {
	Requests      int64  `json:"requests"`
	Completed     int64  `json:"completed"`
	Errors        int64  `json:"errors"`
	Hangs         int64  `json:"hangs"`
	Drops         int64  `json:"drops"`
	Canceled      int64  `json:"canceled"`
	Aborted       int64  `json:"aborted"`
	InFlight      int64  `json:"in_flight"`
	CacheHits     int64  `json:"cache_hits"`
	CacheMisses   int64  `json:"cache_misses"`
	Paused        bool   `json:"paused"`
	WeightVersion string `json:"weight_version"`
	WeightUpdates int64  `json:"weight_updates"`
	WeightSource  string `json:"weight_source"`
}

// Server is the fake model server; it is an http.Handler.
type Server struct {
	cfg     Config
	started time.Time
	mux     *http.ServeMux

	requests, completed, errs, hangs, drops, canceled, aborted, inFlight atomic.Int64
	cacheHits, cacheMisses, weightUpdates                                atomic.Int64

	mu       sync.Mutex
	faults   Faults
	rng      *rand.Rand
	resumeCh chan struct{} // non-nil while paused; closed on resume
	abortCh  chan struct{} // closed to abort in-flight generations
	version  string
	source   string
	cache    *list.List // of string keys, most recent first
	cacheIdx map[string]*list.Element
}

// ErrBadConfig marks invalid configuration.
var ErrBadConfig = errors.New("invalid fakellm config")

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Model == "" {
		cfg.Model = "fake-model"
	}
	if cfg.CacheKeys <= 0 {
		cfg.CacheKeys = 256
	}
	if err := cfg.Faults.validate(); err != nil {
		return nil, fmt.Errorf("%w: faults.%v", ErrBadConfig, err)
	}
	for _, d := range []time.Duration{cfg.TTFT, cfg.CachedTTFT, cfg.PerToken, cfg.SlowStart} {
		if d < 0 {
			return nil, fmt.Errorf("%w: negative duration %v", ErrBadConfig, d)
		}
	}
	rules, err := CompileRules(cfg.Script)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	cfg.Script = rules
	s := &Server{
		cfg:      cfg,
		started:  time.Now(),
		faults:   cfg.Faults,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		abortCh:  make(chan struct{}),
		version:  "0",
		cache:    list.New(),
		cacheIdx: map[string]*list.Element{},
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/chat/completions", s.handleChat)
	m.HandleFunc("GET /v1/models", s.handleModels)
	m.HandleFunc("GET /health", s.handleHealth)
	m.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": "fakellm"})
	})
	// vLLM's RL weight-update endpoints.
	m.HandleFunc("POST /pause", s.handlePause)
	m.HandleFunc("POST /resume", s.handleResume)
	m.HandleFunc("GET /is_paused", s.handleIsPaused)
	m.HandleFunc("POST /update_weights", s.handleUpdateWeights)
	m.HandleFunc("POST /update_weight_version", s.handleUpdateWeights)
	m.HandleFunc("POST /collective_rpc", s.handleCollectiveRPC)
	m.HandleFunc("GET /weight_info", s.handleWeightInfo)
	m.HandleFunc("POST /reset_prefix_cache", s.handleFlushCache)
	// SGLang's.
	m.HandleFunc("POST /pause_generation", s.handlePause)
	m.HandleFunc("POST /continue_generation", s.handleResume)
	m.HandleFunc("POST /update_weights_from_disk", s.handleUpdateWeights)
	m.HandleFunc("GET /get_model_info", s.handleWeightInfo)
	m.HandleFunc("POST /flush_cache", s.handleFlushCache)
	m.HandleFunc("GET /health_generate", s.handleHealth)
	// fakellm's own controls.
	m.HandleFunc("GET /fake/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Stats()) })
	m.HandleFunc("POST /fake/faults", s.handleFaults)
	s.mux = m
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	paused, version, source := s.resumeCh != nil, s.version, s.source
	s.mu.Unlock()
	return Stats{
		Requests: s.requests.Load(), Completed: s.completed.Load(), Errors: s.errs.Load(),
		Hangs: s.hangs.Load(), Drops: s.drops.Load(), Canceled: s.canceled.Load(),
		Aborted: s.aborted.Load(), InFlight: s.inFlight.Load(),
		CacheHits: s.cacheHits.Load(), CacheMisses: s.cacheMisses.Load(),
		Paused: paused, WeightVersion: version, WeightUpdates: s.weightUpdates.Load(), WeightSource: source,
	}
}

// SetFaults changes the failure injection rates at run time.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
	return nil
}

func (s *Server) starting() bool { return time.Since(s.started) < s.cfg.SlowStart }

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	if s.starting() {
		writeError(w, http.StatusServiceUnavailable, "server is starting")
		return
	}
	s.mu.Lock()
	down := s.faults.HealthDown
	s.mu.Unlock()
	if down {
		writeError(w, http.StatusServiceUnavailable, "injected health failure")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.Model, "object": "model", "created": s.started.Unix(), "owned_by": "fakellm",
		}},
	})
}

func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&f); err != nil {
		writeError(w, http.StatusBadRequest, "decode faults: "+err.Error())
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, f)
}

// pause stops new generations from starting; abort also ends the running
// ones with finish_reason "abort".
func (s *Server) pause(abort bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumeCh == nil {
		s.resumeCh = make(chan struct{})
	}
	if abort {
		close(s.abortCh)
		s.abortCh = make(chan struct{})
	}
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	mode := r.URL.Query().Get("mode")
	if mode == "" && r.ContentLength > 0 {
		// SGLang takes the mode in a JSON body.
		var body struct {
			Mode string `json:"mode"`
		}
		_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body)
		mode = body.Mode
	}
	s.pause(mode == "abort")
	if mode == "wait" {
		// vLLM's "wait" returns once in-flight requests have finished.
		for s.inFlight.Load() > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "paused": true})
}

func (s *Server) handleResume(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	if s.resumeCh != nil {
		close(s.resumeCh)
		s.resumeCh = nil
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "paused": false})
}

func (s *Server) handleIsPaused(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"is_paused": s.Stats().Paused})
}

// handleUpdateWeights serves vLLM's /update_weights and
// /update_weight_version and SGLang's /update_weights_from_disk: it records
// the version and source and drops the prefix cache, whose entries belong to
// the old weights.
func (s *Server) handleUpdateWeights(w http.ResponseWriter, r *http.Request) {
	var body struct {
		WeightVersion json.RawMessage `json:"weight_version"`
		ModelPath     string          `json:"model_path"`
		Source        string          `json:"source"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "decode body: "+err.Error())
		return
	}
	var version string
	if len(body.WeightVersion) > 0 {
		if err := json.Unmarshal(body.WeightVersion, &version); err != nil {
			// Accept a bare number too.
			version = string(body.WeightVersion)
		}
	}
	source := body.Source
	if source == "" {
		source = body.ModelPath
	}
	if err := s.checkWeights(source); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.mu.Lock()
	if version != "" {
		s.version = version
	}
	if source != "" {
		s.source = source
	}
	s.mu.Unlock()
	s.weightUpdates.Add(1)
	s.flushCache()
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "weights updated", "weight_version": version})
}

func (s *Server) handleCollectiveRPC(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Method string `json:"method"`
		Kwargs struct {
			WeightsPath string `json:"weights_path"`
		} `json:"kwargs"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "decode body: "+err.Error())
		return
	}
	if body.Method != "reload_weights" {
		writeError(w, http.StatusBadRequest, "method: fakellm only knows reload_weights")
		return
	}
	if err := s.checkWeights(body.Kwargs.WeightsPath); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if body.Kwargs.WeightsPath != "" {
		s.mu.Lock()
		s.source = body.Kwargs.WeightsPath
		s.mu.Unlock()
	}
	s.weightUpdates.Add(1)
	s.flushCache()
	writeJSON(w, http.StatusOK, map[string]any{"results": []any{nil}})
}

func (s *Server) handleWeightInfo(w http.ResponseWriter, _ *http.Request) {
	st := s.Stats()
	writeJSON(w, http.StatusOK, map[string]any{
		"weight_version": st.WeightVersion, "model_path": st.WeightSource, "model": s.cfg.Model,
	})
}

func (s *Server) handleFlushCache(w http.ResponseWriter, _ *http.Request) {
	s.flushCache()
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
}

func (s *Server) flushCache() {
	s.mu.Lock()
	s.cache.Init()
	clear(s.cacheIdx)
	s.mu.Unlock()
}

// touchCache reports whether key was cached and makes it most recent.
func (s *Server) touchCache(key string) bool {
	if key == "" {
		s.cacheMisses.Add(1)
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.cacheIdx[key]; ok {
		s.cache.MoveToFront(el)
		s.cacheHits.Add(1)
		return true
	}
	s.cacheMisses.Add(1)
	s.cacheIdx[key] = s.cache.PushFront(key)
	for s.cache.Len() > s.cfg.CacheKeys {
		old := s.cache.Back()
		s.cache.Remove(old)
		delete(s.cacheIdx, old.Value.(string))
	}
	return false
}

type fault int

const (
	faultNone fault = iota
	faultError
	faultHang
	faultDrop
)

func (s *Server) rollFault() fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults
	if f.ErrorRate == 0 && f.HangRate == 0 && f.DropRate == 0 {
		return faultNone
	}
	x := s.rng.Float64()
	switch {
	case x < f.ErrorRate:
		return faultError
	case x < f.ErrorRate+f.HangRate:
		return faultHang
	case x < f.ErrorRate+f.HangRate+f.DropRate:
		return faultDrop
	}
	return faultNone
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	typ := "BadRequestError"
	switch {
	case code == http.StatusNotFound:
		typ = "NotFoundError"
	case code >= 500:
		typ = "InternalServerError"
	}
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
