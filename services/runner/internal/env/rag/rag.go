// Package rag is the retrieval environment: a search tool over a local
// corpus ranked by BM25, and a final answer scored by a benchmark metric.
// The corpus is a directory of text files or a JSONL file of
// {"id", "title", "text"} (also "url" for the web environment); it is
// loaded once per runner and shared by all episodes.
package rag

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// Doc is one document of a corpus.
type Doc struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	URL   string `json:"url,omitempty"`
	Text  string `json:"text"`
}

// Hit is a ranked search result.
type Hit struct {
	Doc   *Doc
	Score float64
}

// Index is a BM25 index (k1 = 1.5, b = 0.75). It is read-only once built
// and safe for concurrent use.
type Index struct {
	docs   []Doc
	tf     []map[string]int
	df     map[string]int
	lens   []int
	avgLen float64
	byKey  map[string]int
}

// Limits of a corpus.
const (
	MaxDocs    = 1 << 20
	MaxDocSize = 1 << 20
	maxQuery   = 4096
)

// NewIndex indexes docs.
func NewIndex(docs []Doc) *Index {
	ix := &Index{docs: docs, df: map[string]int{}, byKey: map[string]int{}}
	total := 0
	for i, d := range docs {
		tf := map[string]int{}
		toks := Tokenize(d.Title + " " + d.Text)
		for _, t := range toks {
			tf[t]++
		}
		for t := range tf {
			ix.df[t]++
		}
		ix.tf = append(ix.tf, tf)
		ix.lens = append(ix.lens, len(toks))
		total += len(toks)
		if d.ID != "" {
			ix.byKey[d.ID] = i
		}
		if d.URL != "" {
			ix.byKey[d.URL] = i
		}
	}
	if len(docs) > 0 {
		ix.avgLen = float64(total) / float64(len(docs))
	}
	return ix
}

// Tokenize lowercases and splits on anything but letters and digits.
func Tokenize(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Len is the number of documents.
func (ix *Index) Len() int { return len(ix.docs) }

// Get returns a document by id or URL.
func (ix *Index) Get(key string) (*Doc, bool) {
	i, ok := ix.byKey[key]
	if !ok {
		return nil, false
	}
	return &ix.docs[i], true
}

// Search returns the k best documents for the query.
func (ix *Index) Search(query string, k int) []Hit {
	if len(query) > maxQuery {
		query = query[:maxQuery]
	}
	const k1, b = 1.5, 0.75
	n := float64(len(ix.docs))
	var hits []Hit
	terms := Tokenize(query)
	for i := range ix.docs {
		score := 0.0
		for _, t := range terms {
			f := float64(ix.tf[i][t])
			if f == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(ix.lens[i])/ix.avgLen))
		}
		if score > 0 {
			hits = append(hits, Hit{Doc: &ix.docs[i], Score: score})
		}
	}
	sort.SliceStable(hits, func(a, c int) bool { return hits[a].Score > hits[c].Score })
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits
}

// Load reads a corpus: a JSONL file of documents, or a directory whose
// .txt and .md files are documents (id = relative path).
func Load(path string) (*Index, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var docs []Doc
	if !st.IsDir() {
		f, err := boundedread.Open(path)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), MaxDocSize)
		line := 0
		for sc.Scan() {
			line++
			if len(strings.TrimSpace(sc.Text())) == 0 {
				continue
			}
			var d Doc
			if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
				return nil, fmt.Errorf("corpus %s line %d: %v", path, line, err)
			}
			if d.ID == "" {
				d.ID = fmt.Sprintf("doc-%d", line)
			}
			docs = append(docs, d)
			if len(docs) > MaxDocs {
				return nil, fmt.Errorf("corpus: more than %d documents", MaxDocs)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("corpus %s: %v", path, err)
		}
		return NewIndex(docs), nil
	}
	err = filepath.WalkDir(path, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".txt" && ext != ".md" {
			return nil
		}
		info, err := de.Info()
		if err != nil || info.Size() > MaxDocSize {
			return err
		}
		// The entry may be a symbolic link to a device or a FIFO: the open
		// checks what it reaches, the read is capped.
		b, err := boundedread.ReadFile(p, MaxDocSize)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		docs = append(docs, Doc{ID: rel, Title: strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), Text: string(b)})
		if len(docs) > MaxDocs {
			return fmt.Errorf("more than %d documents", MaxDocs)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return NewIndex(docs), nil
}

// Config configures the environment.
type Config struct {
	Index  *Index
	Metric string
	Judge  metrics.Judge
	// K is how many passages a search returns (default 3).
	K int
	// PassageChars bounds each passage (default 800).
	PassageChars int
}

// Env is one episode's retrieval environment.
type Env struct {
	cfg  Config
	task env.Task
}

// New returns a retrieval environment; it needs a corpus.
func New(cfg Config) (*Env, error) {
	if cfg.Index == nil {
		return nil, fmt.Errorf("rag environment: no corpus configured (--rag-corpus)")
	}
	if cfg.K <= 0 {
		cfg.K = 3
	}
	if cfg.PassageChars <= 0 {
		cfg.PassageChars = 800
	}
	if cfg.Metric == "" {
		cfg.Metric = "contains_answer"
	}
	return &Env{cfg: cfg}, nil
}

// SystemPrompt tells the model how to work.
func (e *Env) SystemPrompt() string {
	return "Answer the question using the search tool over the document collection. " +
		"When you know the answer, call final_answer with a short answer (or reply with the answer alone)."
}

// Tools are search and final_answer.
func (e *Env) Tools() []env.Tool {
	return []env.Tool{
		{Name: "search", Description: "Search the document collection; returns the best passages.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
		env.FinalAnswerTool(),
	}
}

// Reset starts the episode.
func (e *Env) Reset(_ context.Context, t env.Task) (env.Observation, error) {
	e.task = t
	return env.Observation{}, nil
}

// Step runs tool calls.
func (e *Env) Step(_ context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	out := make([]env.Result, len(acts))
	for i, a := range acts {
		switch {
		case a.Terminal() || a.Type == action.TypeWait:
			out[i] = env.Result{OK: true}
		case a.Type == action.TypeTool && a.Tool != nil && a.Tool.Name == "search":
			var args struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal([]byte(a.Tool.Arguments), &args); err != nil || args.Query == "" {
				out[i] = env.Result{Error: `search needs {"query": "..."}`}
				continue
			}
			out[i] = env.Result{OK: true, Output: FormatHits(e.cfg.Index.Search(args.Query, e.cfg.K), e.cfg.PassageChars)}
		default:
			out[i] = env.Result{Error: "unknown tool; use search or final_answer"}
		}
	}
	return out, env.Observation{}, nil
}

// FormatHits renders hits for the model.
func FormatHits(hits []Hit, chars int) string {
	if len(hits) == 0 {
		return "No results."
	}
	var b strings.Builder
	for i, h := range hits {
		text := h.Doc.Text
		if len(text) > chars {
			text = text[:chars] + "..."
		}
		fmt.Fprintf(&b, "[%d] %s (id: %s", i+1, h.Doc.Title, h.Doc.ID)
		if h.Doc.URL != "" {
			fmt.Fprintf(&b, ", url: %s", h.Doc.URL)
		}
		fmt.Fprintf(&b, ")\n%s\n\n", text)
	}
	return strings.TrimSpace(b.String())
}

// Evaluate scores the final answer.
func (e *Env) Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error) {
	return env.ScoreAnswer(ctx, e.task, in.FinalAnswer, e.cfg.Metric, e.cfg.Judge)
}

// Close does nothing.
func (e *Env) Close(context.Context) error { return nil }
