package fakellm

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// referenceChat decodes with encoding/json, as fakellm did before
// decodeChat, and drops what decodeChat does not keep (image data, members
// fakellm does not act on): the oracle of the tests below.
func referenceChat(t testing.TB, body string) *openaiapi.ChatRequest {
	t.Helper()
	var full openaiapi.ChatRequest
	if err := json.Unmarshal([]byte(body), &full); err != nil {
		t.Fatalf("reference decode: %v", err)
	}
	r := &openaiapi.ChatRequest{}
	r.Model, r.User, r.Stream, r.StreamOptions = full.Model, full.User, full.Stream, full.StreamOptions
	r.N, r.MaxTokens, r.MaxCompletionTokens = full.N, full.MaxTokens, full.MaxCompletionTokens
	r.LogProbs, r.TopLogProbs = full.LogProbs, full.TopLogProbs
	r.ReturnTokenIDs, r.ReturnTokensAsTokenIDs = full.ReturnTokenIDs, full.ReturnTokensAsTokenIDs
	if len(full.Messages) > 0 { // [] and no messages are the same request
		r.Messages = full.Messages
	}
	for i := range r.Messages {
		for j := range r.Messages[i].MultiContent {
			if img := r.Messages[i].MultiContent[j].ImageURL; img != nil {
				img.URL = ""
			}
		}
	}
	return r
}

func TestDecodeChatMatchesReference(t *testing.T) {
	screenshot := "data:image/png;base64," + strings.Repeat("iVBORw0K", 1000)
	tests := []struct{ name, body string }{
		{"minimal", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"all members fakellm reads", `{"model":"m","user":"ep-1","stream":true,"stream_options":{"include_usage":true},
			"n":2,"max_tokens":7,"max_completion_tokens":9,"logprobs":true,"top_logprobs":5,
			"return_token_ids":true,"return_tokens_as_token_ids":true,
			"temperature":0.5,"tools":[{"type":"function","function":{"name":"f"}}],"extra":{"deep":[1,2,{"x":null}]},
			"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"ls \u00e9\n"}]}`},
		{"parts with a screenshot", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is on screen?"},
			{"type":"image_url","image_url":{"url":"` + screenshot + `","detail":"low"}}]}]}`},
		{"tool round trip", `{"messages":[{"role":"user","content":"x"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"click","arguments":"{\"x\":1}"}}]},
			{"role":"tool","tool_call_id":"c1","name":"click","content":"done"}]}`},
		{"nulls read as defaults", `{"model":null,"user":null,"n":null,"stream_options":null,"messages":[{"role":"user","content":null,"tool_calls":null}]}`},
		{"escapes", `{"messages":[{"role":"user","content":"a\"b\\c\/d\u0041\ud83d\ude00"}]}`},
		{"no messages", `{"model":"m"}`},
		{"negative integers", `{"n":-1,"top_logprobs":-3,"messages":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeChat([]byte(tt.body))
			if err != nil {
				t.Fatalf("decodeChat: %v", err)
			}
			if want := referenceChat(t, tt.body); !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("got  %s\nwant %s", gj, wj)
			}
		})
	}
}

func TestDecodeChatErrors(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"not JSON", `{"messages":`, "not valid JSON"},
		{"not an object", `[1]`, "not a JSON object"},
		{"model a number", `{"model":1}`, "model: want a string, got number"},
		{"stream a string", `{"stream":"yes"}`, "stream: want true or false, got string"},
		{"n fractional", `{"n":2.5}`, "n: want an integer, got number"},
		{"max_tokens a string", `{"max_tokens":"7"}`, "max_tokens: want an integer, got string"},
		{"stream_options not an object", `{"stream_options":true}`, "stream_options: want an object, got true"},
		{"messages an object", `{"messages":{}}`, "messages: want an array, got object"},
		{"message a string", `{"messages":["hi"]}`, "messages[0]: want an object, got string"},
		{"content a number", `{"messages":[{"role":"user","content":1}]}`, "messages[0].content: want a string or an array of parts, got number"},
		{"part text a number", `{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`, "messages[0].content[0].text: want a string, got number"},
		{"image url a number", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":5}}]}]}`, "messages[0].content[0].image_url.url: want a string, got number"},
		{"tool call arguments an object", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.arguments: want a string, got object"},
		{"first error wins", `{"model":1,"user":2}`, "model: want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeChat([]byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("decodeChat(%s) = %v, want an error containing %q", tt.body, err, tt.want)
			}
		})
	}
}

// BenchmarkDecodeChat compares decodeChat with encoding/json on a turn
// with a 200 KB screenshot.
func BenchmarkDecodeChat(b *testing.B) {
	body := []byte(`{"model":"m","logprobs":true,"messages":[{"role":"system","content":"You are an agent."},` +
		`{"role":"user","content":[{"type":"text","text":"Open the terminal."},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("iVBORw0K", 200000/6) + `"}}]}]}`)
	b.Run("fastjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := decodeChat(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req openaiapi.ChatRequest
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecodeChat feeds what decodeChat accepts on through tokenizing and
// planning, as a request would go: no input may panic.
func FuzzDecodeChat(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`))
	f.Add([]byte(`{"n":2,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}},{"type":"text","text":"click"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":null}]}`))
	rules, err := ParseScript(strings.NewReader(`{"match": "click", "tool_calls": [{"name": "click", "arguments": {"x": 1}}]}`))
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{Script: rules})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := decodeChat(raw)
		if err != nil {
			return
		}
		if req == nil {
			t.Fatal("nil request without an error")
		}
		ids := PromptTokenIDs(req.Messages)
		if len(ids) == 0 || ids[len(ids)-1] != tokAssistant {
			t.Fatalf("prompt ids %v do not end with the generation prompt", ids)
		}
		s.plan(req)
	})
}
