// Package web is the web environment: search and fetch tools over a local
// document collection (BM25, documents with URLs), or over a configured
// HTTP search endpoint, plus a final answer scored by a benchmark metric.
package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/rag"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// Limits on what the tools return.
const (
	maxFetch     = 2 << 20
	maxPageChars = 8000
)

// Config configures the environment. One of Docs or SearchURL is needed.
type Config struct {
	// Docs is a local collection; fetch reads documents by URL or id.
	Docs *rag.Index
	// SearchURL is an HTTP endpoint answering GET SearchURL?q=QUERY with a
	// JSON list of {"title", "url", "snippet"}; fetch then GETs the URL.
	SearchURL string
	HTTP      *http.Client
	Metric    string
	Judge     metrics.Judge
}

// Env is one episode's web environment.
type Env struct {
	cfg  Config
	task env.Task
}

// New returns a web environment.
func New(cfg Config) (*Env, error) {
	if cfg.Docs == nil && cfg.SearchURL == "" {
		return nil, fmt.Errorf("web environment: configure --web-docs or --web-search-url")
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 20 * time.Second}
	}
	if cfg.Metric == "" {
		cfg.Metric = "contains_answer"
	}
	return &Env{cfg: cfg}, nil
}

// SystemPrompt tells the model how to work.
func (e *Env) SystemPrompt() string {
	return "Answer the question by searching the web with the search tool and reading pages with fetch. " +
		"When you know the answer, call final_answer with a short answer (or reply with the answer alone)."
}

// Tools are search, fetch and final_answer.
func (e *Env) Tools() []env.Tool {
	return []env.Tool{
		{Name: "search", Description: "Search the web; returns titles, URLs and snippets.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
		{Name: "fetch", Description: "Fetch a page by URL and return its text.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
		env.FinalAnswerTool(),
	}
}

// Reset starts the episode.
func (e *Env) Reset(_ context.Context, t env.Task) (env.Observation, error) {
	e.task = t
	return env.Observation{}, nil
}

// Step runs tool calls.
func (e *Env) Step(ctx context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	out := make([]env.Result, len(acts))
	for i, a := range acts {
		if a.Terminal() || a.Type == action.TypeWait {
			out[i] = env.Result{OK: true}
			continue
		}
		if a.Type != action.TypeTool || a.Tool == nil {
			out[i] = env.Result{Error: "this environment takes tool calls only"}
			continue
		}
		var args map[string]any
		_ = json.Unmarshal([]byte(a.Tool.Arguments), &args)
		switch a.Tool.Name {
		case "search":
			q, _ := args["query"].(string)
			if q == "" {
				out[i] = env.Result{Error: `search needs {"query": "..."}`}
				continue
			}
			r, err := e.search(ctx, q)
			if err != nil {
				return out, env.Observation{}, err
			}
			out[i] = r
		case "fetch":
			u, _ := args["url"].(string)
			if u == "" {
				out[i] = env.Result{Error: `fetch needs {"url": "..."}`}
				continue
			}
			out[i] = e.fetch(ctx, u)
		default:
			out[i] = env.Result{Error: "unknown tool; use search, fetch or final_answer"}
		}
	}
	return out, env.Observation{}, nil
}

// search asks the local collection or the search endpoint. The endpoint is
// the operator's, not the model's choice: when it fails the error is the
// environment's (env_error), not a tool result the model is scored on.
func (e *Env) search(ctx context.Context, q string) (env.Result, error) {
	if e.cfg.Docs != nil {
		return env.Result{OK: true, Output: rag.FormatHits(e.cfg.Docs.Search(q, 5), 300)}, nil
	}
	u := e.cfg.SearchURL
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	body, err := e.get(ctx, u+sep+"q="+url.QueryEscape(q))
	if err != nil {
		return env.Result{}, env.EnvError(fmt.Errorf("search endpoint: %w", err))
	}
	var results []struct {
		Title, URL, Snippet string
	}
	if err := json.Unmarshal(body, &results); err != nil {
		return env.Result{}, env.EnvError(fmt.Errorf("search endpoint answered with bad JSON: %v", err))
	}
	var b strings.Builder
	for i, r := range results {
		if i >= 10 {
			break
		}
		fmt.Fprintf(&b, "[%d] %s\n%s\n%s\n\n", i+1, r.Title, r.URL, r.Snippet)
	}
	if b.Len() == 0 {
		return env.Result{OK: true, Output: "No results."}, nil
	}
	return env.Result{OK: true, Output: strings.TrimSpace(b.String())}, nil
}

var (
	scriptRe = regexp.MustCompile(`(?is)<(script|style)[^>]*>.*?</(script|style)>`)
	tagRe    = regexp.MustCompile(`(?s)<[^>]*>`)
)

func (e *Env) fetch(ctx context.Context, u string) env.Result {
	if e.cfg.Docs != nil {
		d, ok := e.cfg.Docs.Get(u)
		if !ok {
			return env.Result{Error: "no such page in the collection"}
		}
		return env.Result{OK: true, Output: clip(d.Title + "\n\n" + d.Text)}
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
		return env.Result{Error: "fetch needs an http(s) URL"}
	}
	body, err := e.get(ctx, u)
	if err != nil {
		return env.Result{Error: err.Error()}
	}
	text := scriptRe.ReplaceAllString(string(body), " ")
	text = tagRe.ReplaceAllString(text, " ")
	return env.Result{OK: true, Output: clip(strings.Join(strings.Fields(text), " "))}
}

func clip(s string) string {
	if len(s) > maxPageChars {
		return s[:maxPageChars] + "...(truncated)"
	}
	return s
}

func (e *Env) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return io.ReadAll(io.LimitReader(resp.Body, maxFetch))
}

// Evaluate scores the final answer.
func (e *Env) Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error) {
	return env.ScoreAnswer(ctx, e.task, in.FinalAnswer, e.cfg.Metric, e.cfg.Judge)
}

// Close does nothing.
func (e *Env) Close(context.Context) error { return nil }
