package modelgateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// rlAnswer is an answer as vLLM gives RL training: n choices of tokens
// tokens each, with top-k logprobs, completion token ids and prompt ids.
func rlAnswer(n, tokens, top, promptIDs int, asIDs bool) []byte {
	r := openaiapi.ChatResponse{ID: "chatcmpl-1", Object: "chat.completion", Model: "m",
		Usage: &openaiapi.Usage{PromptTokens: promptIDs, CompletionTokens: n * tokens, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: promptIDs / 2}}}
	for i := range promptIDs {
		r.PromptTokenIDs = append(r.PromptTokenIDs, 1000+i)
	}
	for c := range n {
		ch := openaiapi.Choice{Index: c, FinishReason: "length", LogProbs: &openaiapi.LogProbs{}}
		var text strings.Builder
		for t := range tokens {
			id := 5000 + 7*t + c
			tok := fmt.Sprintf(" tok%d", t)
			if asIDs {
				tok = openaiapi.TokenAsID(id)
			} else {
				ch.TokenIDs = append(ch.TokenIDs, id)
			}
			text.WriteString(tok)
			lp := openaiapi.LogProb{Token: tok, LogProb: -0.125 * float64(t%9), Bytes: []int{32, 116}}
			for k := range top {
				alt := fmt.Sprintf(" alt%d", k)
				if asIDs {
					alt = openaiapi.TokenAsID(id + k + 1)
				}
				lp.TopLogProbs = append(lp.TopLogProbs, openaiapi.TopLogProb{Token: alt, LogProb: -1.5 - float64(k), Bytes: []int{32}})
			}
			ch.LogProbs.Content = append(ch.LogProbs.Content, lp)
		}
		ch.Message = openai.ChatCompletionMessage{Role: "assistant", Content: text.String()}
		r.Choices = append(r.Choices, ch)
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return b
}

// TestChatAnswerMatchesReference reads answers with chatAnswer and the old
// encoding/json route and wants equal messages.
func TestChatAnswerMatchesReference(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"rl answer with token ids", string(rlAnswer(2, 40, 3, 25, false))},
		{"rl answer spelt token_id:N", string(rlAnswer(1, 30, 2, 0, true))},
		{"plain text", `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`},
		{"tool calls, null content, reasoning", `{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"click","arguments":"{\"x\":1}"}},{"id":"c2","type":"function","function":{"name":"type","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`},
		{"no role", `{"choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"}]}`},
		{"null usage and logprobs", `{"choices":[{"index":0,"message":{"role":"assistant","content":"a"},"logprobs":null,"finish_reason":"stop"}],"usage":null}`},
		{"mixed tokens, no ids", `{"choices":[{"index":0,"message":{"content":"ab"},"logprobs":{"content":[{"token":"token_id:5","logprob":-1,"top_logprobs":[]},{"token":"b","logprob":-2,"top_logprobs":[]}]}}]}`},
		{"token ids not matching logprobs", `{"choices":[{"index":0,"message":{"content":"ab"},"token_ids":[1,2,3],"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[]},{"token":"b","logprob":-2,"top_logprobs":[]}]}}]}`},
		{"token_id:N tokens and token ids", `{"choices":[{"index":0,"message":{"content":"ab"},"token_ids":[8,9],"logprobs":{"content":[{"token":"token_id:5","logprob":-1,"top_logprobs":[]},{"token":"b","logprob":-2,"top_logprobs":[{"token":"token_id:7","logprob":-3}]}]}}]}`},
		{"no choices", `{"id":"x","choices":[]}`},
		{"unknown members", `{"id":"x","system_fingerprint":"fp","kv_transfer_params":null,"choices":[{"index":0,"stop_reason":null,"message":{"role":"assistant","content":"a","refusal":null},"finish_reason":"stop"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := referenceAnswer([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			got, err := chatAnswer([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("chatAnswer:\n got %v\nwant %v", got, want)
			}
		})
	}
}

func TestChatAnswerContentParts(t *testing.T) {
	got, err := chatAnswer([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, p := range got.GetChoices()[0].GetMessage().GetContent() {
		texts = append(texts, p.GetText())
	}
	if strings.Join(texts, "|") != "a|b" {
		t.Errorf("content parts = %q, want [a b]", texts)
	}
}

func TestChatAnswerErrors(t *testing.T) {
	tests := []struct {
		raw, want string
	}{
		{`{"choices":[`, "not valid JSON"},
		{`[1,2]`, "not a JSON object but array"},
		{`{"id":5}`, "id: want a string, got number"},
		{`{"choices":{}}`, "choices: want an array, got object"},
		{`{"choices":[7]}`, "choices[]: want an object, got number"},
		{`{"choices":[{"index":"0"}]}`, "choices[].index: want a number, got string"},
		{`{"choices":[{"index":1.5}]}`, "choices[].index: want a 32-bit integer"},
		{`{"choices":[{"token_ids":[1,"2"]}]}`, "choices[].token_ids[]: want a 32-bit integer, got string"},
		{`{"prompt_token_ids":[1,99999999999]}`, "prompt_token_ids[]: want a 32-bit integer"},
		{`{"choices":[{"logprobs":{"content":[{"token":"a","logprob":"x"}]}}]}`, "choices[].logprobs.content[].logprob: want a number"},
		{`{"choices":[{"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[{"token":1}]}]}}]}`, "choices[].logprobs.content[].top_logprobs[].token: want a string"},
		{`{"usage":7}`, "usage: want an object"},
		{`{"choices":[{"message":{"tool_calls":[{"function":{"name":["x"]}}]}}]}`, "choices[].message.tool_calls[].function.name: want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := chatAnswer([]byte(tt.raw))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("chatAnswer(%s) error = %v, want one containing %q", tt.raw, err, tt.want)
			}
		})
	}
}

// FuzzChatAnswer wants no panic on any input, and the reference's result
// wherever the reference reads the input, except where the two read JSON
// differently on purpose or by design (see comparable).
func FuzzChatAnswer(f *testing.F) {
	f.Add(rlAnswer(1, 3, 2, 2, false))
	f.Add(rlAnswer(1, 2, 1, 0, true))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := chatAnswer(raw)
		want, refErr := referenceAnswer(raw)
		if refErr != nil || err != nil || !comparable(raw) {
			return
		}
		if !proto.Equal(got, want) {
			t.Fatalf("chatAnswer(%s):\n got %v\nwant %v", raw, got, want)
		}
	})
}

// comparable reports whether the reference and chatAnswer should agree on
// raw. They differ where an object repeats a member name (encoding/json
// keeps the last, gjson the first), where a member name is not lower-case
// ASCII (encoding/json matches names case-insensitively; the wire format is
// lower case) and where a message's content is a list of parts (the
// reference dropped their text).
func comparable(raw []byte) bool {
	for _, c := range gjson.GetBytes(raw, "choices.#.message.content").Array() {
		if c.IsArray() {
			return false
		}
	}
	return !oddKeys(raw)
}

// oddKeys reports whether any object in the JSON text repeats a member
// name or has one that is not lower-case ASCII.
func oddKeys(raw []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	type frame struct {
		keys   map[string]bool
		object bool
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.expect {
			if top.keys[s] || !lowerASCII(s) {
				return true
			}
			top.keys[s] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a key comes next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}

// lowerASCII reports whether s has no upper-case letter and no non-ASCII
// byte (encoding/json folds 'ſ' to 's' and the Kelvin sign to 'k').
func lowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// BenchmarkChatAnswer reads a 256-token answer with top-5 logprobs,
// completion token ids and 2,000 prompt token ids, as RL training asks.
func BenchmarkChatAnswer(b *testing.B) {
	raw := rlAnswer(1, 256, 5, 2000, false)
	for _, bc := range []struct {
		name string
		f    func([]byte) (*rmv1.ChatResponse, error)
	}{{"chatAnswer", chatAnswer}, {"encoding-json+go-openai", referenceAnswer}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.f(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// referenceAnswer is how the gateway read answers before chatAnswer:
// encoding/json into go-openai based structs, then converted. It is the
// oracle chatAnswer must agree with.
func referenceAnswer(raw []byte) (*rmv1.ChatResponse, error) {
	var or openaiapi.ChatResponse
	if err := json.Unmarshal(raw, &or); err != nil {
		return nil, err
	}
	return fromOpenAI(&or), nil
}

func fromOpenAI(r *openaiapi.ChatResponse) *rmv1.ChatResponse {
	out := &rmv1.ChatResponse{Id: r.ID, Model: r.Model}
	for _, id := range r.PromptTokenIDs {
		out.PromptTokenIds = append(out.PromptTokenIds, int32(id))
	}
	if u := r.Usage; u != nil {
		out.Usage = &rmv1.Usage{PromptTokens: int32(u.PromptTokens), CompletionTokens: int32(u.CompletionTokens)}
		if u.PromptTokensDetails != nil {
			out.Usage.CachedTokens = int32(u.PromptTokensDetails.CachedTokens)
		}
	}
	for _, c := range r.Choices {
		msg := &rmv1.ChatMessage{Role: c.Message.Role, Reasoning: c.Message.ReasoningContent}
		if msg.Role == "" {
			msg.Role = openai.ChatMessageRoleAssistant
		}
		if c.Message.Content != "" {
			msg.Content = append(msg.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: c.Message.Content}})
		}
		for _, tc := range c.Message.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, &rmv1.ToolCall{Id: tc.ID, Name: tc.Function.Name, ArgumentsJson: tc.Function.Arguments})
		}
		ch := &rmv1.ChatChoice{Index: int32(c.Index), Message: msg, FinishReason: c.FinishReason}
		for _, id := range c.TokenIDs {
			ch.TokenIds = append(ch.TokenIds, int32(id))
		}
		var lps []openaiapi.LogProb
		if c.LogProbs != nil {
			lps = c.LogProbs.Content
		}
		idsFromTokens := len(ch.TokenIds) == 0 && len(lps) > 0
		for i, lp := range lps {
			tl := &rmv1.TokenLogprob{TokenId: -1, Token: lp.Token, Logprob: lp.LogProb}
			if id, ok := openaiapi.ParseTokenAsID(lp.Token); ok {
				tl.TokenId = int32(id)
			} else if len(c.TokenIDs) == len(lps) {
				tl.TokenId = int32(c.TokenIDs[i])
			} else {
				idsFromTokens = false
			}
			for _, t := range lp.TopLogProbs {
				tt := &rmv1.TopLogprob{TokenId: -1, Token: t.Token, Logprob: t.LogProb}
				if id, ok := openaiapi.ParseTokenAsID(t.Token); ok {
					tt.TokenId = int32(id)
				}
				tl.Top = append(tl.Top, tt)
			}
			ch.Logprobs = append(ch.Logprobs, tl)
		}
		if idsFromTokens {
			for _, tl := range ch.Logprobs {
				ch.TokenIds = append(ch.TokenIds, tl.TokenId)
			}
		}
		out.Choices = append(out.Choices, ch)
	}
	return out
}

func TestChatAnswerTokenIDs(t *testing.T) {
	tests := []struct {
		name    string
		choice  openaiapi.Choice
		wantIDs []int32
		wantLP0 int32
	}{
		{"token_ids field", openaiapi.Choice{TokenIDs: []int{7, 8},
			LogProbs: &openaiapi.LogProbs{Content: []openaiapi.LogProb{{Token: "a"}, {Token: "b"}}}}, []int32{7, 8}, 7},
		{"token_id:N tokens", openaiapi.Choice{
			LogProbs: &openaiapi.LogProbs{Content: []openaiapi.LogProb{{Token: "token_id:42"}, {Token: "token_id:43"}}}}, []int32{42, 43}, 42},
		{"no ids", openaiapi.Choice{
			LogProbs: &openaiapi.LogProbs{Content: []openaiapi.LogProb{{Token: "a"}}}}, nil, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := json.Marshal(openaiapi.ChatResponse{Choices: []openaiapi.Choice{tt.choice}})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := chatAnswer(raw)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.GetChoices()[0]
			if len(got.GetTokenIds()) != len(tt.wantIDs) {
				t.Fatalf("token ids = %v, want %v", got.GetTokenIds(), tt.wantIDs)
			}
			for i := range tt.wantIDs {
				if got.GetTokenIds()[i] != tt.wantIDs[i] {
					t.Errorf("token ids = %v, want %v", got.GetTokenIds(), tt.wantIDs)
				}
			}
			if lp := got.GetLogprobs()[0].GetTokenId(); lp != tt.wantLP0 {
				t.Errorf("logprobs[0].token_id = %d, want %d", lp, tt.wantLP0)
			}
		})
	}
}
