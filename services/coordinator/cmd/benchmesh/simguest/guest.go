package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// maxBody bounds what a request may send; the runner's action batches and
// commands are far smaller.
const maxBody = 1 << 20

// guest answers OSWorld's guest API for one port. Its only state is which
// frame its screen shows: the frame changes when an action runs, as a real
// desktop's does after a click, and not between two screenshots with no
// action in between (the runner waits for two equal screenshots before an
// episode's first observation; a screen that changed on every answer would
// keep it waiting 10 s, which no desktop at rest does).
type guest struct {
	id            int
	shot          *screenshot
	width, height int
	frame         atomic.Uint64
}

func (g *guest) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /screenshot", func(w http.ResponseWriter, r *http.Request) {
		tail := g.shot.tail(g.id, g.frame.Load())
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", strconv.Itoa(len(g.shot.head)+len(tail)))
		// Two writes, so the shared PNG is never copied: the answer costs
		// what a guest's HTTP server spends sending bytes it has.
		_, _ = w.Write(g.shot.head)
		_, _ = w.Write(tail)
	})
	mux.HandleFunc("GET /platform", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "Linux")
	})
	mux.HandleFunc("POST /screen_size", func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		writeJSON(w, http.StatusOK, map[string]int{"width": g.width, "height": g.height})
	})
	mux.HandleFunc("GET /terminal", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"output": ""})
	})
	mux.HandleFunc("GET /accessibility", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"AT": ""})
	})
	exec := func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Command any `json:"command"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil || in.Command == nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"status": "error", "message": "body: want JSON with a command"})
			return
		}
		g.frame.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "output": "", "error": "", "returncode": 0})
	}
	mux.HandleFunc("POST /execute", exec)
	mux.HandleFunc("POST /setup/execute", exec)
	mux.HandleFunc("POST /run_python", func(w http.ResponseWriter, r *http.Request) {
		drain(r)
		g.frame.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "output": "", "error": "", "return_code": 0})
	})
	mux.HandleFunc("POST /v1/actions", func(w http.ResponseWriter, r *http.Request) {
		var acts []json.RawMessage
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&acts); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body: want a JSON list of actions"})
			return
		}
		type outcome struct {
			OK bool `json:"ok"`
		}
		res := make([]outcome, len(acts))
		for i := range res {
			res[i].OK = true
		}
		g.frame.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{"results": res})
	})
	return mux
}

func drain(r *http.Request) { _, _ = io.Copy(io.Discard, io.LimitReader(r.Body, maxBody)) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
