package web

import (
	"context"
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
