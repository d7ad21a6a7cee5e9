package modelgateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/jsonread"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

func textPart(s string) *rmv1.ContentPart {
	return &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: s}}
}

func imagePart(data []byte, mediaType, detail string) *rmv1.ContentPart {
	return &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: data, MediaType: mediaType, Detail: detail}}}
}

var png8 = []byte("\x89PNG\r\n\x1a\nxxxx")

// TestChatBodyMatchesReference decodes the bodies chatBody and the old
// go-openai route write for the same requests and wants the same members
// with the same values.
func TestChatBodyMatchesReference(t *testing.T) {
	zero, tenth, k, seed := 0.0, 0.1, int32(5), int64(-7)
	tests := []struct {
		name string
		req  *rmv1.ChatRequest
	}{
		{"one text message", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{textPart("hi")}}}}},
		{"text needing escapes", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{
			textPart("quote \" backslash \\ tab \t nl \n cr \r ctl \x01\x1f del \x7f <b>&amp; \u2028\u2029 é 日本 🎉")}}}}},
		{"no content, empty text", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
			{Role: "user"}, {Role: "user", Content: []*rmv1.ContentPart{textPart("")}}}}},
		{"text and images", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Name: "bob", Content: []*rmv1.ContentPart{
			textPart("look"), imagePart(png8, "", "high"), imagePart([]byte("\xff\xd8\xffjpeg"), "image/jpeg", ""),
			{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Url: "https://example.com/a.png?x=1&y=\"2\""}}},
		}}}}},
		{"image alone", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{imagePart(png8, "image/png", "low")}}}}},
		{"tool calls and results", &rmv1.ChatRequest{
			Messages: []*rmv1.ChatMessage{
				{Role: "assistant", ToolCalls: []*rmv1.ToolCall{{Id: "c1", Name: "click", ArgumentsJson: `{"x": 1, "s": "a\"b"}`}, {Id: "c2", Name: "type"}}},
				{Role: "tool", ToolCallId: "c1", Content: []*rmv1.ContentPart{textPart("ok")}},
			},
			Tools: []*rmv1.Tool{
				{Name: "click", Description: "Click \"here\"", ParametersJson: `{"type": "object", "properties": {"x": {"type": "integer"}}}`},
				{Name: "type", ParametersJson: `{}`},
			},
			ToolChoice: "click",
		}},
		{"tool choice keyword", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{textPart("x")}}},
			Tools: []*rmv1.Tool{{Name: "a", ParametersJson: `{}`}}, ToolChoice: "required"}},
		{"every sampling parameter", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{textPart("x")}}},
			Sampling: &rmv1.SamplingParams{Temperature: &zero, TopP: &tenth, TopK: &k, MaxTokens: new(int32(16)), Stop: []string{"END", "\n\n"},
				Seed: &seed, N: 3, PresencePenalty: new(-1.5), FrequencyPenalty: new(1e-7)},
			Logprobs: true, TopLogprobs: 5, ReturnTokenIds: true}},
		{"n of one, logprobs without top", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{textPart("x")}}},
			Sampling: &rmv1.SamplingParams{N: 1}, Logprobs: true}},
		{"extra body overrides and adds", &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user", Content: []*rmv1.ContentPart{textPart("x")}}},
			Sampling:      &rmv1.SamplingParams{TopK: &k, MaxTokens: new(int32(16))},
			ExtraBodyJson: `{"top_k": 9, "chat_template_kwargs": {"enable_thinking": false}, "stream": false, "messages": [{"role": "user", "content": "replaced"}]}`}},
	}
	for _, tt := range tests {
		for _, forOpenAI := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				got, err := chatBody(tt.req, "m", forOpenAI)
				if err != nil {
					t.Fatal(err)
				}
				want, err := referenceBody(tt.req, "m", forOpenAI)
				if err != nil {
					t.Fatal(err)
				}
				var g, w map[string]any
				if err := json.Unmarshal(got, &g); err != nil {
					t.Fatalf("chatBody wrote invalid JSON: %v\n%s", err, got)
				}
				if err := json.Unmarshal(want, &w); err != nil {
					t.Fatal(err)
				}
				// The old route wrote "parameters": null for a tool
				// without parameters; chatBody leaves the member out.
				if tools, ok := w["tools"].([]any); ok {
					for _, tl := range tools {
						fn := tl.(map[string]any)["function"].(map[string]any)
						if fn["parameters"] == nil {
							delete(fn, "parameters")
						}
					}
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("forOpenAI=%v:\n got %s\nwant %s", forOpenAI, got, want)
				}
			})
		}
	}
}

func TestChatBodyRefusesNonNumbers(t *testing.T) {
	nan := 0.0
	nan /= nan
	req := &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{{Role: "user"}}, Sampling: &rmv1.SamplingParams{TopP: &nan}}
	if _, err := chatBody(req, "m", false); err == nil || !strings.Contains(err.Error(), "sampling.top_p") {
		t.Errorf("err = %v, want one naming sampling.top_p", err)
	}
}

// FuzzAppendEscaped wants every string to come back from a JSON decoder as
// itself, invalid UTF-8 turned into U+FFFD.
func FuzzAppendEscaped(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n\r\t\x00\x1f\x7f", "é日🎉", "\u2028\u2029", "\xff\xfe", "a\xc3", "<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: invalid JSON: %v", s, b, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want && !utf8.ValidString(s) {
			// Each invalid byte becomes its own U+FFFD, where
			// ToValidUTF8 merges runs: compare with a byte-wise decode.
			if want = jsonread.ValidUTF8(s); got != want {
				t.Fatalf("round trip of %q = %q, want %q", s, got, want)
			}
		} else if got != want {
			t.Fatalf("round trip of %q = %q, want %q", s, got, want)
		}
	})
}

// BenchmarkChatBody compares the two routes on an agent turn: a system
// prompt, a few turns of text, and one 1 MB screenshot, with and without
// extra_body_json.
func BenchmarkChatBody(b *testing.B) {
	shot := append(bytes.Clone(png8), bytes.Repeat([]byte{0x5a, 0x00, 0xff}, 1<<20/3)...)
	req := &rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{
			{Role: "system", Content: []*rmv1.ContentPart{textPart(strings.Repeat("You are a computer-use agent. ", 40))}},
			{Role: "user", Content: []*rmv1.ContentPart{textPart("Open the terminal."), imagePart(shot, "image/png", "")}},
			{Role: "assistant", Content: []*rmv1.ContentPart{textPart("pyautogui.click(10, 20)")}},
		},
		Sampling:      &rmv1.SamplingParams{Temperature: new(0.7), MaxTokens: new(int32(512))},
		Logprobs:      true,
		ExtraBodyJson: `{"chat_template_kwargs": {"enable_thinking": false}}`,
	}
	plain := proto.CloneOf(req)
	plain.ExtraBodyJson = ""
	for _, r := range []struct {
		name string
		req  *rmv1.ChatRequest
	}{{"extra", req}, {"no-extra", plain}} {
		for _, bc := range []struct {
			name string
			f    func(*rmv1.ChatRequest, string, bool) ([]byte, error)
		}{{"chatBody", chatBody}, {"go-openai+encoding-json", referenceBody}} {
			b.Run(r.name+"/"+bc.name, func(b *testing.B) {
				b.SetBytes(int64(len(shot)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := bc.f(r.req, "m", false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// referenceBody is the body as the gateway built it before chatBody: from
// go-openai's types through encoding/json, then extra_body_json merged. It
// is the oracle chatBody must agree with, member for member.
func referenceBody(req *rmv1.ChatRequest, model string, forOpenAI bool) ([]byte, error) {
	or, err := toOpenAI(req, model, forOpenAI)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(or)
	if err != nil {
		return nil, err
	}
	return openaiapi.MergeExtra(body, req.GetExtraBodyJson())
}

func toOpenAI(req *rmv1.ChatRequest, model string, forOpenAI bool) (*openaiapi.ChatRequest, error) {
	out := &openaiapi.ChatRequest{}
	out.Model = model
	for _, m := range req.GetMessages() {
		om := openai.ChatCompletionMessage{Role: m.GetRole(), Name: m.GetName(), ToolCallID: m.GetToolCallId()}
		parts := m.GetContent()
		if len(parts) == 1 && parts[0].GetImage() == nil {
			om.Content = parts[0].GetText()
		} else {
			for _, p := range parts {
				img := p.GetImage()
				if img == nil {
					om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.GetText()})
					continue
				}
				om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{
					Type:     openai.ChatMessagePartTypeImageURL,
					ImageURL: &openai.ChatMessageImageURL{URL: imageURL(img), Detail: openai.ImageURLDetail(img.GetDetail())},
				})
			}
		}
		for _, tc := range m.GetToolCalls() {
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID: tc.GetId(), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.GetName(), Arguments: tc.GetArgumentsJson()},
			})
		}
		out.Messages = append(out.Messages, om)
	}
	for _, t := range req.GetTools() {
		fd := &openai.FunctionDefinition{Name: t.GetName(), Description: t.GetDescription()}
		if t.GetParametersJson() != "" {
			fd.Parameters = json.RawMessage(t.GetParametersJson())
		}
		out.Tools = append(out.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: fd})
	}
	switch tc := req.GetToolChoice(); tc {
	case "":
	case "auto", "none", "required":
		out.ToolChoice = tc
	default:
		out.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: tc}}
	}
	if sp := req.GetSampling(); sp != nil {
		out.Temperature = sp.Temperature
		out.TopP = sp.TopP
		out.PresencePenalty = sp.PresencePenalty
		out.FrequencyPenalty = sp.FrequencyPenalty
		out.Seed = sp.Seed
		if sp.MaxTokens != nil {
			out.MaxTokens = int(sp.GetMaxTokens())
		}
		out.Stop = sp.GetStop()
		if sp.GetN() > 1 {
			out.N = int(sp.GetN())
		}
		if sp.TopK != nil && !forOpenAI {
			k := int(sp.GetTopK())
			out.TopK = &k
		}
	}
	out.LogProbs = req.GetLogprobs()
	if req.GetLogprobs() {
		out.TopLogProbs = int(req.GetTopLogprobs())
	}
	if !forOpenAI {
		out.ReturnTokenIDs = req.GetReturnTokenIds()
	}
	return out, nil
}

func imageURL(img *rmv1.Image) string {
	if img.GetUrl() != "" {
		return img.GetUrl()
	}
	mt := img.GetMediaType()
	if mt == "" {
		mt = http.DetectContentType(img.GetData())
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(img.GetData())
}

func TestChatBodyFields(t *testing.T) {
	zero, k := 0.0, int32(5)
	req := &rmv1.ChatRequest{
		Messages: []*rmv1.ChatMessage{
			{Role: "user", Content: []*rmv1.ContentPart{
				{Part: &rmv1.ContentPart_Text{Text: "look"}},
				{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: []byte("\x89PNG\r\n\x1a\nxx"), MediaType: "image/png", Detail: "low"}}},
			}},
			{Role: "assistant", ToolCalls: []*rmv1.ToolCall{{Id: "c1", Name: "click", ArgumentsJson: `{"x":1}`}}},
			{Role: "tool", ToolCallId: "c1", Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: "ok"}}}},
		},
		Tools:          []*rmv1.Tool{{Name: "click", ParametersJson: `{"type":"object"}`}},
		ToolChoice:     "click",
		Sampling:       &rmv1.SamplingParams{Temperature: &zero, TopK: &k, Stop: []string{"END"}, N: 2},
		Logprobs:       true,
		TopLogprobs:    3,
		ReturnTokenIds: true,
	}
	tests := []struct {
		name      string
		forOpenAI bool
		want      []string
		wantNot   []string
	}{
		{"vllm", false,
			[]string{`"temperature":0`, `"top_k":5`, `"return_token_ids":true`, `"logprobs":true`, `"top_logprobs":3`, `"n":2`,
				`"url":"data:image/png;base64,iVBORw0KGgp4eA=="`, `"detail":"low"`, `"tool_call_id":"c1"`, `"arguments":"{\"x\":1}"`,
				`"tool_choice":{"type":"function","function":{"name":"click"}}`, `"stop":["END"]`},
			nil},
		{"openai", true, []string{`"temperature":0`, `"logprobs":true`}, []string{`top_k`, `return_token_ids`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := chatBody(req, "m", tt.forOpenAI)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("body %s\nlacks %s", b, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(string(b), w) {
					t.Errorf("body %s\nhas %s, want it left out", b, w)
				}
			}
		})
	}
}
