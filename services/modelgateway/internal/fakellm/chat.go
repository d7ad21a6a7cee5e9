package fakellm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// maxBody bounds a chat request (screenshots are large, not unbounded).
const maxBody = 64 << 20

// DefaultReply starts the answer when no script rule matches, so that a
// reader of a transcript sees at once that no model was involved.
const DefaultReply = "fakellm (a stand-in, not a model): no script rule matched the last user message."

// bodies reuses request buffers: a turn with a screenshot is hundreds of
// kilobytes, and io.ReadAll grew a new buffer for each in a dozen steps,
// which with the collector's work cost more than the rest of the request.
var bodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody keeps an occasional huge request from pinning its buffer.
const maxPooledBody = 4 << 20

// readBody reads a request body, up to maxBody, into a buffer from bodies,
// sized by Content-Length when the client sent one. The caller gives it
// back with putBody.
func readBody(w http.ResponseWriter, r *http.Request) (*[]byte, error) {
	bp := bodies.Get().(*[]byte)
	buf := (*bp)[:0]
	if n := r.ContentLength; n > int64(cap(buf)) && n <= maxBody {
		buf = make([]byte, 0, n+1) // +1: the read that sees EOF needs room
	}
	rd := http.MaxBytesReader(w, r.Body, maxBody)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			*bp = buf
			return bp, nil
		}
		if err != nil {
			*bp = buf
			putBody(bp)
			return nil, err
		}
	}
}

func putBody(bp *[]byte) {
	if cap(*bp) <= maxPooledBody {
		bodies.Put(bp)
	}
}

// generation is one planned answer.
type generation struct {
	pieces    []string
	ids       []int
	toolCalls []openai.ToolCall
	finish    string
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.starting() {
		writeError(w, http.StatusServiceUnavailable, "server is starting")
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "read body: "+err.Error())
		return
	}
	req, err := decodeChat(*body)
	putBody(body) // decodeChat copied what it keeps
	if err != nil {
		writeError(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages: at least one message is required")
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	if req.TopLogProbs < 0 || req.TopLogProbs > 20 {
		writeError(w, http.StatusBadRequest, "top_logprobs: must be in [0, 20]")
		return
	}
	ctx := r.Context()

	// A paused server holds new requests until it resumes.
	s.mu.Lock()
	resume := s.resumeCh
	s.mu.Unlock()
	if resume != nil {
		select {
		case <-resume:
		case <-ctx.Done():
			s.canceled.Add(1)
			return
		}
	}

	switch s.rollFault() {
	case faultError:
		s.errs.Add(1)
		writeError(w, http.StatusInternalServerError, "injected failure")
		return
	case faultHang:
		s.hangs.Add(1)
		<-ctx.Done()
		s.canceled.Add(1)
		return
	case faultDrop:
		s.drops.Add(1)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream
	}

	key := r.Header.Get("X-Routing-Key")
	if key == "" {
		key = req.User
	}
	hit := s.touchCache(key)
	promptIDs := PromptTokenIDs(req.Messages)
	gen := s.plan(req)

	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	s.mu.Lock()
	abort := s.abortCh
	s.mu.Unlock()

	ttft := s.cfg.TTFT
	if hit {
		ttft = s.cfg.CachedTTFT
	}
	usage := &openaiapi.Usage{PromptTokens: len(promptIDs), CompletionTokens: len(gen.ids)}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	if hit {
		// Everything but the new turn was cached: the prompt up to the
		// last message.
		last := PromptTokenIDs(req.Messages[len(req.Messages)-1:])
		usage.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: max(0, len(promptIDs)-len(last))}
	}
	n := max(1, req.N)
	id := fmt.Sprintf("chatcmpl-fake-%d", s.requests.Load())

	if req.Stream {
		s.stream(w, r, req, gen, promptIDs, usage, n, id, ttft, abort)
		return
	}
	// Wait as long as a real server would take for the whole answer.
	total := ttft + time.Duration(max(0, len(gen.ids)-1))*s.cfg.PerToken
	switch s.wait(r, total, abort) {
	case waitCanceled:
		s.canceled.Add(1)
		return
	case waitAborted:
		s.aborted.Add(1)
		gen = &generation{finish: "abort"}
		usage.CompletionTokens, usage.TotalTokens = 0, usage.PromptTokens
	}
	resp := openaiapi.ChatResponse{
		ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: s.cfg.Model, Usage: usage,
	}
	if req.ReturnTokenIDs {
		resp.PromptTokenIDs = promptIDs
	}
	for i := range n {
		c := openaiapi.Choice{
			Index:        i,
			Message:      openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: strings.Join(gen.pieces, ""), ToolCalls: gen.toolCalls},
			FinishReason: gen.finish,
		}
		if req.ReturnTokenIDs {
			c.TokenIDs = gen.ids
		}
		if req.LogProbs {
			c.LogProbs = &openaiapi.LogProbs{Content: logProbs(gen, 0, len(gen.ids), req.TopLogProbs, req.ReturnTokensAsTokenIDs)}
		}
		resp.Choices = append(resp.Choices, c)
	}
	s.completed.Add(1)
	writeJSON(w, http.StatusOK, resp)
}

type waitResult int

const (
	waitDone waitResult = iota
	waitCanceled
	waitAborted
)

// wait sleeps d unless the client goes away or the generation is aborted.
func (s *Server) wait(r *http.Request, d time.Duration, abort <-chan struct{}) waitResult {
	if d <= 0 {
		select {
		case <-r.Context().Done():
			return waitCanceled
		default:
			return waitDone
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return waitDone
	case <-r.Context().Done():
		return waitCanceled
	case <-abort:
		return waitAborted
	}
}

// plan decides the answer: the first script rule matching the last user
// message, else DefaultReply; truncated to max_tokens.
func (s *Server) plan(req *openaiapi.ChatRequest) *generation {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == openai.ChatMessageRoleUser {
			last = messageText(req.Messages[i])
			break
		}
	}
	g := &generation{finish: "stop"}
	reply := DefaultReply
	var rule *Rule
	for i := range s.cfg.Script {
		if s.cfg.Script[i].re.MatchString(last) {
			rule = &s.cfg.Script[i]
			break
		}
	}
	if rule != nil {
		reply = rule.Reply
		for i, tc := range rule.ToolCalls {
			args := string(tc.Arguments)
			if args == "" {
				args = "{}"
			} else {
				var buf bytes.Buffer
				if json.Compact(&buf, tc.Arguments) == nil {
					args = buf.String()
				}
			}
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%s/%s/%s", i, tc.Name, args, last)
			g.toolCalls = append(g.toolCalls, openai.ToolCall{
				ID: fmt.Sprintf("call_%016x", h.Sum64()), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: args},
			})
		}
		if len(g.toolCalls) > 0 {
			g.finish = "tool_calls"
		}
	}
	g.pieces = Pieces(reply)
	limit := req.MaxTokens
	if limit == 0 {
		limit = req.MaxCompletionTokens // the newer name; vLLM reads both
	}
	if len(g.toolCalls) == 0 && limit > 0 && len(g.pieces) > limit {
		g.pieces = g.pieces[:limit]
		g.finish = "length"
	}
	for _, p := range g.pieces {
		g.ids = append(g.ids, PieceID(p))
	}
	for _, tc := range g.toolCalls {
		g.ids = append(g.ids, TokenIDs(tc.Function.Name+" "+tc.Function.Arguments)...)
	}
	return g
}

// logProbs renders positions [from, to) of g.
func logProbs(g *generation, from, to, top int, asIDs bool) []openaiapi.LogProb {
	out := make([]openaiapi.LogProb, 0, to-from)
	for i := from; i < to; i++ {
		id := g.ids[i]
		text := ""
		if i < len(g.pieces) {
			text = g.pieces[i]
		}
		tok := text
		if asIDs {
			tok = openaiapi.TokenAsID(id)
		}
		lp := openaiapi.LogProb{Token: tok, LogProb: LogProb(id), Bytes: byteValues(text), TopLogProbs: []openaiapi.TopLogProb{}}
		for k := range top {
			alt, altText := id, text
			if k > 0 {
				alt, altText = id+k, fmt.Sprintf("<alt%d>", k)
			}
			altTok := altText
			if asIDs {
				altTok = openaiapi.TokenAsID(alt)
			}
			lp.TopLogProbs = append(lp.TopLogProbs, openaiapi.TopLogProb{Token: altTok, LogProb: LogProb(id) - float64(k), Bytes: byteValues(altText)})
		}
		out = append(out, lp)
	}
	return out
}

func byteValues(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

// stream answers as server-sent events, the way vLLM does: a role chunk
// (carrying prompt_token_ids when asked), one chunk per token, tool calls, a
// finish chunk, an optional usage chunk, then [DONE].
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *openaiapi.ChatRequest, g *generation,
	promptIDs []int, usage *openaiapi.Usage, n int, id string, ttft time.Duration, abort <-chan struct{}) {
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		// Headers go out at once, as a streaming server's do; the first
		// token follows after the TTFT.
		fl.Flush()
	}
	created := time.Now().Unix()
	send := func(c openaiapi.Chunk) {
		c.ID, c.Object, c.Created, c.Model = id, "chat.completion.chunk", created, s.cfg.Model
		b, _ := json.Marshal(c)
		w.Write([]byte("data: "))
		w.Write(b)
		w.Write([]byte("\n\n"))
		if fl != nil {
			fl.Flush()
		}
	}
	if res := s.wait(r, ttft, abort); res != waitDone {
		s.finishEarly(w, res, send, n)
		return
	}
	first := openaiapi.Chunk{}
	if req.ReturnTokenIDs {
		first.PromptTokenIDs = promptIDs
	}
	for i := range n {
		first.Choices = append(first.Choices, openaiapi.ChunkChoice{Index: i, Delta: openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}})
	}
	send(first)
	for t := range g.pieces {
		if t > 0 {
			if res := s.wait(r, s.cfg.PerToken, abort); res != waitDone {
				s.finishEarly(w, res, send, n)
				return
			}
		}
		c := openaiapi.Chunk{}
		for i := range n {
			cc := openaiapi.ChunkChoice{Index: i, Delta: openai.ChatCompletionStreamChoiceDelta{Content: g.pieces[t]}}
			if req.ReturnTokenIDs {
				cc.TokenIDs = []int{g.ids[t]}
			}
			if req.LogProbs {
				cc.LogProbs = &openaiapi.LogProbs{Content: logProbs(g, t, t+1, req.TopLogProbs, req.ReturnTokensAsTokenIDs)}
			}
			c.Choices = append(c.Choices, cc)
		}
		send(c)
	}
	if len(g.toolCalls) > 0 {
		c := openaiapi.Chunk{}
		for i := range n {
			calls := make([]openai.ToolCall, len(g.toolCalls))
			for k, tc := range g.toolCalls {
				tc.Index = &k
				calls[k] = tc
			}
			cc := openaiapi.ChunkChoice{Index: i, Delta: openai.ChatCompletionStreamChoiceDelta{ToolCalls: calls}}
			if req.ReturnTokenIDs {
				cc.TokenIDs = g.ids[len(g.pieces):]
			}
			if req.LogProbs {
				cc.LogProbs = &openaiapi.LogProbs{Content: logProbs(g, len(g.pieces), len(g.ids), req.TopLogProbs, req.ReturnTokensAsTokenIDs)}
			}
			c.Choices = append(c.Choices, cc)
		}
		send(c)
	}
	last := openaiapi.Chunk{}
	for i := range n {
		fin := g.finish
		last.Choices = append(last.Choices, openaiapi.ChunkChoice{Index: i, FinishReason: &fin})
	}
	send(last)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(openaiapi.Chunk{Choices: []openaiapi.ChunkChoice{}, Usage: usage})
	}
	w.Write([]byte("data: [DONE]\n\n"))
	if fl != nil {
		fl.Flush()
	}
	s.completed.Add(1)
}

// finishEarly ends a stream that was cancelled (nothing more to send) or
// aborted by a pause (a finish chunk with "abort", then [DONE]).
func (s *Server) finishEarly(w http.ResponseWriter, res waitResult, send func(openaiapi.Chunk), n int) {
	if res == waitCanceled {
		s.canceled.Add(1)
		return
	}
	s.aborted.Add(1)
	c := openaiapi.Chunk{}
	for i := range n {
		fin := "abort"
		c.Choices = append(c.Choices, openaiapi.ChunkChoice{Index: i, FinishReason: &fin})
	}
	send(c)
	w.Write([]byte("data: [DONE]\n\n"))
}
