package web

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/rag"
)

func call(name, args string) action.Action {
	return action.Action{Type: action.TypeTool, Tool: &action.ToolCall{Name: name, Arguments: args}}
}

func TestLocalCollection(t *testing.T) {
	docs := rag.NewIndex([]rag.Doc{{ID: "1", URL: "https://example.org/go", Title: "Go", Text: "Go was released in 2009."}})
	e, err := New(Config{Docs: docs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, _, err := e.Step(ctx, []action.Action{call("search", `{"query":"go released"}`), call("fetch", `{"url":"https://example.org/go"}`), call("fetch", `{"url":"https://nowhere"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res[0].Output, "https://example.org/go") || !strings.Contains(res[1].Output, "2009") || res[2].OK {
		t.Errorf("results = %+v", res)
	}
}

func TestSearchEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/search":
			w.Write([]byte(`[{"title":"Q","url":"` + "http://" + r.Host + `/page","snippet":"q=` + r.URL.Query().Get("q") + `"}]`))
		case "/page":
			w.Write([]byte("<html><script>x()</script><p>The answer is <b>42</b>.</p></html>"))
		}
	}))
	defer srv.Close()
	e, err := New(Config{SearchURL: srv.URL + "/search"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.Reset(ctx, env.Task{Instruction: "?", Answer: "42"})
	res, _, _ := e.Step(ctx, []action.Action{call("search", `{"query":"life"}`), call("fetch", `{"url":"`+srv.URL+`/page"}`), call("fetch", `{"url":"file:///etc/passwd"}`)})
	if !strings.Contains(res[0].Output, "q=life") || res[1].Output != "The answer is 42 ." || res[2].OK {
		t.Errorf("results = %+v", res)
	}
	if ev, err := e.Evaluate(ctx, env.EvalInput{FinalAnswer: "42"}); err != nil || ev.Score != 1 {
		t.Errorf("Evaluate = %+v, %v", ev, err)
	}
}

// TestSearchEndpointFailureIsEnvError: a search endpoint that is down or
// answers garbage fails the step as an environment error; a page the model
// chose that cannot be fetched stays a failed tool call.
func TestSearchEndpointFailureIsEnvError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/garbage":
			w.Write([]byte("<html>not json</html>"))
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name, searchURL, wantErr string
	}{
		{name: "HTTP 503", searchURL: srv.URL + "/search", wantErr: "HTTP 503"},
		{name: "bad JSON", searchURL: srv.URL + "/garbage", wantErr: "bad JSON"},
		{name: "refused", searchURL: "http://127.0.0.1:1/search", wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(Config{SearchURL: tt.searchURL})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = e.Step(context.Background(), []action.Action{call("search", `{"query":"life"}`)})
			if !errors.Is(err, env.ErrEnvironment) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Step(search) error %v, want an environment error containing %q", err, tt.wantErr)
			}
		})
	}
	e, err := New(Config{SearchURL: srv.URL + "/search"})
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := e.Step(context.Background(), []action.Action{call("fetch", `{"url":"`+srv.URL+`/missing"}`)})
	if err != nil || res[0].OK {
		t.Errorf("Step(fetch of a missing page) = %+v, %v; want a failed tool call", res, err)
	}
}
