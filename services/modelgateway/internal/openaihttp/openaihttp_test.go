package openaihttp

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPeekScreenshot measures what checking a request with a 1.5 MB
// base64 screenshot costs the HTTP front before it passes the body on.
func BenchmarkPeekScreenshot(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what now?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("iVBORw0K", 200000) + `"}}]}]}`)
	h := &Handler{opts: Options{MaxImageBytes: 20 << 20}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, fe := h.readRequest(body); fe != nil {
			b.Fatal(fe.problem)
		}
	}
}

func TestReadRequest(t *testing.T) {
	h := &Handler{opts: Options{MaxImageBytes: 30}}
	tests := []struct {
		name, body, wantField string
		want                  peek
	}{
		{"plain", `{"model":"m","user":"ep","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "", peek{Model: "m", User: "ep", Stream: true}},
		{"parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"\"url\": not a key"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, "", peek{}},
		{"http image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "", peek{}},
		{"not an object", `[1]`, "body", peek{}},
		{"not JSON", `{"messages":[{"role":"user","content":"x"}]`, "body", peek{}},
		{"escaped data URL", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image\/png;base64,AA\/A"}}]}]}`, "", peek{}},
		{"user not a string", `{"user":5,"messages":[{"role":"user","content":"x"}]}`, "", peek{}},
		{"no messages", `{"model":"m"}`, "messages", peek{}},
		{"empty messages", `{"messages":[]}`, "messages", peek{}},
		{"no role", `{"messages":[{"content":"x"}]}`, "messages[0].role", peek{}},
		{"bad content", `{"messages":[{"role":"user","content":5}]}`, "messages[0].content", peek{}},
		{"oversized image", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 80) + `"}}]}]}`, "messages[0].content[1].image_url.url", peek{}},
		{"file url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, "messages[0].content[0].image_url.url", peek{}},
		{"model not a string", `{"model":5,"messages":[{"role":"user","content":"x"}]}`, "model", peek{}},
		{"model twice", `{"model":"a","messages":[{"role":"user","content":"x"}],"model":"b"}`, "model", peek{}},
		{"role twice", `{"messages":[{"role":"user","content":"x","role":"system"}]}`, "messages[0].role", peek{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, fe := h.readRequest([]byte(tt.body))
			gotField := ""
			if fe != nil {
				gotField = fe.field
			}
			if gotField != tt.wantField {
				t.Fatalf("field error = %+v, want field %q", fe, tt.wantField)
			}
			if fe == nil && got != tt.want {
				t.Errorf("peek = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLastUsage(t *testing.T) {
	usage := `"usage":{"prompt_tokens":3,"completion_tokens":5}`
	pad := func(n int) string { return strings.Repeat("x", n) }
	tests := []struct {
		name, body string
	}{
		{"none", `{"choices":[]}`},
		{"short answer", `{"choices":[],` + usage + `}`},
		{"long answer, usage in the tail", `{"text":"` + pad(5000) + `",` + usage + `}`},
		{"long answer, usage early", `{` + usage + `,"text":"` + pad(5000) + `"}`},
		{"two, the last wins", `{` + usage + `,"text":"` + pad(5000) + `",` + usage + `}`},
		{"two in the tail", `{"text":"` + pad(5000) + `",` + usage + `,` + usage + `}`},
		{"two in a short answer", `{` + usage + `,` + usage + `}`},
	}
	// The key starting d bytes before the tail lookup's cut, so across it
	// for 0 < d < len(usageKey).
	for d := -2; d <= len(usageKey)+2; d++ {
		value := `{"prompt_tokens":3,"completion_tokens":5}`
		after := usageTail - len(usageKey) + d // bytes after the key
		body := `{"text":"` + pad(2000) + `",` + string(usageKey) + value + pad(after-len(value)-1) + `}`
		if i := bytes.LastIndex([]byte(body), usageKey); i != len(body)-usageTail-d {
			t.Fatalf("d %d: the key is at %d, want %d", d, i, len(body)-usageTail-d)
		}
		tests = append(tests, struct{ name, body string }{fmt.Sprintf("key %d bytes before the cut", d), body})
	}
	for _, tt := range tests {
		if got, want := lastUsage([]byte(tt.body)), bytes.LastIndex([]byte(tt.body), usageKey); got != want {
			t.Errorf("%s: lastUsage = %d, want %d", tt.name, got, want)
		}
	}
}

// BenchmarkPeekSmall is the check of a typical short text turn.
func BenchmarkPeekSmall(b *testing.B) {
	body := []byte(`{"model":"fake-model","messages":[{"role":"system","content":"You are a helpful agent."},{"role":"user","content":"Open the terminal and list the files in the home directory."}],"max_tokens":16,"temperature":0}`)
	h := &Handler{opts: Options{MaxImageBytes: 20 << 20}}
	b.ReportAllocs()
	for b.Loop() {
		if _, fe := h.readRequest(body); fe != nil {
			b.Fatal(fe.problem)
		}
	}
}

// FuzzReadRequest wants no panic on any body, and the body unchanged: it
// passes on to the backend byte for byte after the check.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","user":"ep","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a\"b"},{"type":"image_url","image_url":{"url":"data:image\/png;base64,AA\u0041A"}}]}]}`))
	f.Add([]byte(`[{"messages":null}]`))
	h := &Handler{opts: Options{MaxImageBytes: 1 << 10}}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := bytes.Clone(body)
		// Syntax details the parser lets through (a control character
		// inside a string) are the backend's to refuse.
		_, fe := h.readRequest(body)
		if !bytes.Equal(body, before) {
			t.Fatalf("readRequest changed the body %q to %q", before, body)
		}
		if fe != nil && (fe.field == "" || fe.problem == "") {
			t.Fatalf("field error without field or problem: %+v", fe)
		}
	})
}

func TestUsageCounts(t *testing.T) {
	tests := []struct {
		name, after           string
		wantPrompt, wantCompl int64
	}{
		{"answer's end", `{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`, 12, 5},
		{"nested details first", `{"prompt_tokens_details":{"cached_tokens":8,"prompt_tokens":99},"completion_tokens":5,"prompt_tokens":12}}`, 12, 5},
		{"stream's tail", "{\"prompt_tokens\":3,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n", 3, 7},
		{"spaces", ` { "prompt_tokens" : 3 , "completion_tokens" : 7 } }`, 3, 7},
		{"missing one", `{"completion_tokens":7}}`, 0, 7},
		{"null usage", `null}`, 0, 0},
		{"not integers", `{"prompt_tokens":"3","completion_tokens":7.5}}`, 0, 0},
		{"cut short", `{"prompt_tokens":3,"completion_tok`, 0, 0},
		{"not JSON", `}{`, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c := usageCounts([]byte(tt.after))
			if p != tt.wantPrompt || c != tt.wantCompl {
				t.Errorf("usageCounts(%q) = %d, %d; want %d, %d", tt.after, p, c, tt.wantPrompt, tt.wantCompl)
			}
		})
	}
}

// TestKeepScratch wants a loop's decoding buffer kept for the next body
// while it is small, and let go once a large body made it large.
func TestKeepScratch(t *testing.T) {
	for _, tt := range []struct {
		cap      int
		wantKept bool
	}{{0, true}, {4 << 10, true}, {maxKeptScratch, true}, {maxKeptScratch + 1, false}, {64 << 20, false}} {
		b := make([]byte, min(tt.cap, 1), tt.cap)
		got := keepScratch(b)
		if kept := got != nil; kept != tt.wantKept || len(got) != 0 {
			t.Errorf("keepScratch(cap %d) = len %d, kept %v; want kept %v, empty", cap(b), len(got), kept, tt.wantKept)
		}
	}
}
