package modelgateway

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

// toOpenAI converts a validated gRPC request to the backend body. When
// forOpenAI is set, vLLM's extension fields are left out: OpenAI's API
// refuses unknown parameters.
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

// imageURL sends raw bytes on as a data URL.
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

// fromOpenAI converts a backend answer to the gRPC response. Token ids come
// from vLLM's return_token_ids fields, else from logprob tokens spelt
// "token_id:N" (return_tokens_as_token_ids).
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
