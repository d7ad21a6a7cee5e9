// Package openaihttp is the gateway's OpenAI-compatible HTTP front:
// POST /v1/chat/completions (streamed and not) and GET /v1/models on the same
// routing as the gRPC front, so agent code written for OpenAI or vLLM works
// unchanged. Request bodies are checked and then passed through byte for
// byte, so every backend-specific field (return_token_ids, top_k, ...)
// reaches the backend and every field of the answer reaches the client.
//
// With a token set, every route but /health wants it as a bearer token:
// a request that reaches a backend spends the gateway's own API key there.
package openaihttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"
	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/backend"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/gateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/linger"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/metrics"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/reqcheck"
)

// Options bound requests.
type Options struct {
	// MaxRequestBytes bounds a request body; the server enforces it (see
	// ServeError).
	MaxRequestBytes int64
	// MaxImageBytes bounds one decoded image.
	MaxImageBytes int
	// MaxResponseBytes bounds an answer read from a backend: a
	// non-streamed one is refused over it, a stream cut at it.
	MaxResponseBytes int64
	// Timeout applies to requests (the HTTP API has no deadline header).
	Timeout time.Duration
	// MaxMessages bounds the messages of a request, MaxImages its images.
	MaxMessages, MaxImages int
	// AuthToken, when set, must arrive as "Authorization: Bearer TOKEN" on
	// every route but /health.
	AuthToken string
}

// Handler serves the OpenAI API as a fasthttp handler: net/http's server
// cost more CPU per request than routing does (a goroutine hand-off for
// its background read, header maps, per-request allocations).
type Handler struct {
	g     *gateway.Gateway
	front metrics.Front
	log   *zap.Logger
	opts  Options

	// watches watches the client connections of the requests in flight,
	// and Close ends them through it (at their backends too).
	watches watchList
	// served maps each served model name to itself, so that a request
	// naming one costs no string of its own.
	served map[string]string
	// onClose ends the requests in flight on the event-loop front.
	onClose func()
}

// New builds the handler.
func New(g *gateway.Gateway, met *metrics.Metrics, log *zap.Logger, opts Options) *Handler {
	h := &Handler{g: g, front: met.Front("http"), log: log, opts: opts, served: map[string]string{}}
	for _, m := range g.Models() {
		h.served[m] = m
	}
	return h
}

var (
	_ fasthttp.RequestHandler           = (*Handler)(nil).Serve
	_ func(*fasthttp.RequestCtx, error) = (*Handler)(nil).ServeError
)

// Serve serves the API.
func (h *Handler) Serve(rc *fasthttp.RequestCtx) { h.route(rc, h.chat) }

// route serves rc, handing chat completions to chat: the event-loop front
// has its own, which does not block.
func (h *Handler) route(rc *fasthttp.RequestCtx, chat func(*fasthttp.RequestCtx)) {
	path := string(rc.Path())
	// Before routing, so that an unknown path or a wrong method tells a
	// caller without the token nothing either.
	if path != "/health" && !h.authorized(&rc.Request.Header) {
		h.unauthorized(rc)
		return
	}
	var allow string
	switch path {
	case "/v1/chat/completions":
		if rc.IsPost() {
			chat(rc)
			return
		}
		allow = "POST"
	case "/v1/models":
		if rc.IsGet() || rc.IsHead() {
			h.models(rc)
			return
		}
		allow = "GET, HEAD"
	case "/health":
		if rc.IsGet() || rc.IsHead() {
			h.health(rc)
			return
		}
		allow = "GET, HEAD"
	default:
		writeError(rc, fasthttp.StatusNotFound, "no such endpoint: "+reqcheck.Quote(path), "", "not_found")
		return
	}
	rc.Response.Header.Set("Allow", allow)
	writeError(rc, fasthttp.StatusMethodNotAllowed, "method not allowed; use "+allow, "", "method_not_allowed")
}

// ServeError answers requests the server refused before Serve: bodies over
// MaxRequestBytes, malformed requests. A connection that timed out (most
// often one a client opened and never used) is closed without an answer,
// as net/http does: fasthttp would otherwise write an error response that
// such a client reads as unsolicited.
func (h *Handler) ServeError(rc *fasthttp.RequestCtx, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		rc.Conn().Close()
		return
	}
	// fasthttp closes the connection after this answer with the rest of
	// the request unread: drained, the client reads the answer instead of
	// a reset.
	linger.Drain(rc.Conn())
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		if !h.authorized(&rc.Request.Header) {
			// HeaderReceived cut its body short: it is the token that
			// is wrong, not the size.
			h.unauthorized(rc)
			return
		}
		writeError(rc, fasthttp.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", h.opts.MaxRequestBytes), "", "request_too_large")
		return
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		writeError(rc, fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large", "", "invalid_request")
		return
	}
	writeError(rc, fasthttp.StatusBadRequest, "read request: "+err.Error(), "", "invalid_request")
}

// Close ends the requests in flight, and those that come after.
func (h *Handler) Close() {
	h.watches.close()
	if h.onClose != nil {
		h.onClose()
	}
}

// unauthBodyBytes is all of a body the server reads from a request without
// the token: enough for any request that needs none, too little to make
// the gateway buffer megabytes for a caller it will refuse.
const unauthBodyBytes = 4 << 10

// HeaderReceived is the server's hook between a request's headers and its
// body (fasthttp.Server.HeaderReceived): a request without the token gets
// a body limit of unauthBodyBytes.
func (h *Handler) HeaderReceived(hdr *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.authorized(hdr) {
		return fasthttp.RequestConfig{}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: unauthBodyBytes}
}

// authorized reports whether the request carries the token, or none is
// needed. The comparison takes the same time wherever the first wrong
// byte is.
func (h *Handler) authorized(hdr *fasthttp.RequestHeader) bool {
	if h.opts.AuthToken == "" {
		return true
	}
	got, ok := bearer(hdr.Peek(fasthttp.HeaderAuthorization))
	return ok && subtle.ConstantTimeCompare(got, []byte(h.opts.AuthToken)) == 1
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" header;
// the scheme is case-insensitive (RFC 9110 §11.1).
func bearer(v []byte) ([]byte, bool) {
	const scheme = "bearer "
	if len(v) < len(scheme) || !bytes.EqualFold(v[:len(scheme)], []byte(scheme)) {
		return nil, false
	}
	return bytes.TrimSpace(v[len(scheme):]), true
}

// unauthorized answers 401 the way OpenAI does for a missing or wrong API
// key, with the challenge RFC 6750 asks for.
func (h *Handler) unauthorized(rc *fasthttp.RequestCtx) {
	rc.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="rolloutmesh"`)
	writeError(rc, fasthttp.StatusUnauthorized, "missing or invalid bearer token (Authorization: Bearer TOKEN)", "", "invalid_api_key")
}

func (h *Handler) health(rc *fasthttp.RequestCtx) {
	for _, b := range h.g.Backends() {
		if b.Healthy() {
			rc.SetStatusCode(fasthttp.StatusOK)
			return
		}
	}
	writeError(rc, fasthttp.StatusServiceUnavailable, "no healthy backend", "", "service_unavailable")
}

func (h *Handler) models(rc *fasthttp.RequestCtx) {
	list := openaiapi.ModelList{Object: "list", Data: []openaiapi.Model{}}
	for _, m := range h.g.Models() {
		list.Data = append(list.Data, openaiapi.Model{ID: m, Object: "model", OwnedBy: "rolloutmesh"})
	}
	writeJSON(rc, fasthttp.StatusOK, list)
}

// peek is the part of a request the gateway reads; the rest passes through.
type peek struct {
	Model  string
	User   string
	Stream bool
}

// requestParsers reuse parse trees and buffers across requests.
var requestParsers fastjson.ParserPool

// readRequest checks a request body and extracts what routing needs. It
// parses with fastjson, which reads the text in one pass and finds the end
// of a string with a byte search, so a screenshot of megabytes of base64 is
// skipped over quickly and never copied into a string of its own. (gjson,
// used before, scanned it again at every level of nesting: 8 ms for a
// 1.6 MB screenshot; encoding/json would decode and copy it.) The parser
// works on its own copy of the body, which passes on to the backend byte
// for byte. Syntax details the parser lets through (a control character
// inside a string) are the backend's to refuse.
func (h *Handler) readRequest(body []byte) (peek, *fieldError) {
	p := requestParsers.Get()
	defer requestParsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return peek{}, &fieldError{"body", "not valid JSON: " + parseProblem(err)}
	}
	if v.Type() != fastjson.TypeObject {
		return peek{}, &fieldError{"body", "not a JSON object"}
	}
	if path := reqcheck.Duplicate(v); path != "" {
		return peek{}, &fieldError{path, reqcheck.DuplicateProblem}
	}
	var pk peek
	switch m := v.Get("model"); {
	case m == nil || m.Type() == fastjson.TypeNull:
	case m.Type() == fastjson.TypeString:
		name := m.GetStringBytes()
		var ok bool
		if pk.Model, ok = h.served[string(name)]; !ok {
			pk.Model = string(name)
		}
	default:
		return peek{}, &fieldError{"model", "must be a string"}
	}
	pk.User = string(v.GetStringBytes("user"))
	pk.Stream = v.GetBool("stream")
	if fe := reqcheck.Params(v, ""); fe != nil {
		return pk, &fieldError{fe.Field, fe.Problem}
	}
	msgs := v.GetArray("messages")
	if len(msgs) == 0 {
		return pk, &fieldError{"messages", "at least one message is required"}
	}
	if h.opts.MaxMessages > 0 && len(msgs) > h.opts.MaxMessages {
		return pk, &fieldError{"messages", fmt.Sprintf("%d messages exceed the limit of %d", len(msgs), h.opts.MaxMessages)}
	}
	images := 0
	for i, m := range msgs {
		if fe := h.checkMessage(i, m, &images); fe != nil {
			return pk, fe
		}
	}
	return pk, nil
}

// parseProblem says briefly why a body is not JSON. fastjson wraps its
// error once per level of nesting, so that of a deeply nested body runs to
// kilobytes; neither it nor the body is worth echoing.
func parseProblem(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "too big depth") {
		return fmt.Sprintf("nested deeper than %d levels", fastjson.MaxDepth)
	}
	return reqcheck.Clip(msg, 160)
}

func (h *Handler) checkMessage(i int, m *fastjson.Value, images *int) *fieldError {
	if len(m.GetStringBytes("role")) == 0 {
		return &fieldError{fmt.Sprintf("messages[%d].role", i), "required"}
	}
	content := m.Get("content")
	if content == nil {
		return nil
	}
	switch content.Type() {
	case fastjson.TypeString, fastjson.TypeNull:
		return nil
	case fastjson.TypeArray:
	default:
		return &fieldError{fmt.Sprintf("messages[%d].content", i), "must be a string or an array of content parts"}
	}
	parts, _ := content.Array()
	// Field names are only formatted for an error: most parts are fine.
	pf := func(j int, rest string) string { return fmt.Sprintf("messages[%d].content[%d]%s", i, j, rest) }
	for j, part := range parts {
		if part.Exists("image_embeds") || string(part.GetStringBytes("type")) == "image_embeds" {
			// vLLM loads these as tensors from the caller's bytes: not
			// something to let any caller of the gateway do.
			return &fieldError{pf(j, ""), "image_embeds parts are not accepted; send the image"}
		}
		iu := part.Get("image_url")
		if iu == nil {
			continue
		}
		if *images++; h.opts.MaxImages > 0 && *images > h.opts.MaxImages {
			return &fieldError{pf(j, ""), fmt.Sprintf("more than %d images in the request", h.opts.MaxImages)}
		}
		// vLLM takes the URL bare as well as in OpenAI's object.
		field, u := ".image_url", iu
		if iu.Type() == fastjson.TypeObject {
			field, u = ".image_url.url", iu.Get("url")
			if u == nil {
				return &fieldError{pf(j, field), "required"}
			}
		}
		if problem := h.imageURLProblem(u); problem != "" {
			return &fieldError{pf(j, field), problem}
		}
	}
	return nil
}

// imageURLProblem says what is wrong with an image URL, or "".
func (h *Handler) imageURLProblem(u *fastjson.Value) string {
	if u.Type() != fastjson.TypeString {
		return "must be a string"
	}
	url := u.GetStringBytes()
	switch {
	case bytes.HasPrefix(url, []byte("data:")):
		return reqcheck.DataURL(url, h.opts.MaxImageBytes)
	case bytes.HasPrefix(url, []byte("http://")), bytes.HasPrefix(url, []byte("https://")):
		return ""
	}
	return "must be a data: or http(s) URL"
}

type fieldError struct{ field, problem string }

// routingKeyOfUser turns OpenAI's user member into a routing key. A long
// one is hashed rather than refused (OpenAI sets no limit on it): the
// sticky table keeps every key, so its length must be bounded.
func routingKeyOfUser(user string) string {
	if len(user) <= reqcheck.MaxRoutingKey {
		return user
	}
	sum := sha256.Sum256([]byte(user))
	return "user-sha256:" + hex.EncodeToString(sum[:])
}

// chatCall is a chat request checked and ready to route.
type chatCall struct {
	start  time.Time // the latency metrics and the deadline count the body's check too
	req    gateway.Request
	stream bool
}

// checkChat checks a chat request and makes its routing request; a bad
// one gets its error answer in rc, and false.
func (h *Handler) checkChat(rc *fasthttp.RequestCtx, cc *chatCall) bool {
	cc.start = time.Now()
	body := rc.PostBody() // valid until the answer is written; the backend call is done with it by then
	p, fe := h.readRequest(body)
	if fe != nil {
		writeError(rc, fasthttp.StatusBadRequest, fe.field+": "+fe.problem, fe.field, "invalid_request")
		return false
	}
	model, err := h.g.ResolveModel(p.Model)
	if err != nil {
		writeError(rc, fasthttp.StatusNotFound, "model: the model "+reqcheck.Quote(p.Model)+" is not served by this gateway", "model", "model_not_found")
		return false
	}
	if p.Model == "" {
		// Backends need a model name; this path is rare, so the re-encode
		// is acceptable.
		if body, err = openaiapi.MergeExtra(body, `{"model":`+strconv.Quote(model)+`}`); err != nil {
			writeError(rc, fasthttp.StatusBadRequest, err.Error(), "", "invalid_request")
			return false
		}
	}
	key := string(rc.Request.Header.Peek("X-Routing-Key"))
	if len(key) > reqcheck.MaxRoutingKey {
		writeError(rc, fasthttp.StatusBadRequest, fmt.Sprintf("X-Routing-Key: longer than %d bytes", reqcheck.MaxRoutingKey), "X-Routing-Key", "invalid_request")
		return false
	}
	if key == "" {
		key = routingKeyOfUser(p.User)
	}
	cc.req = gateway.Request{Model: model, RoutingKey: key, Body: body}
	cc.stream = p.Stream
	return true
}

func (h *Handler) chat(rc *fasthttp.RequestCtx) {
	var cc chatCall
	if !h.checkChat(rc, &cc) {
		return
	}
	// The request's context is its entry in the watch list, not one
	// derived from a context of the handler's: that one would keep every
	// request's in a map, under a lock all requests take. fasthttp does
	// not tell a handler that its client went away; the watch list does,
	// so that the backend stops generating for nobody.
	c := h.watches.begin(rc.Conn(), cc.start, h.opts.Timeout)
	var a gateway.Attempts
	h.relay(rc, &cc, c, &a)
}

// inflight is a request in flight as the front sees it: the context it is
// routed under, which the front ends when the client goes away or the
// deadline passes (cancel), and leave, called once when the answer is done
// with it.
type inflight interface {
	context.Context
	leave()
	cancel(error)
}

// relay routes a checked request from where a stands and puts the answer
// in rc: whole, or as a body stream for a streamed one.
func (h *Handler) relay(rc *fasthttp.RequestCtx, cc *chatCall, c inflight, a *gateway.Attempts) {
	streaming := false
	defer func() {
		if !streaming {
			c.leave()
		}
	}()
	resp, err := h.g.Resume(c, &cc.req, a)
	if err != nil {
		h.fail(rc, err)
		return
	}
	h.answerHead(rc, resp, resp.StatusCode, resp.ContentType())
	if cc.stream && resp.StatusCode/100 == 2 {
		streaming = true
		h.stream(rc, &sseStream{h: h, resp: resp, call: c, hdr: &rc.Response.Header, start: cc.start})
		return
	}
	out, err := gateway.ReadAnswer(resp, h.opts.MaxResponseBytes)
	if err != nil && c.Err() != nil {
		resp.FinishCanceled()
		h.fail(rc, c.Err())
		return
	}
	if err != nil {
		resp.Finish(false, err.Error())
		writeError(rc, fasthttp.StatusBadGateway, "backend "+resp.Backend.ID()+": read answer: "+err.Error(), "", "bad_gateway")
		return
	}
	h.answerBody(rc, resp, out, cc.start)
}

// answerHead starts the answer to a request a backend answered.
func (h *Handler) answerHead(rc *fasthttp.RequestCtx, resp *gateway.Response, status int, contentType []byte) {
	hdr := &rc.Response.Header
	if len(contentType) > 0 {
		hdr.SetContentTypeBytes(contentType)
	}
	var num [20]byte
	hdr.SetCanonical(headerBackend, []byte(resp.Backend.ID()))
	hdr.SetCanonical(headerAttempts, strconv.AppendInt(num[:0], int64(resp.Attempts), 10))
	rc.SetStatusCode(status)
}

// answerBody ends the answer to a request with the backend's answer read
// whole, out, and ends resp.
func (h *Handler) answerBody(rc *fasthttp.RequestCtx, resp *gateway.Response, out []byte, start time.Time) {
	hdr := &rc.Response.Header
	ok2xx := rc.Response.StatusCode()/100 == 2
	// out is the backend's buffer until Finish: copy it into the
	// response's (pooled) one first.
	rc.Response.SetBody(out)
	if ok2xx {
		h.countTokens(resp.Backend, out)
	}
	changed := resp.Finish(ok2xx, "")
	var num [20]byte
	hdr.SetCanonical(headerModelVersion, strconv.AppendInt(num[:0], resp.Backend.Version(), 10))
	hdr.SetCanonical(headerVersionChanged, strconv.AppendBool(num[:0], changed))
	if ok2xx {
		elapsed := time.Since(start).Seconds()
		h.front.Latency.Observe(elapsed)
		h.front.TTFT.Observe(elapsed)
	}
}

// Response headers of every answer read whole, named as fasthttp
// normalizes names: SetCanonical takes them as they are, where Set would
// normalize each name again on every request (both strip line breaks from
// values).
var (
	headerBackend        = []byte("X-Backend")
	headerAttempts       = []byte("X-Gateway-Attempts")
	headerModelVersion   = []byte("X-Model-Version")
	headerVersionChanged = []byte("X-Version-Changed")
)

// stream relays server-sent events as they come: fasthttp writes each
// read as one chunk and flushes it, so the client sees every token when
// the backend sends it. The version stamp goes in a header (the version at
// the start) and trailers (at the end).
func (h *Handler) stream(rc *fasthttp.RequestCtx, s *sseStream) {
	h.streamHeaders(s.hdr, s.resp)
	rc.SetBodyStream(s, -1)
}

// streamHeaders sets the headers of a streamed answer.
func (h *Handler) streamHeaders(hdr *fasthttp.ResponseHeader, resp *gateway.Response) {
	hdr.Set("X-Model-Version", strconv.FormatInt(resp.Backend.Version(), 10))
	hdr.Set("Cache-Control", "no-cache")
	if err := hdr.SetTrailer("X-Model-Version-End, X-Version-Changed"); err != nil {
		h.log.Error("declare trailers", zap.Error(err))
	}
}

// keepTail appends p to the end of a stream kept for its usage chunk,
// bounded to a few kilobytes.
func keepTail(tail, p []byte) []byte {
	tail = append(tail, p...)
	if len(tail) > 8<<10 {
		tail = append(tail[:0], tail[len(tail)-4<<10:]...)
	}
	return tail
}

// sseStream is the body of a streamed answer. fasthttp reads it after
// Serve returned, in the connection's goroutine, and closes it when done
// or when writing to the client failed.
type sseStream struct {
	h     *Handler
	resp  *gateway.Response
	call  inflight
	hdr   *fasthttp.ResponseHeader
	start time.Time
	got   bool
	done  bool
	// n counts the bytes relayed, which MaxResponseBytes bounds as it
	// bounds an answer read whole.
	n int64
	// tail keeps the end of the stream, where the usage chunk comes when
	// the client asked for stream_options.include_usage.
	tail []byte
}

var _ fasthttp.ReadCloserWithError = (*sseStream)(nil)

func (s *sseStream) Read(p []byte) (int, error) {
	if s.done {
		return 0, io.EOF
	}
	n, err := s.resp.Read(p)
	if s.n += int64(n); s.n > s.h.opts.MaxResponseBytes && s.h.opts.MaxResponseBytes > 0 {
		// The client gets what came so far, without [DONE], as when a
		// backend breaks off.
		s.end(fmt.Errorf("streamed answer exceeds the %d-byte limit", s.h.opts.MaxResponseBytes))
		return n, io.EOF
	}
	if n > 0 {
		if !s.got {
			s.got = true
			s.h.front.TTFT.Observe(time.Since(s.start).Seconds())
		}
		s.tail = keepTail(s.tail, p[:n])
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		s.end(nil)
		return n, io.EOF
	case s.call.Err() != nil:
		// The client went away or the request timed out: the error
		// aborts the answer, and CloseWithError records it.
		return n, err
	default:
		// The backend broke off: end the answer cleanly, with the
		// trailers; the client sees no [DONE].
		s.end(err)
		return n, io.EOF
	}
}

// end finishes a stream the backend ended, and sets the trailers, which
// fasthttp writes after the last chunk.
func (s *sseStream) end(readErr error) {
	s.done = true
	s.call.leave()
	errText := ""
	if readErr != nil {
		errText = readErr.Error()
	}
	changed := s.resp.Finish(readErr == nil, errText)
	s.hdr.Set("X-Model-Version-End", strconv.FormatInt(s.resp.Backend.Version(), 10))
	s.hdr.Set("X-Version-Changed", strconv.FormatBool(changed))
	if readErr == nil {
		s.h.front.Latency.Observe(time.Since(s.start).Seconds())
		s.h.countTokens(s.resp.Backend, s.tail)
	}
}

// CloseWithError ends a stream that did not reach its end: the client went
// away (writing failed) or the request was cancelled. The backend request
// is cancelled with it.
func (s *sseStream) CloseWithError(error) error {
	if s.done {
		return nil
	}
	s.done = true
	s.call.leave()
	s.call.cancel(context.Canceled)
	s.resp.FinishCanceled()
	return nil
}

// usageKey finds the usage object, which servers put at the end of the
// answer: decoding from there avoids parsing a long answer (logprobs!) a
// second time just to count tokens.
var usageKey = []byte(`"usage":`)

func (h *Handler) countTokens(b *backend.Backend, body []byte) {
	i := lastUsage(body)
	if i < 0 {
		return
	}
	prompt, completion := usageCounts(body[i+len(usageKey):])
	if prompt <= 0 && completion <= 0 {
		return
	}
	h.g.CountTokens(b, prompt, completion)
}

// usageScanners parse usage objects. A scanner parses the first JSON value
// of its input and leaves the rest (the end of the answer) alone, in one
// pass: gjson, used before, went over the object once per member looked
// up, and cost more than the rest of the answer's handling.
var usageScanners = sync.Pool{New: func() any { return new(fastjson.Scanner) }}

// usageCounts reads the token counts of the usage object that b starts
// with; 0 for what is missing or not an integer.
func usageCounts(b []byte) (prompt, completion int64) {
	sc := usageScanners.Get().(*fastjson.Scanner)
	defer usageScanners.Put(sc)
	sc.InitBytes(b)
	if !sc.Next() {
		return 0, 0
	}
	v := sc.Value()
	return v.GetInt64("prompt_tokens"), v.GetInt64("completion_tokens")
}

// usageTail is how far from the end of an answer lastUsage looks first:
// servers write usage last, in well under this.
const usageTail = 512

// lastUsage is bytes.LastIndex(body, usageKey) at a fraction of its cost.
// LastIndex hashes every byte it passes (Rabin-Karp); bytes.Index, used
// before, stops at every quote of the answer's JSON to compare the key
// there. lastUsage looks for the key's u, rarer in an answer, with vector
// instructions (bytes.IndexByte), in the tail first; the rest of the body
// is searched only when the tail has no key.
func lastUsage(body []byte) int {
	from := max(0, len(body)-usageTail)
	last := -1
	for i := from; ; {
		j := bytes.IndexByte(body[i:], 'u')
		if j < 0 {
			break
		}
		// The key's quote is before its u, maybe just before the tail.
		if k := i + j - 1; k >= 0 && bytes.HasPrefix(body[k:], usageKey) {
			last = k
		}
		i += j + 1
	}
	if last >= 0 || from == 0 {
		return last
	}
	// The key may straddle the cut: search up to its end.
	return bytes.LastIndex(body[:from+len(usageKey)-1], usageKey)
}

// fail answers a routing error the way OpenAI-compatible servers do.
func (h *Handler) fail(rc *fasthttp.RequestCtx, err error) {
	var se *gateway.StatusError
	switch {
	case errors.As(err, &se):
		rc.Response.Header.SetContentType("application/json")
		rc.Response.Header.Set("X-Backend", se.Backend)
		rc.SetStatusCode(se.Code)
		rc.SetBody(se.Body)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(rc, fasthttp.StatusGatewayTimeout, "no backend answered before the deadline", "", "timeout")
	case errors.Is(err, context.Canceled):
		// The client is gone; nobody reads this.
		rc.SetStatusCode(499)
	default:
		writeError(rc, fasthttp.StatusServiceUnavailable, err.Error(), "", "service_unavailable")
	}
}

func writeJSON(rc *fasthttp.RequestCtx, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		rc.Error("encode answer", fasthttp.StatusInternalServerError)
		return
	}
	rc.Response.Header.SetContentType("application/json")
	rc.SetStatusCode(code)
	rc.Response.SetBodyRaw(b)
}

// maxErrorMessage bounds the message of an error the front writes: it may
// quote a caller's input or a library's error, neither of which should
// make an answer of kilobytes.
const maxErrorMessage = 512

func writeError(rc *fasthttp.RequestCtx, code int, msg, param, typ string) {
	writeJSON(rc, code, openaiapi.ErrorBody{Error: openaiapi.ErrorDetail{
		Message: reqcheck.Clip(msg, maxErrorMessage), Type: typ, Param: reqcheck.Clip(param, maxErrorMessage), Code: typ,
	}})
}
