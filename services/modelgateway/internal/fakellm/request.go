package fakellm

import (
	"fmt"

	openai "github.com/sashabaranov/go-openai"
	"github.com/valyala/fastjson"

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
	o, err := v.Object()
	if err != nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	req := &openaiapi.ChatRequest{}
	d := decoder{}
	req.Model = d.str(o.Get("model"), "model")
	req.User = d.str(o.Get("user"), "user")
	req.Stream = d.bool(o.Get("stream"), "stream")
	if so := o.Get("stream_options"); so != nil && so.Type() != fastjson.TypeNull {
		if so.Type() != fastjson.TypeObject {
			d.fail("stream_options", "an object", so)
		} else {
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: d.bool(so.Get("include_usage"), "stream_options.include_usage")}
		}
	}
	req.N = d.int(o.Get("n"), "n")
	req.MaxTokens = d.int(o.Get("max_tokens"), "max_tokens")
	req.MaxCompletionTokens = d.int(o.Get("max_completion_tokens"), "max_completion_tokens")
	req.LogProbs = d.bool(o.Get("logprobs"), "logprobs")
	req.TopLogProbs = d.int(o.Get("top_logprobs"), "top_logprobs")
	req.ReturnTokenIDs = d.bool(o.Get("return_token_ids"), "return_token_ids")
	req.ReturnTokensAsTokenIDs = d.bool(o.Get("return_tokens_as_token_ids"), "return_tokens_as_token_ids")
	if ms := o.Get("messages"); ms != nil && ms.Type() != fastjson.TypeNull {
		arr, err := ms.Array()
		if err != nil {
			d.fail("messages", "an array", ms)
		}
		for i, m := range arr {
			req.Messages = append(req.Messages, d.message(m, fmt.Sprintf("messages[%d]", i)))
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return req, nil
}

// decoder keeps the first type error; later reads of a broken request
// return zero values.
type decoder struct{ err error }

func (d *decoder) fail(field, want string, v *fastjson.Value) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: want %s, got %s", field, want, v.Type())
	}
}

// absent reports a member that is missing or null, which OpenAI servers
// read as its default.
func absent(v *fastjson.Value) bool { return v == nil || v.Type() == fastjson.TypeNull }

func (d *decoder) str(v *fastjson.Value, field string) string {
	if absent(v) {
		return ""
	}
	b, err := v.StringBytes()
	if err != nil {
		d.fail(field, "a string", v)
		return ""
	}
	return string(b)
}

func (d *decoder) bool(v *fastjson.Value, field string) bool {
	if absent(v) {
		return false
	}
	b, err := v.Bool()
	if err != nil {
		d.fail(field, "true or false", v)
	}
	return b
}

func (d *decoder) int(v *fastjson.Value, field string) int {
	if absent(v) {
		return 0
	}
	n, err := v.Int() // refuses 2.0, as encoding/json does for an int
	if err != nil {
		d.fail(field, "an integer", v)
	}
	return n
}

func (d *decoder) message(v *fastjson.Value, field string) openai.ChatCompletionMessage {
	var m openai.ChatCompletionMessage
	o, err := v.Object()
	if err != nil {
		d.fail(field, "an object", v)
		return m
	}
	m.Role = d.str(o.Get("role"), field+".role")
	m.Name = d.str(o.Get("name"), field+".name")
	m.ToolCallID = d.str(o.Get("tool_call_id"), field+".tool_call_id")
	switch c := o.Get("content"); {
	case absent(c):
	case c.Type() == fastjson.TypeString:
		m.Content = d.str(c, field+".content")
	case c.Type() == fastjson.TypeArray:
		parts, _ := c.Array()
		for j, part := range parts {
			m.MultiContent = append(m.MultiContent, d.part(part, fmt.Sprintf("%s.content[%d]", field, j)))
		}
	default:
		d.fail(field+".content", "a string or an array of parts", c)
	}
	if tcs := o.Get("tool_calls"); !absent(tcs) {
		arr, err := tcs.Array()
		if err != nil {
			d.fail(field+".tool_calls", "an array", tcs)
		}
		for j, tc := range arr {
			f := fmt.Sprintf("%s.tool_calls[%d]", field, j)
			if tc.Type() != fastjson.TypeObject {
				d.fail(f, "an object", tc)
				continue
			}
			call := openai.ToolCall{
				ID:   d.str(tc.Get("id"), f+".id"),
				Type: openai.ToolType(d.str(tc.Get("type"), f+".type")),
			}
			if fn := tc.Get("function"); !absent(fn) {
				if fn.Type() != fastjson.TypeObject {
					d.fail(f+".function", "an object", fn)
				}
				call.Function.Name = d.str(fn.Get("name"), f+".function.name")
				call.Function.Arguments = d.str(fn.Get("arguments"), f+".function.arguments")
			}
			m.ToolCalls = append(m.ToolCalls, call)
		}
	}
	return m
}

func (d *decoder) part(v *fastjson.Value, field string) openai.ChatMessagePart {
	var p openai.ChatMessagePart
	if v.Type() != fastjson.TypeObject {
		d.fail(field, "an object", v)
		return p
	}
	p.Type = openai.ChatMessagePartType(d.str(v.Get("type"), field+".type"))
	p.Text = d.str(v.Get("text"), field+".text")
	if img := v.Get("image_url"); !absent(img) {
		if img.Type() != fastjson.TypeObject {
			d.fail(field+".image_url", "an object", img)
			return p
		}
		// The image counts as imageTokens placeholders; its data is not
		// kept. Its type is checked, as a server would.
		if u := img.Get("url"); !absent(u) && u.Type() != fastjson.TypeString {
			d.fail(field+".image_url.url", "a string", u)
		}
		p.ImageURL = &openai.ChatMessageImageURL{Detail: openai.ImageURLDetail(d.str(img.Get("detail"), field+".image_url.detail"))}
	}
	return p
}
