package modelgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// maxRoutingKey bounds a routing key (it is kept in the sticky LRU).
const maxRoutingKey = 256

// ValidateRequest checks requests before the handlers run; the error names
// the offending field.
func (s *Service) ValidateRequest(_ string, req any) error {
	switch r := req.(type) {
	case *rmv1.ChatRequest:
		return s.validateChat(r)
	case *rmv1.UpdateWeightsRequest:
		if r.GetVersion() <= 0 {
			return daemon.InvalidField("version", "must be > 0")
		}
		if len(r.GetSource()) > 4096 {
			return daemon.InvalidField("source", "longer than 4096 bytes")
		}
	}
	return nil
}

func (s *Service) validateChat(r *rmv1.ChatRequest) error {
	if _, err := s.g.ResolveModel(r.GetModel()); err != nil {
		return daemon.InvalidField("model", "%q is not served by this gateway (served: %s)", r.GetModel(), strings.Join(s.g.Models(), ", "))
	}
	if len(r.GetMessages()) == 0 {
		return daemon.InvalidField("messages", "at least one message is required")
	}
	if len(r.GetMessages()) > s.limits.MaxMessages {
		return daemon.InvalidField("messages", "%d messages exceed the limit of %d", len(r.GetMessages()), s.limits.MaxMessages)
	}
	for i, m := range r.GetMessages() {
		f := fmt.Sprintf("messages[%d]", i)
		if !roleOK(m.GetRole()) {
			return daemon.InvalidField(f+".role", "%q is not system, developer, user, assistant or tool", m.GetRole())
		}
		if m.GetRole() == "tool" && m.GetToolCallId() == "" {
			return daemon.InvalidField(f+".tool_call_id", "required for role tool")
		}
		for j, p := range m.GetContent() {
			pf := fmt.Sprintf("%s.content[%d]", f, j)
			if p.GetPart() == nil {
				return daemon.InvalidField(pf, "empty part: set text or image")
			}
			if img := p.GetImage(); img != nil {
				if err := s.validateImage(pf+".image", img); err != nil {
					return err
				}
			}
		}
		for j, tc := range m.GetToolCalls() {
			if !toolName.MatchString(tc.GetName()) {
				return daemon.InvalidField(fmt.Sprintf("%s.tool_calls[%d].name", f, j), "must match [A-Za-z0-9_-]{1,64}")
			}
		}
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
			return daemon.InvalidField("tool_choice", "%q names no tool in tools", tc)
		}
	}
	if err := validateSampling(r.GetSampling()); err != nil {
		return err
	}
	if r.GetTopLogprobs() < 0 || r.GetTopLogprobs() > 20 {
		return daemon.InvalidField("top_logprobs", "must be in [0, 20]")
	}
	if r.GetTopLogprobs() > 0 && !r.GetLogprobs() {
		return daemon.InvalidField("top_logprobs", "needs logprobs set")
	}
	if len(r.GetRoutingKey()) > maxRoutingKey {
		return daemon.InvalidField("routing_key", "longer than %d bytes", maxRoutingKey)
	}
	if r.GetExtraBodyJson() != "" && !isJSONObject(r.GetExtraBodyJson()) {
		return daemon.InvalidField("extra_body_json", "must be a JSON object")
	}
	return nil
}

var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
)

func (s *Service) validateImage(f string, img *rmv1.Image) error {
	set := 0
	for _, ok := range []bool{len(img.GetData()) > 0, img.GetUrl() != "", img.GetBlob() != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return daemon.InvalidField(f, "exactly one of data, url or blob must be set")
	}
	if img.GetBlob() != nil {
		return daemon.InvalidField(f+".blob", "the gateway cannot fetch stored blobs; send the bytes in data")
	}
	switch img.GetDetail() {
	case "", "auto", "low", "high":
	default:
		return daemon.InvalidField(f+".detail", "%q is not auto, low or high", img.GetDetail())
	}
	if u := img.GetUrl(); u != "" {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "data:image/") {
			return daemon.InvalidField(f+".url", "must be an http(s) or data:image/ URL")
		}
		if len(u) > s.limits.MaxImageBytes*4/3+64 {
			return daemon.InvalidField(f+".url", "longer than the %d-byte image limit allows", s.limits.MaxImageBytes)
		}
		return nil
	}
	data := img.GetData()
	if len(data) > s.limits.MaxImageBytes {
		return daemon.InvalidField(f+".data", "%d bytes exceed the %d-byte image limit", len(data), s.limits.MaxImageBytes)
	}
	isPNG, isJPEG := bytes.HasPrefix(data, pngMagic), bytes.HasPrefix(data, jpegMagic)
	switch img.GetMediaType() {
	case "":
		if !isPNG && !isJPEG {
			return daemon.InvalidField(f+".data", "not a PNG or JPEG image")
		}
	case "image/png":
		if !isPNG {
			return daemon.InvalidField(f+".data", "media_type is image/png but the bytes are not a PNG")
		}
	case "image/jpeg":
		if !isJPEG {
			return daemon.InvalidField(f+".data", "media_type is image/jpeg but the bytes are not a JPEG")
		}
	default:
		return daemon.InvalidField(f+".media_type", "%q is not image/png or image/jpeg", img.GetMediaType())
	}
	return nil
}

func validateSampling(sp *rmv1.SamplingParams) error {
	if sp == nil {
		return nil
	}
	if sp.Temperature != nil && (sp.GetTemperature() < 0 || sp.GetTemperature() > 2) {
		return daemon.InvalidField("sampling.temperature", "must be in [0, 2]")
	}
	if sp.TopP != nil && (sp.GetTopP() <= 0 || sp.GetTopP() > 1) {
		return daemon.InvalidField("sampling.top_p", "must be in (0, 1]")
	}
	if sp.TopK != nil && sp.GetTopK() < -1 {
		return daemon.InvalidField("sampling.top_k", "must be -1 (off) or >= 1")
	}
	if sp.MaxTokens != nil && sp.GetMaxTokens() < 1 {
		return daemon.InvalidField("sampling.max_tokens", "must be >= 1")
	}
	if len(sp.GetStop()) > 8 {
		return daemon.InvalidField("sampling.stop", "at most 8 stop sequences")
	}
	if sp.GetN() < 0 || sp.GetN() > 16 {
		return daemon.InvalidField("sampling.n", "must be in [1, 16]")
	}
	for name, v := range map[string]*float64{"sampling.presence_penalty": sp.PresencePenalty, "sampling.frequency_penalty": sp.FrequencyPenalty} {
		if v != nil && (*v < -2 || *v > 2) {
			return daemon.InvalidField(name, "must be in [-2, 2]")
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
