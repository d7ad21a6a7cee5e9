package fakellm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/openaiapi"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{"reply and tool call", `{"match": "hello", "reply": "hi"}
# comment

{"match": "click", "tool_calls": [{"name": "click", "arguments": {"x": 1}}]}`, 2, ""},
		{"bad regexp", `{"match": "(", "reply": "x"}`, 0, "line 1: match"},
		{"no reply", `{"match": "x"}`, 0, "neither reply nor tool_calls"},
		{"unknown field", `{"match": "x", "reply": "y", "typo": 1}`, 0, "unknown field"},
		{"arguments not object", `{"match": "x", "tool_calls": [{"name": "f", "arguments": [1]}]}`, 0, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := ParseScript(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(rules) != tt.want {
				t.Fatalf("got %d rules, err %v; want %d", len(rules), err, tt.want)
			}
		})
	}
}

func start(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func post(t *testing.T, url string, body any, hdr map[string]string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func msgs(text string) []map[string]any {
	return []map[string]any{{"role": "user", "content": text}}
}

func TestChatScriptTokensAndCache(t *testing.T) {
	rules, _ := ParseScript(strings.NewReader(`{"match": "weather", "reply": "It is sunny today"}
{"match": "click", "tool_calls": [{"name": "click", "arguments": {"x": 10, "y": 20}}]}`))
	s, url := start(t, Config{Script: rules})

	resp := post(t, url+"/v1/chat/completions", map[string]any{
		"model": "fake-model", "messages": msgs("what is the weather"), "return_token_ids": true, "logprobs": true, "top_logprobs": 2,
	}, map[string]string{"X-Routing-Key": "ep1"})
	var got openaiapi.ChatResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.Message.Content != "It is sunny today" {
		t.Errorf("content = %q, want the scripted reply", c.Message.Content)
	}
	if want := TokenIDs("It is sunny today"); fmt.Sprint(c.TokenIDs) != fmt.Sprint(want) {
		t.Errorf("token_ids = %v, want %v", c.TokenIDs, want)
	}
	if want := append(append([]int{tokUser}, TokenIDs("what is the weather")...), tokAssistant); fmt.Sprint(got.PromptTokenIDs) != fmt.Sprint(want) {
		t.Errorf("prompt_token_ids = %v, want %v", got.PromptTokenIDs, want)
	}
	if n := len(c.LogProbs.Content); n != 4 || len(c.LogProbs.Content[0].TopLogProbs) != 2 {
		t.Errorf("logprobs = %d entries (top %d), want 4 with top 2", n, len(c.LogProbs.Content[0].TopLogProbs))
	}
	if lp := c.LogProbs.Content[1]; lp.LogProb != LogProb(c.TokenIDs[1]) || lp.Token != " is" {
		t.Errorf("logprob[1] = %+v, want token \" is\" logprob %v", lp, LogProb(c.TokenIDs[1]))
	}

	resp = post(t, url+"/v1/chat/completions", map[string]any{"messages": []map[string]any{
		{"role": "user", "content": "what is the weather"},
		{"role": "assistant", "content": "It is sunny today"},
		{"role": "user", "content": "please click it"},
	}, "user": "ep1"}, nil)
	got = openaiapi.ChatResponse{}
	json.NewDecoder(resp.Body).Decode(&got)
	c = got.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Arguments != `{"x":10,"y":20}` {
		t.Errorf("tool call answer = %+v, want click with {\"x\":10,\"y\":20}", c)
	}
	// Cached: role+4 words of the first turn, role+4 words of the answer.
	if got.Usage.PromptTokensDetails == nil || got.Usage.PromptTokensDetails.CachedTokens != 10 {
		t.Errorf("second turn of ep1: usage %+v, want cached tokens", got.Usage)
	}
	if st := s.Stats(); st.CacheHits != 1 || st.CacheMisses != 1 {
		t.Errorf("cache hits/misses = %d/%d, want 1/1", st.CacheHits, st.CacheMisses)
	}

	resp = post(t, url+"/v1/chat/completions", map[string]any{"messages": msgs("nothing matches"), "max_tokens": 3}, nil)
	got = openaiapi.ChatResponse{}
	json.NewDecoder(resp.Body).Decode(&got)
	if want := strings.Join(Pieces(DefaultReply)[:3], ""); got.Choices[0].Message.Content != want || got.Choices[0].FinishReason != "length" {
		t.Errorf("default reply truncated = %q (%s), want %q (length)", got.Choices[0].Message.Content, got.Choices[0].FinishReason, want)
	}
}

func TestChatStream(t *testing.T) {
	rules, _ := ParseScript(strings.NewReader(`{"match": "", "reply": "one two three"}`))
	_, url := start(t, Config{Script: rules, PerToken: time.Millisecond})
	resp := post(t, url+"/v1/chat/completions", map[string]any{
		"messages": msgs("go"), "stream": true, "return_token_ids": true, "logprobs": true,
		"stream_options": map[string]any{"include_usage": true},
	}, nil)
	var text strings.Builder
	var ids, promptIDs []int
	var finish string
	done, usage := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var ch openaiapi.Chunk
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		promptIDs = append(promptIDs, ch.PromptTokenIDs...)
		usage = usage || ch.Usage != nil
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			ids = append(ids, c.TokenIDs...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if text.String() != "one two three" || finish != "stop" || !done || !usage {
		t.Errorf("stream = %q finish %q done %v usage %v", text.String(), finish, done, usage)
	}
	if fmt.Sprint(ids) != fmt.Sprint(TokenIDs("one two three")) || len(promptIDs) == 0 {
		t.Errorf("stream ids = %v prompt %v, want %v and prompt ids", ids, promptIDs, TokenIDs("one two three"))
	}
}

func TestBadRequests(t *testing.T) {
	_, url := start(t, Config{})
	tests := []struct {
		name string
		body any
		want int
	}{
		{"no messages", map[string]any{"messages": []any{}}, 400},
		{"unknown model", map[string]any{"model": "gpt-9", "messages": msgs("x")}, 404},
		{"bad top_logprobs", map[string]any{"messages": msgs("x"), "logprobs": true, "top_logprobs": 50}, 400},
	}
	for _, tt := range tests {
		if got := post(t, url+"/v1/chat/completions", tt.body, nil).StatusCode; got != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestWeightEndpointsAndPause(t *testing.T) {
	s, url := start(t, Config{})
	for _, step := range []struct {
		path string
		body any
	}{
		{"/pause?mode=wait", nil},
		{"/update_weights_from_disk", map[string]any{"model_path": "/ckpt/7", "weight_version": "7"}},
	} {
		if got := post(t, url+step.path, step.body, nil).StatusCode; got != 200 {
			t.Fatalf("%s: status %d", step.path, got)
		}
	}
	// Paused: a chat waits until resumed.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	b, _ := json.Marshal(map[string]any{"messages": msgs("x")})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(b))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Error("chat while paused answered, want it held")
	}
	post(t, url+"/resume", nil, nil)
	if got := post(t, url+"/v1/chat/completions", map[string]any{"messages": msgs("x")}, nil).StatusCode; got != 200 {
		t.Errorf("chat after resume: %d", got)
	}
	// The server counts the held chat as canceled once it sees the client
	// gone, which may come after the client's own timeout returns.
	st := s.Stats()
	for deadline := time.Now().Add(30 * time.Second); st.Canceled == 0 && time.Now().Before(deadline); st = s.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	if st.WeightVersion != "7" || st.WeightSource != "/ckpt/7" || st.Paused || st.Canceled != 1 {
		t.Errorf("stats = %+v, want version 7 from /ckpt/7, resumed, 1 canceled", st)
	}
}

func TestFaults(t *testing.T) {
	s, url := start(t, Config{Faults: Faults{ErrorRate: 1}})
	if got := post(t, url+"/v1/chat/completions", map[string]any{"messages": msgs("x")}, nil).StatusCode; got != 500 {
		t.Errorf("error_rate 1: status %d, want 500", got)
	}
	s.SetFaults(Faults{DropRate: 1})
	b, _ := json.Marshal(map[string]any{"messages": msgs("x")})
	if _, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b)); err == nil {
		t.Error("drop_rate 1: got an answer, want a dropped connection")
	}
	if err := s.SetFaults(Faults{HangRate: 2}); err == nil {
		t.Error("SetFaults(hang_rate 2) succeeded, want error")
	}
}

// TestChatBodies sends screenshot turns with and without a Content-Length,
// one after another so pooled buffers are reused at other sizes: each
// answer must count its own prompt.
func TestChatBodies(t *testing.T) {
	_, url := start(t, Config{})
	turn := func(text string, imageBytes int) []byte {
		b, _ := json.Marshal(map[string]any{"return_token_ids": true, "max_completion_tokens": 2, "messages": []map[string]any{{
			"role": "user", "content": []map[string]any{
				{"type": "text", "text": text},
				{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + strings.Repeat("A", imageBytes)}},
			},
		}}})
		return b
	}
	tests := []struct {
		name       string
		text       string
		imageBytes int
		chunked    bool
	}{
		{"large with length", "one two three", 300_000, false},
		{"small with length after large", "four", 10, false},
		{"large chunked", "five six", 500_000, true},
		{"small chunked", "seven", 1, true},
		{"empty image", "eight nine ten eleven", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(turn(tt.text, tt.imageBytes))
			if tt.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", body)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got openaiapi.ChatResponse
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, decode error %v", resp.StatusCode, err)
			}
			want := []int{tokUser}
			want = append(want, TokenIDs(tt.text)...)
			for range imageTokens {
				want = append(want, tokImage)
			}
			want = append(want, tokAssistant)
			if fmt.Sprint(got.PromptTokenIDs) != fmt.Sprint(want) {
				t.Errorf("prompt_token_ids = %v, want %v", got.PromptTokenIDs, want)
			}
			if n := len(got.Choices[0].TokenIDs); n != 2 || got.Choices[0].FinishReason != "length" {
				t.Errorf("%d completion tokens, finish %q; want 2 and length (max_completion_tokens)", n, got.Choices[0].FinishReason)
			}
		})
	}
}
