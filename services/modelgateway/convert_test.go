package modelgateway

import (
	"encoding/json"
	"strings"
	"testing"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

func TestToOpenAIBody(t *testing.T) {
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
			or, err := toOpenAI(req, "m", tt.forOpenAI)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(or)
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

func TestFromOpenAITokenIDs(t *testing.T) {
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
			got := fromOpenAI(&openaiapi.ChatResponse{Choices: []openaiapi.Choice{tt.choice}}).GetChoices()[0]
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
