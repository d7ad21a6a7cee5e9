package modelgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/valyala/fastjson"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/reqcheck"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Bounds of what a ChatRequest lists; the rest are in reqcheck, shared with
// the HTTP front.
const (
	// maxTools bounds the tools a request offers, and the tool calls of
	// one message.
	maxTools = 128
	// maxIDBytes bounds a tool call id or a participant name.
	maxIDBytes = 256
	// maxSourceBytes bounds UpdateWeights.source, a path or URI.
	maxSourceBytes = 4096
)

// ValidateRequest checks requests before the handlers run; the error names
// the offending field. Errors quote at most a few dozen bytes of what the
// caller sent.
func (s *Service) ValidateRequest(_ string, req any) error {
	switch r := req.(type) {
	case *rmv1.ChatRequest:
		return s.validateChat(r)
	case *rmv1.UpdateWeightsRequest:
		if r.GetVersion() <= 0 || r.GetVersion() > MaxVersion {
			return daemon.InvalidField("version", "must be in [1, %d]", int64(MaxVersion))
		}
		if len(r.GetSource()) > maxSourceBytes {
			return daemon.InvalidField("source", "longer than %d bytes", maxSourceBytes)
		}
		switch r.GetStrategy() {
		case rmv1.UpdateStrategy_UPDATE_STRATEGY_UNSPECIFIED, rmv1.UpdateStrategy_UPDATE_STRATEGY_ALL_AT_ONCE, rmv1.UpdateStrategy_UPDATE_STRATEGY_ROLLING:
		default:
			return daemon.InvalidField("strategy", "%d is not a known strategy", r.GetStrategy())
		}
	}
	return nil
}

func (s *Service) validateChat(r *rmv1.ChatRequest) error {
	if _, err := s.g.ResolveModel(r.GetModel()); err != nil {
		// The model name is the id of what is asked for: unknown ids are
		// NotFound, as the HTTP front's 404 model_not_found.
		return status.Errorf(codes.NotFound, "model: %s is not served by this gateway (served: %s)",
			reqcheck.Quote(r.GetModel()), reqcheck.Clip(strings.Join(s.g.Models(), ", "), 256))
	}
	if len(r.GetMessages()) == 0 {
		return daemon.InvalidField("messages", "at least one message is required")
	}
	if len(r.GetMessages()) > s.limits.MaxMessages {
		return daemon.InvalidField("messages", "%d messages exceed the limit of %d", len(r.GetMessages()), s.limits.MaxMessages)
	}
	images := 0
	// Field names are formatted only for an error: most requests have
	// none, and formatting them cost more than the checks.
	msgField := func(i int) string { return fmt.Sprintf("messages[%d]", i) }
	partField := func(i, j int) string { return fmt.Sprintf("messages[%d].content[%d]", i, j) }
	for i, m := range r.GetMessages() {
		if !roleOK(m.GetRole()) {
			return daemon.InvalidField(msgField(i)+".role", "%s is not system, developer, user, assistant or tool", reqcheck.Quote(m.GetRole()))
		}
		if m.GetRole() == "tool" && m.GetToolCallId() == "" {
			return daemon.InvalidField(msgField(i)+".tool_call_id", "required for role tool")
		}
		if len(m.GetToolCallId()) > maxIDBytes {
			return daemon.InvalidField(msgField(i)+".tool_call_id", "longer than %d bytes", maxIDBytes)
		}
		if len(m.GetName()) > maxIDBytes {
			return daemon.InvalidField(msgField(i)+".name", "longer than %d bytes", maxIDBytes)
		}
		for j, p := range m.GetContent() {
			if p.GetPart() == nil {
				return daemon.InvalidField(partField(i, j), "empty part: set text or image")
			}
			if img := p.GetImage(); img != nil {
				if images++; images > s.limits.MaxImages {
					return daemon.InvalidField(partField(i, j)+".image", "more than %d images in the request", s.limits.MaxImages)
				}
				if fe := s.validateImage(img); fe != nil {
					fe.Field = partField(i, j) + ".image" + fe.Field
					return fe
				}
			}
		}
		if len(m.GetToolCalls()) > maxTools {
			return daemon.InvalidField(msgField(i)+".tool_calls", "at most %d tool calls", maxTools)
		}
		for j, tc := range m.GetToolCalls() {
			if !toolName.MatchString(tc.GetName()) {
				return daemon.InvalidField(fmt.Sprintf("messages[%d].tool_calls[%d].name", i, j), "must match [A-Za-z0-9_-]{1,64}")
			}
			if len(tc.GetId()) > maxIDBytes {
				return daemon.InvalidField(fmt.Sprintf("messages[%d].tool_calls[%d].id", i, j), "longer than %d bytes", maxIDBytes)
			}
		}
	}
	if len(r.GetTools()) > maxTools {
		return daemon.InvalidField("tools", "at most %d tools", maxTools)
	}
	names := map[string]bool{}
	for i, t := range r.GetTools() {
		if !toolName.MatchString(t.GetName()) {
			return daemon.InvalidField(fmt.Sprintf("tools[%d].name", i), "must match [A-Za-z0-9_-]{1,64}")
		}
		if t.GetParametersJson() != "" && !isJSONObject(t.GetParametersJson()) {
			return daemon.InvalidField(fmt.Sprintf("tools[%d].parameters_json", i), "must be a JSON object")
		}
		names[t.GetName()] = true
	}
	switch tc := r.GetToolChoice(); tc {
	case "", "auto", "none":
	case "required":
		if len(r.GetTools()) == 0 {
			return daemon.InvalidField("tool_choice", "required needs at least one tool")
		}
	default:
		if !names[tc] {
			return daemon.InvalidField("tool_choice", "%s names no tool in tools", reqcheck.Quote(tc))
		}
	}
	if err := validateSampling(r.GetSampling()); err != nil {
		return err
	}
	if r.GetTopLogprobs() < 0 || r.GetTopLogprobs() > reqcheck.MaxTopLogprobs {
		return daemon.InvalidField("top_logprobs", "must be in [0, %d]", reqcheck.MaxTopLogprobs)
	}
	if r.GetTopLogprobs() > 0 && !r.GetLogprobs() {
		return daemon.InvalidField("top_logprobs", "needs logprobs set")
	}
	if len(r.GetRoutingKey()) > reqcheck.MaxRoutingKey {
		return daemon.InvalidField("routing_key", "longer than %d bytes", reqcheck.MaxRoutingKey)
	}
	return validateExtraBody(r.GetExtraBodyJson())
}

// validateExtraBody checks extra_body_json: its members win over the
// request's own, so they get the same bounds, and may not replace what
// routing and the answer depend on (the model, the messages, a whole
// answer rather than a stream).
func validateExtraBody(extra string) error {
	if extra == "" {
		return nil
	}
	var p fastjson.Parser
	v, err := p.Parse(extra)
	if err != nil || v.Type() != fastjson.TypeObject || !isJSONObject(extra) {
		return daemon.InvalidField("extra_body_json", "must be a JSON object")
	}
	if path := reqcheck.Duplicate(v); path != "" {
		return daemon.InvalidField("extra_body_json."+path, "%s", reqcheck.DuplicateProblem)
	}
	for _, k := range []string{"model", "messages", "stream"} {
		if v.Exists(k) {
			return daemon.InvalidField("extra_body_json."+k, "set by the request itself, not by extra_body_json")
		}
	}
	if fe := reqcheck.Params(v, "extra_body_json."); fe != nil {
		return daemon.InvalidField(fe.Field, "%s", fe.Problem)
	}
	return nil
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

// validateImage checks an image part; the error's field is relative to the
// image (".url"; "" for the image itself), for the caller to prefix.
func (s *Service) validateImage(img *rmv1.Image) *daemon.FieldError {
	set := 0
	for _, ok := range []bool{len(img.GetData()) > 0, img.GetUrl() != "", img.GetBlob() != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return daemon.InvalidField("", "exactly one of data, url or blob must be set")
	}
	switch img.GetDetail() {
	case "", "auto", "low", "high":
	default:
		return daemon.InvalidField(".detail", "%s is not auto, low or high", reqcheck.Quote(img.GetDetail()))
	}
	if b := img.GetBlob(); b != nil {
		// A reference to an image an earlier request of this gateway
		// carried (its image cache); resolved or refused in the handler,
		// and its bytes were checked when they came.
		if !sha256Hex.MatchString(b.GetSha256()) {
			return daemon.InvalidField(".blob.sha256", "must be 64 lowercase hex digits (the SHA-256 of an image an earlier request sent)")
		}
		if len(b.GetData()) > 0 {
			return daemon.InvalidField(".blob.data", "must be empty: send an image's bytes in image.data")
		}
		switch img.GetMediaType() {
		case "", "image/png", "image/jpeg":
		default:
			return daemon.InvalidField(".media_type", "%s is not image/png or image/jpeg", reqcheck.Quote(img.GetMediaType()))
		}
		return nil
	}
	if u := img.GetUrl(); u != "" {
		if len(u) > s.limits.MaxImageBytes*4/3+64 {
			return daemon.InvalidField(".url", "longer than the %d-byte image limit allows", s.limits.MaxImageBytes)
		}
		switch {
		case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		case strings.HasPrefix(u, "data:"):
			if problem := reqcheck.DataURL([]byte(u), s.limits.MaxImageBytes); problem != "" {
				return daemon.InvalidField(".url", "%s", problem)
			}
		default:
			return daemon.InvalidField(".url", "must be an http(s) or data:image/ URL")
		}
		return nil
	}
	data := img.GetData()
	if len(data) > s.limits.MaxImageBytes {
		return daemon.InvalidField(".data", "%d bytes exceed the %d-byte image limit", len(data), s.limits.MaxImageBytes)
	}
	isPNG, isJPEG := bytes.HasPrefix(data, pngMagic), bytes.HasPrefix(data, jpegMagic)
	switch img.GetMediaType() {
	case "":
		if !isPNG && !isJPEG {
			return daemon.InvalidField(".data", "not a PNG or JPEG image")
		}
	case "image/png":
		if !isPNG {
			return daemon.InvalidField(".data", "media_type is image/png but the bytes are not a PNG")
		}
	case "image/jpeg":
		if !isJPEG {
			return daemon.InvalidField(".data", "media_type is image/jpeg but the bytes are not a JPEG")
		}
	default:
		return daemon.InvalidField(".media_type", "%s is not image/png or image/jpeg", reqcheck.Quote(img.GetMediaType()))
	}
	return nil
}

func validateSampling(sp *rmv1.SamplingParams) error {
	if sp == nil {
		return nil
	}
	// The range checks are written so that NaN fails them: JSON has no
	// NaN, and the body could not be written.
	if sp.Temperature != nil && !reqcheck.InRange(sp.GetTemperature(), 0, 2) {
		return daemon.InvalidField("sampling.temperature", "must be in [0, 2]")
	}
	if sp.TopP != nil && (!reqcheck.InRange(sp.GetTopP(), 0, 1) || sp.GetTopP() == 0) {
		return daemon.InvalidField("sampling.top_p", "must be in (0, 1]")
	}
	if sp.TopK != nil && (sp.GetTopK() < -1 || sp.GetTopK() > reqcheck.MaxTopK) {
		return daemon.InvalidField("sampling.top_k", "must be in [-1, %d] (-1 or 0: off)", reqcheck.MaxTopK)
	}
	if sp.MaxTokens != nil && (sp.GetMaxTokens() < 1 || sp.GetMaxTokens() > reqcheck.MaxTokens) {
		return daemon.InvalidField("sampling.max_tokens", "must be in [1, %d]", reqcheck.MaxTokens)
	}
	if len(sp.GetStop()) > reqcheck.MaxStop {
		return daemon.InvalidField("sampling.stop", "at most %d stop sequences", reqcheck.MaxStop)
	}
	for i, stop := range sp.GetStop() {
		if len(stop) > reqcheck.MaxStopBytes {
			return daemon.InvalidField(fmt.Sprintf("sampling.stop[%d]", i), "longer than %d bytes", reqcheck.MaxStopBytes)
		}
	}
	if sp.GetN() < 0 || sp.GetN() > reqcheck.MaxN {
		return daemon.InvalidField("sampling.n", "must be in [1, %d] (0: 1)", reqcheck.MaxN)
	}
	for _, p := range []struct {
		name string
		v    *float64
	}{{"sampling.presence_penalty", sp.PresencePenalty}, {"sampling.frequency_penalty", sp.FrequencyPenalty}} {
		if p.v != nil && !reqcheck.InRange(*p.v, -2, 2) {
			return daemon.InvalidField(p.name, "must be in [-2, 2]")
		}
	}
	return nil
}

// roleOK lists the roles OpenAI's chat format knows.
func roleOK(role string) bool {
	switch role {
	case "system", "developer", "user", "assistant", "tool":
		return true
	}
	return false
}

func isJSONObject(s string) bool {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return false
	}
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil
}
