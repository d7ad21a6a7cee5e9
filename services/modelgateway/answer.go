package modelgateway

import (
	"fmt"
	"math"

	"github.com/valyala/fastjson"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/jsonread"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// answerParsers reuse the parse trees of earlier answers.
var answerParsers fastjson.ParserPool

// chatAnswer converts a backend's non-streamed chat answer to the gRPC
// response. With logprobs an answer holds a record per token and per
// alternative, hundreds of kilobytes. encoding/json decoded those by
// reflection into go-openai based structs, which were then copied once
// more into protobuf messages. fastjson parses the text once, in a single
// pass (gjson, tried first, scans nested values again at every level), and
// each value goes straight into its protobuf field.
//
// Token ids come from vLLM's return_token_ids fields, else from logprob
// tokens spelt "token_id:N" (return_tokens_as_token_ids). A member of the
// wrong type is an error naming it; a repeated member overrides the earlier
// one, as with encoding/json.
func chatAnswer(raw []byte) (*rmv1.ChatResponse, error) {
	p := answerParsers.Get()
	defer answerParsers.Put(p)
	v, err := p.ParseBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("answer is not valid JSON: %w", err)
	}
	if v.Type() != fastjson.TypeObject {
		return nil, fmt.Errorf("answer is not a JSON object but %s", v.Type())
	}
	var d answerReader
	out := &rmv1.ChatResponse{}
	d.Visit(v, func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "id":
			out.Id = d.Str(v, "id")
		case "model":
			out.Model = d.Str(v, "model")
		case "prompt_token_ids":
			out.PromptTokenIds = d.ints(v, "prompt_token_ids")
		case "usage":
			out.Usage = d.usage(v)
		case "choices":
			out.Choices = nil
			for _, c := range d.Array(v, "choices") {
				out.Choices = append(out.Choices, d.choice(c))
			}
		}
	})
	if d.Err != nil {
		return nil, d.Err
	}
	return out, nil
}

// answerReader reads an answer's values and keeps the first type error.
type answerReader struct{ jsonread.Reader }

func (d *answerReader) int32(v *fastjson.Value, path string) int32 {
	n := d.Num(v, path)
	if n != math.Trunc(n) || n < math.MinInt32 || n > math.MaxInt32 {
		d.Fail(path, "a 32-bit integer", v)
		return 0
	}
	return int32(n)
}

func (d *answerReader) ints(v *fastjson.Value, path string) []int32 {
	a := d.Array(v, path)
	if len(a) == 0 {
		return nil
	}
	out := make([]int32, len(a))
	for i, e := range a {
		n, err := e.Int64() // exact, and cheaper than a float
		if err != nil {
			f, ferr := jsonread.ParseNumber(e) // 1.0, 1e2
			n = int64(f)
			if ferr != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
				n = math.MaxInt64
			}
		}
		if n < math.MinInt32 || n > math.MaxInt32 {
			d.Fail(path+"[]", "a 32-bit integer", e)
			return nil
		}
		out[i] = int32(n)
	}
	return out
}

func (d *answerReader) usage(v *fastjson.Value) *rmv1.Usage {
	if !d.Object(v, "usage") {
		return nil
	}
	u := &rmv1.Usage{}
	d.Visit(v, func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "prompt_tokens":
			u.PromptTokens = d.int32(v, "usage.prompt_tokens")
		case "completion_tokens":
			u.CompletionTokens = d.int32(v, "usage.completion_tokens")
		case "prompt_tokens_details":
			if d.Object(v, "usage.prompt_tokens_details") {
				u.CachedTokens = 0
				d.Visit(v, func(k []byte, v *fastjson.Value) {
					if string(k) == "cached_tokens" {
						u.CachedTokens = d.int32(v, "usage.prompt_tokens_details.cached_tokens")
					}
				})
			}
		}
	})
	return u
}

func (d *answerReader) choice(c *fastjson.Value) *rmv1.ChatChoice {
	if c.Type() != fastjson.TypeObject {
		d.Fail("choices[]", "an object", c)
		return nil
	}
	ch := &rmv1.ChatChoice{}
	msg := &rmv1.ChatMessage{}
	var (
		lps    *fastjson.Value
		allIDs bool // every logprob token was spelt "token_id:N"
	)
	d.Visit(c, func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "index":
			ch.Index = d.int32(v, "choices[].index")
		case "finish_reason":
			ch.FinishReason = d.Str(v, "choices[].finish_reason")
		case "token_ids":
			ch.TokenIds = d.ints(v, "choices[].token_ids")
		case "message":
			msg = &rmv1.ChatMessage{}
			if d.Object(v, "choices[].message") {
				msg = d.message(v)
			}
		case "logprobs":
			lps = nil
			if d.Object(v, "choices[].logprobs") {
				lps = v
			}
		}
	})
	if msg.Role == "" {
		msg.Role = "assistant"
	}
	ch.Message = msg
	if lps != nil {
		// After the members: a logprob's id may come from token_ids,
		// which can follow the logprobs.
		d.Visit(lps, func(k []byte, v *fastjson.Value) {
			if string(k) == "content" {
				ch.Logprobs, allIDs = d.logprobs(v, ch.TokenIds)
			}
		})
	}
	// Without token_ids, ids are taken from the tokens when every token
	// is spelt "token_id:N".
	if len(ch.TokenIds) == 0 && len(ch.Logprobs) > 0 && allIDs {
		ch.TokenIds = make([]int32, len(ch.Logprobs))
		for i, tl := range ch.Logprobs {
			ch.TokenIds[i] = tl.TokenId
		}
	}
	return ch
}

func (d *answerReader) message(m *fastjson.Value) *rmv1.ChatMessage {
	msg := &rmv1.ChatMessage{}
	d.Visit(m, func(k []byte, v *fastjson.Value) {
		switch string(k) {
		case "role":
			msg.Role = d.Str(v, "choices[].message.role")
		case "reasoning_content":
			msg.Reasoning = d.Str(v, "choices[].message.reasoning_content")
		case "content":
			msg.Content = nil
			// Answers carry text; of a list of parts, the text parts
			// are kept.
			if v.Type() == fastjson.TypeArray {
				for _, p := range d.Array(v, "choices[].message.content") {
					if t := d.Str(p.Get("text"), "choices[].message.content[].text"); t != "" {
						msg.Content = append(msg.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: t}})
					}
				}
			} else if t := d.Str(v, "choices[].message.content"); t != "" {
				msg.Content = append(msg.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: t}})
			}
		case "tool_calls":
			msg.ToolCalls = nil
			for _, tc := range d.Array(v, "choices[].message.tool_calls") {
				msg.ToolCalls = append(msg.ToolCalls, &rmv1.ToolCall{
					Id:            d.Str(tc.Get("id"), "choices[].message.tool_calls[].id"),
					Name:          d.Str(tc.Get("function", "name"), "choices[].message.tool_calls[].function.name"),
					ArgumentsJson: d.Str(tc.Get("function", "arguments"), "choices[].message.tool_calls[].function.arguments"),
				})
			}
		}
	})
	return msg
}

// logprobs reads a choice's per-token logprobs. A token's id comes from
// its token when spelt "token_id:N", else from ids when those match the
// logprobs one to one; allIDs reports whether every token named its id.
func (d *answerReader) logprobs(v *fastjson.Value, ids []int32) (out []*rmv1.TokenLogprob, allIDs bool) {
	a := d.Array(v, "choices[].logprobs.content")
	out = make([]*rmv1.TokenLogprob, 0, len(a))
	pair := len(ids) > 0 && len(ids) == len(a)
	allIDs = true
	for i, lp := range a {
		if lp.Type() != fastjson.TypeObject {
			// As the reference reads null: a token with nothing set.
			if lp.Type() != fastjson.TypeNull {
				d.Fail("choices[].logprobs.content[]", "an object", lp)
			}
			lp = nil
		}
		tl := &rmv1.TokenLogprob{TokenId: -1}
		if lp != nil {
			d.Visit(lp, func(k []byte, v *fastjson.Value) {
				switch string(k) {
				case "token":
					tl.Token = d.Str(v, "choices[].logprobs.content[].token")
				case "logprob":
					tl.Logprob = d.Num(v, "choices[].logprobs.content[].logprob")
				case "top_logprobs":
					tl.Top = d.top(v)
				}
			})
		}
		if id, ok := openaiapi.ParseTokenAsID(tl.Token); ok {
			tl.TokenId = int32(id)
		} else if pair {
			tl.TokenId = ids[i]
		} else {
			allIDs = false
		}
		out = append(out, tl)
	}
	return out, allIDs
}

func (d *answerReader) top(v *fastjson.Value) []*rmv1.TopLogprob {
	a := d.Array(v, "choices[].logprobs.content[].top_logprobs")
	if len(a) == 0 {
		return nil
	}
	out := make([]*rmv1.TopLogprob, 0, len(a))
	for _, t := range a {
		tt := &rmv1.TopLogprob{TokenId: -1}
		switch t.Type() {
		case fastjson.TypeObject:
			d.Visit(t, func(k []byte, v *fastjson.Value) {
				switch string(k) {
				case "token":
					tt.Token = d.Str(v, "choices[].logprobs.content[].top_logprobs[].token")
				case "logprob":
					tt.Logprob = d.Num(v, "choices[].logprobs.content[].top_logprobs[].logprob")
				}
			})
		case fastjson.TypeNull:
		default:
			d.Fail("choices[].logprobs.content[].top_logprobs[]", "an object", t)
		}
		if id, ok := openaiapi.ParseTokenAsID(tt.Token); ok {
			tt.TokenId = int32(id)
		}
		out = append(out, tt)
	}
	return out
}
