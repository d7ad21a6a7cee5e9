// Package openaiapi holds the OpenAI chat-completions wire types shared by the
// gateway and fakellm. They build on go-openai's types and add the fields that
// vLLM and SGLang speak but go-openai lacks (return_token_ids, top_k,
// prompt_token_ids, per-choice token_ids), so that none of them is dropped on
// the way through.
package openaiapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// ChatRequest is a chat completion request body. The embedded go-openai
// request carries the standard fields; the fields declared here shadow
// go-openai's float32 `omitempty` ones, which would silently drop a
// meaningful zero (temperature 0 is greedy decoding), and add vLLM's extras.
type ChatRequest struct {
	openai.ChatCompletionRequest

	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"top_p,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`

	// TopK is vLLM/SGLang's top-k sampling.
	TopK *int `json:"top_k,omitempty"`
	// ReturnTokenIDs asks vLLM for prompt_token_ids and per-choice token_ids.
	ReturnTokenIDs bool `json:"return_token_ids,omitempty"`
	// ReturnTokensAsTokenIDs makes vLLM spell logprob tokens "token_id:N".
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids,omitempty"`
}

// ChatResponse is a non-streamed chat completion answer.
type ChatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
	// PromptTokenIDs is vLLM's top-level prompt ids (return_token_ids).
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// Choice is one alternative of a ChatResponse.
type Choice struct {
	Index        int                          `json:"index"`
	Message      openai.ChatCompletionMessage `json:"message"`
	FinishReason string                       `json:"finish_reason"`
	LogProbs     *LogProbs                    `json:"logprobs,omitempty"`
	// TokenIDs is vLLM's per-choice completion ids (return_token_ids).
	TokenIDs []int `json:"token_ids,omitempty"`
}

// LogProbs holds per-token log probabilities of a choice.
type LogProbs struct {
	Content []LogProb `json:"content"`
}

// LogProb is one sampled token. Bytes is a list of byte values on the wire
// (go-openai's []byte would be read and written as base64).
type LogProb struct {
	Token       string       `json:"token"`
	LogProb     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes,omitempty"`
	TopLogProbs []TopLogProb `json:"top_logprobs"`
}

// TopLogProb is one alternative at a position.
type TopLogProb struct {
	Token   string  `json:"token"`
	LogProb float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

// Usage counts tokens; it is go-openai's, whose prompt_tokens_details carries
// cached_tokens.
type Usage = openai.Usage

// Chunk is one server-sent event of a streamed answer.
type Chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []ChunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
	// PromptTokenIDs comes in the first chunk when return_token_ids is set.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

// ChunkChoice is the delta of one choice in a Chunk.
type ChunkChoice struct {
	Index        int                                    `json:"index"`
	Delta        openai.ChatCompletionStreamChoiceDelta `json:"delta"`
	LogProbs     *LogProbs                              `json:"logprobs,omitempty"`
	FinishReason *string                                `json:"finish_reason"`
	TokenIDs     []int                                  `json:"token_ids,omitempty"`
}

// ErrorBody is the OpenAI error envelope.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an error in the OpenAI envelope.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param,omitempty"`
	Code    string `json:"code,omitempty"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// Model is one entry of a ModelList.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// tokenIDPrefix is how vLLM spells a token with return_tokens_as_token_ids.
const tokenIDPrefix = "token_id:"

// TokenAsID renders id the way vLLM does with return_tokens_as_token_ids.
func TokenAsID(id int) string { return tokenIDPrefix + strconv.Itoa(id) }

// ParseTokenAsID reads a "token_id:N" token; ok is false for any other text.
func ParseTokenAsID(tok string) (id int, ok bool) {
	rest, found := strings.CutPrefix(tok, tokenIDPrefix)
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return n, true
}

// MergeExtra merges the JSON object extra into the JSON object body, extra's
// keys winning. It is how ChatRequest.extra_body_json reaches the backend.
func MergeExtra(body []byte, extra string) ([]byte, error) {
	if strings.TrimSpace(extra) == "" {
		return body, nil
	}
	var add map[string]json.RawMessage
	if err := json.Unmarshal([]byte(extra), &add); err != nil {
		return nil, fmt.Errorf("extra body is not a JSON object: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	for k, v := range add {
		m[k] = v
	}
	return json.Marshal(m)
}
