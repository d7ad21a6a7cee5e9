package main

import (
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
)

// maxBody bounds what a request may send; the runner's action batches and
// commands are far smaller.
const maxBody = 1 << 20

// guest answers OSWorld's guest API for every port at once: the guests are
// alike and hold no state beyond a screenshot counter.
type guest struct {
	shot          *screenshot
	width, height int
	frames        atomic.Uint64
}

func (g *guest) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /screenshot", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(g.shot.frame(g.frames.Add(1)))
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
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "output": "", "error": "", "returncode": 0})
	}
	mux.HandleFunc("POST /execute", exec)
	mux.HandleFunc("POST /setup/execute", exec)
	mux.HandleFunc("POST /run_python", func(w http.ResponseWriter, r *http.Request) {
		drain(r)
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
