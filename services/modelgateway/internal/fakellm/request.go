package fakellm

import (
	"fmt"

	openai "github.com/sashabaranov/go-openai"
	"github.com/valyala/fastjson"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/jsonread"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// requestParsers reuse parse trees across requests.
var requestParsers fastjson.ParserPool

// decodeChat reads the members of a chat request that fakellm acts on. It
// parses with fastjson rather than encoding/json: a turn with a screenshot
// is hundreds of kilobytes of base64, which encoding/json scanned several
// times over (go-openai decodes a message as text, then again as parts)
// and copied: 3.9 ms for 270 KB in BenchmarkDecodeChat against 10 µs here.
// That made fakellm the slowest part of a zero-latency benchmark with
// images.
// Image data is only counted, never copied. Members fakellm does not use
// are checked for JSON syntax only; members it uses must have their
// OpenAI type, and an error names the one that does not.
func decodeChat(body []byte) (*openaiapi.ChatRequest, error) {
	p := requestParsers.Get()
	defer requestParsers.Put(p)
	v, err := p.ParseBytes(body)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if v.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("not a JSON object")
	}
	req := &openaiapi.ChatRequest{}
	var d decoder
	req.Model = d.Str(v.Get("model"), "model")
	req.User = d.Str(v.Get("user"), "user")
	req.Stream = d.Bool(v.Get("stream"), "stream")
	if so := v.Get("stream_options"); d.Object(so, "stream_options") {
		req.StreamOptions = &openai.StreamOptions{IncludeUsage: d.Bool(so.Get("include_usage"), "stream_options.include_usage")}
	}
	req.N = d.Int(v.Get("n"), "n")
	req.MaxTokens = d.Int(v.Get("max_tokens"), "max_tokens")
	req.MaxCompletionTokens = d.Int(v.Get("max_completion_tokens"), "max_completion_tokens")
	req.LogProbs = d.Bool(v.Get("logprobs"), "logprobs")
	req.TopLogProbs = d.Int(v.Get("top_logprobs"), "top_logprobs")
	req.ReturnTokenIDs = d.Bool(v.Get("return_token_ids"), "return_token_ids")
	req.ReturnTokensAsTokenIDs = d.Bool(v.Get("return_tokens_as_token_ids"), "return_tokens_as_token_ids")
	for i, m := range d.Array(v.Get("messages"), "messages") {
		req.Messages = append(req.Messages, d.message(m, fmt.Sprintf("messages[%d]", i)))
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return req, nil
}

// decoder reads a request's values and keeps the first type error.
type decoder struct{ jsonread.Reader }

func (d *decoder) message(v *fastjson.Value, field string) openai.ChatCompletionMessage {
	var m openai.ChatCompletionMessage
	if v.Type() != fastjson.TypeObject {
		d.Fail(field, "an object", v)
		return m
	}
	m.Role = d.Str(v.Get("role"), field+".role")
	m.Name = d.Str(v.Get("name"), field+".name")
	m.ToolCallID = d.Str(v.Get("tool_call_id"), field+".tool_call_id")
	switch c := v.Get("content"); {
	case c == nil || c.Type() == fastjson.TypeNull:
	case c.Type() == fastjson.TypeString:
		m.Content = d.Str(c, field+".content")
	case c.Type() == fastjson.TypeArray:
		for j, part := range d.Array(c, field+".content") {
			m.MultiContent = append(m.MultiContent, d.part(part, fmt.Sprintf("%s.content[%d]", field, j)))
		}
	default:
		d.Fail(field+".content", "a string or an array of parts", c)
	}
	for j, tc := range d.Array(v.Get("tool_calls"), field+".tool_calls") {
		f := fmt.Sprintf("%s.tool_calls[%d]", field, j)
		if tc.Type() != fastjson.TypeObject {
			d.Fail(f, "an object", tc)
			continue
		}
		call := openai.ToolCall{
			ID:   d.Str(tc.Get("id"), f+".id"),
			Type: openai.ToolType(d.Str(tc.Get("type"), f+".type")),
		}
		if fn := tc.Get("function"); d.Object(fn, f+".function") {
			call.Function.Name = d.Str(fn.Get("name"), f+".function.name")
			call.Function.Arguments = d.Str(fn.Get("arguments"), f+".function.arguments")
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
	return m
}

func (d *decoder) part(v *fastjson.Value, field string) openai.ChatMessagePart {
	var p openai.ChatMessagePart
	if v.Type() != fastjson.TypeObject {
		d.Fail(field, "an object", v)
		return p
	}
	p.Type = openai.ChatMessagePartType(d.Str(v.Get("type"), field+".type"))
	p.Text = d.Str(v.Get("text"), field+".text")
	if img := v.Get("image_url"); d.Object(img, field+".image_url") {
		// The image counts as imageTokens placeholders; its data is not
		// kept. Its type is checked, as a server would, without d.Str,
		// which would copy the whole data URL.
		if u := img.Get("url"); u != nil && u.Type() != fastjson.TypeString && u.Type() != fastjson.TypeNull {
			d.Fail(field+".image_url.url", "a string", u)
		}
		p.ImageURL = &openai.ChatMessageImageURL{Detail: openai.ImageURLDetail(d.Str(img.Get("detail"), field+".image_url.detail"))}
	}
	return p
}
