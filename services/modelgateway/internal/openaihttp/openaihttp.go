// Package openaihttp is the gateway's OpenAI-compatible HTTP front:
// POST /v1/chat/completions (streamed and not) and GET /v1/models on the same
// routing as the gRPC front, so agent code written for OpenAI or vLLM works
// unchanged. Request bodies are checked and then passed through byte for
// byte, so every backend-specific field (return_token_ids, top_k, ...)
// reaches the backend and every field of the answer reaches the client.
package openaihttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/metrics"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// Options bound requests.
type Options struct {
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64
	// MaxImageBytes bounds one decoded image.
	MaxImageBytes int
	// MaxResponseBytes bounds a non-streamed answer read from a backend.
	MaxResponseBytes int64
	// Timeout applies to requests (the HTTP API has no deadline header).
	Timeout time.Duration
}

// Handler serves the OpenAI API.
type Handler struct {
	g    *gateway.Gateway
	met  *metrics.Metrics
	log  *zap.Logger
	opts Options
	mux  *http.ServeMux
}

// New builds the handler.
func New(g *gateway.Gateway, met *metrics.Metrics, log *zap.Logger, opts Options) *Handler {
	h := &Handler{g: g, met: met, log: log, opts: opts, mux: http.NewServeMux()}
	h.mux.HandleFunc("POST /v1/chat/completions", h.chat)
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("GET /health", h.health)
	return h
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP serves the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) health(w http.ResponseWriter, _ *http.Request) {
	for _, b := range h.g.Backends() {
		if b.Healthy() {
			w.WriteHeader(http.StatusOK)
			return
		}
	}
	writeError(w, http.StatusServiceUnavailable, "no healthy backend", "", "service_unavailable")
}

func (h *Handler) models(w http.ResponseWriter, _ *http.Request) {
	list := openaiapi.ModelList{Object: "list", Data: []openaiapi.Model{}}
	for _, m := range h.g.Models() {
		list.Data = append(list.Data, openaiapi.Model{ID: m, Object: "model", OwnedBy: "rolloutmesh"})
	}
	writeJSON(w, http.StatusOK, list)
}

// peek is the part of a request the gateway reads; the rest passes through.
type peek struct {
	Model  string
	User   string
	Stream bool
}

// readRequest checks a request body and extracts what routing needs. It
// uses gjson rather than encoding/json because a screenshot is megabytes of
// base64 that encoding/json would scan two or three times and copy, at a
// cost of milliseconds per request; gjson skips over it. Full syntax
// validation (another pass over the megabytes) is left to the backend,
// whose 400 the client receives as is.
func (h *Handler) readRequest(body []byte) (peek, *fieldError) {
	r := gjson.ParseBytes(body)
	if !r.IsObject() {
		return peek{}, &fieldError{"body", "not a JSON object"}
	}
	f := r.Get("model")
	if f.Exists() && f.Type != gjson.String && f.Type != gjson.Null {
		return peek{}, &fieldError{"model", "must be a string"}
	}
	p := peek{Model: f.String(), User: r.Get("user").String(), Stream: r.Get("stream").Bool()}
	msgs := r.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return p, &fieldError{"messages", "at least one message is required"}
	}
	var fe *fieldError
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		fe = h.checkMessage(i, m)
		i++
		return fe == nil
	})
	return p, fe
}

func (h *Handler) checkMessage(i int, m gjson.Result) *fieldError {
	if m.Get("role").String() == "" {
		return &fieldError{fmt.Sprintf("messages[%d].role", i), "required"}
	}
	content := m.Get("content")
	switch {
	case !content.Exists(), content.Type == gjson.String, content.Type == gjson.Null:
		return nil
	case !content.IsArray():
		return &fieldError{fmt.Sprintf("messages[%d].content", i), "must be a string or an array of content parts"}
	}
	var fe *fieldError
	j := 0
	content.ForEach(func(_, part gjson.Result) bool {
		if u := part.Get("image_url.url"); u.Exists() {
			fe = h.checkImageURL(fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j), u)
		}
		j++
		return fe == nil
	})
	return fe
}

func (h *Handler) checkImageURL(field string, u gjson.Result) *fieldError {
	if u.Type != gjson.String {
		return &fieldError{field, "must be a string"}
	}
	raw := u.Raw // quoted, not unescaped: no copy of the base64
	switch {
	case strings.HasPrefix(raw, `"data:`):
		comma := strings.IndexByte(raw, ',')
		if comma < 0 {
			return &fieldError{field, "malformed data URL"}
		}
		if n := (len(raw) - comma - 2) / 4 * 3; n > h.opts.MaxImageBytes {
			return &fieldError{field, fmt.Sprintf("image of about %d bytes exceeds the %d-byte limit", n, h.opts.MaxImageBytes)}
		}
	case strings.HasPrefix(raw, `"http://`), strings.HasPrefix(raw, `"https://`):
	default:
		return &fieldError{field, "must be a data: or http(s) URL"}
	}
	return nil
}

type fieldError struct{ field, problem string }

func (h *Handler) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := readBody(w, r, h.opts.MaxRequestBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", h.opts.MaxRequestBytes), "", "request_too_large")
			return
		}
		writeError(w, http.StatusBadRequest, "read body: "+err.Error(), "", "invalid_request")
		return
	}
	p, fe := h.readRequest(body)
	if fe != nil {
		writeError(w, http.StatusBadRequest, fe.field+": "+fe.problem, fe.field, "invalid_request")
		return
	}
	model, err := h.g.ResolveModel(p.Model)
	if err != nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("model: the model %q is not served by this gateway", p.Model), "model", "model_not_found")
		return
	}
	if p.Model == "" {
		// Backends need a model name; this path is rare, so the re-encode
		// is acceptable.
		if body, err = openaiapi.MergeExtra(body, `{"model":`+strconv.Quote(model)+`}`); err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), "", "invalid_request")
			return
		}
	}
	key := r.Header.Get("X-Routing-Key")
	if key == "" {
		key = p.User
	}
	ctx := r.Context()
	if _, ok := ctx.Deadline(); !ok && h.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.Timeout)
		defer cancel()
	}
	resp, err := h.g.Do(ctx, &gateway.Request{Model: model, RoutingKey: key, Body: body})
	if err != nil {
		h.fail(w, err)
		return
	}
	hdr := w.Header()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		hdr.Set("Content-Type", ct)
	}
	hdr.Set("X-Backend", resp.Backend.ID())
	hdr.Set("X-Gateway-Attempts", strconv.Itoa(resp.Attempts))
	ok2xx := resp.StatusCode/100 == 2
	if p.Stream && ok2xx {
		h.stream(ctx, w, resp, start)
		return
	}
	out, err := gateway.ReadAnswer(resp, h.opts.MaxResponseBytes)
	if err != nil && ctx.Err() != nil {
		resp.FinishCanceled()
		h.fail(w, ctx.Err())
		return
	}
	if err != nil {
		resp.Finish(false, err.Error())
		writeError(w, http.StatusBadGateway, "backend "+resp.Backend.ID()+": read answer: "+err.Error(), "", "bad_gateway")
		return
	}
	changed := resp.Finish(ok2xx, "")
	hdr.Set("X-Model-Version", strconv.FormatInt(resp.Backend.Version(), 10))
	hdr.Set("X-Version-Changed", strconv.FormatBool(changed))
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
	if ok2xx {
		elapsed := time.Since(start).Seconds()
		h.met.Latency.WithLabelValues("http").Observe(elapsed)
		h.met.TTFT.WithLabelValues("http").Observe(elapsed)
		h.countTokens(resp.Backend.ID(), out)
	}
}

// stream relays server-sent events as they come, flushing each read so the
// client sees every token when the backend sends it. The version stamp goes
// in a header (the version at the start) and trailers (at the end).
func (h *Handler) stream(ctx context.Context, w http.ResponseWriter, resp *gateway.Response, start time.Time) {
	hdr := w.Header()
	hdr.Set("X-Model-Version", strconv.FormatInt(resp.Backend.Version(), 10))
	hdr.Set("Trailer", "X-Model-Version-End, X-Version-Changed")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	// tail keeps the end of the stream, where the usage chunk comes when
	// the client asked for stream_options.include_usage.
	var tail []byte
	first := true
	var readErr error
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if first {
				first = false
				h.met.TTFT.WithLabelValues("http").Observe(time.Since(start).Seconds())
			}
			tail = append(tail, buf[:n]...)
			if len(tail) > 8<<10 {
				tail = append(tail[:0], tail[len(tail)-4<<10:]...)
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				readErr = werr
				break
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
	}
	if readErr != nil && ctx.Err() != nil {
		// The client went away mid-stream; the backend request is
		// cancelled with it.
		resp.FinishCanceled()
		return
	}
	errText := ""
	if readErr != nil {
		errText = readErr.Error()
	}
	changed := resp.Finish(readErr == nil, errText)
	hdr.Set("X-Model-Version-End", strconv.FormatInt(resp.Backend.Version(), 10))
	hdr.Set("X-Version-Changed", strconv.FormatBool(changed))
	if readErr == nil {
		h.met.Latency.WithLabelValues("http").Observe(time.Since(start).Seconds())
		h.countTokens(resp.Backend.ID(), tail)
	}
}

// readBody reads a request body of at most limit bytes, sized up front from
// Content-Length when the client sent one.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n) + 1)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

// usageKey finds the usage object, which servers put at the end of the
// answer: decoding from there avoids parsing a long answer (logprobs!) a
// second time just to count tokens.
var usageKey = []byte(`"usage":`)

func (h *Handler) countTokens(backendID string, body []byte) {
	i := bytes.LastIndex(body, usageKey)
	if i < 0 {
		return
	}
	u := gjson.GetManyBytes(body[i+len(usageKey):], "prompt_tokens", "completion_tokens")
	prompt, completion := u[0].Int(), u[1].Int()
	if prompt <= 0 && completion <= 0 {
		return
	}
	h.met.Tokens.WithLabelValues(backendID, "prompt").Add(float64(prompt))
	h.met.Tokens.WithLabelValues(backendID, "completion").Add(float64(completion))
}

// fail answers a routing error the way OpenAI-compatible servers do.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	var se *gateway.StatusError
	switch {
	case errors.As(err, &se):
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", se.Backend)
		w.WriteHeader(se.Code)
		w.Write(se.Body)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "no backend answered before the deadline", "", "timeout")
	case errors.Is(err, context.Canceled):
		// The client is gone; nobody reads this.
		w.WriteHeader(499)
	default:
		writeError(w, http.StatusServiceUnavailable, err.Error(), "", "service_unavailable")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b)
}

func writeError(w http.ResponseWriter, code int, msg, param, typ string) {
	writeJSON(w, code, openaiapi.ErrorBody{Error: openaiapi.ErrorDetail{Message: msg, Type: typ, Param: param, Code: typ}})
}
