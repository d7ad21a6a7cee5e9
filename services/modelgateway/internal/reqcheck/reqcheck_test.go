package reqcheck

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

func TestValidBase64(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"aGk=", true},
		{"aGVsbG8h", true},
		{"aA==", true},
		{"", false},
		{"aGk", false},      // unpadded
		{"aGk=aGk=", false}, // padding inside
		{"a===", false},
		{"aG k", false},
		{"aG-_", false}, // URL alphabet
		{"aGk=\n", false},
		{"aGsK\n\n\n\naGsK", false}, // line breaks, which decoders skip
		{"aGsK\r\naGs=", false},
		// Padding at the end of the decoder's first piece.
		{strings.Repeat("A", 4092) + "aA==" + "aGsK", false},
		{strings.Repeat("A", 4092) + "aGsK" + "aA==", true},
		{strings.Repeat("A", 8192), true},
	}
	for _, tt := range tests {
		if got := ValidBase64([]byte(tt.in)); got != tt.want {
			t.Errorf("ValidBase64(%q) got %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestValidBase64LikeByteClasses checks ValidBase64 against the byte-class
// check it replaced, on random strings of base64 and a few other bytes.
func TestValidBase64LikeByteClasses(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var inAlphabet [256]bool
	for _, c := range []byte(alphabet) {
		inAlphabet[c] = true
	}
	ref := func(p []byte) bool {
		if len(p) == 0 || len(p)%4 != 0 {
			return false
		}
		n := len(p)
		if p[n-1] == '=' {
			n--
			if p[n-1] == '=' {
				n--
			}
		}
		for _, c := range p[:n] {
			if !inAlphabet[c] {
				return false
			}
		}
		return true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 4000 {
		n := 4 * rng.IntN(1500)
		if i%7 == 0 {
			n += rng.IntN(4)
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if n > 0 && rng.IntN(2) == 0 {
			// a stray byte, padding or a line break somewhere
			const odd = "=\n\r -_!\x00\xff"
			p[rng.IntN(n)] = odd[rng.IntN(len(odd))]
		}
		if n > 2 && rng.IntN(3) == 0 {
			p[n-1] = '='
			if rng.IntN(2) == 0 {
				p[n-2] = '='
			}
		}
		if got, want := ValidBase64(p), ref(p); got != want {
			t.Fatalf("ValidBase64(%q) got %v, want %v", p, got, want)
		}
	}
}

func TestDataURL(t *testing.T) {
	tests := []struct {
		name, url, want string
	}{
		{"png", "data:image/png;base64,iVBORw0KGgo=", ""},
		{"no comma", "data:image/png;base64", "no comma"},
		{"not base64", "data:image/png,abc", "must be base64"},
		{"not an image", "data:text/html;base64,aGk=", "image/*"},
		{"bad payload", "data:image/png;base64,!!!!", "not valid base64"},
		{"empty payload", "data:image/png;base64,", "not valid base64"},
		{"too large", "data:image/png;base64," + strings.Repeat("A", 40), "exceeds the 16-byte limit"},
		{"http", "http://x/y.png", "not a data: URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DataURL([]byte(tt.url), 16)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("DataURL(%.40q) got %q, want %q", tt.url, got, tt.want)
			}
		})
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		body, wantField string
	}{
		{`{}`, ""},
		{`{"max_tokens":null,"temperature":null,"stop":null}`, ""},
		{`{"max_tokens":16,"n":16,"top_logprobs":20,"temperature":2,"top_p":1,"top_k":-1,"stop":["a"]}`, ""},
		{`{"max_tokens":2.0}`, ""},
		{`{"max_tokens":-5}`, "max_tokens"},
		{`{"max_tokens":0}`, "max_tokens"},
		{`{"max_tokens":1048577}`, "max_tokens"},
		{`{"max_tokens":1e999}`, "max_tokens"},
		{`{"max_tokens":true}`, "max_tokens"},
		{`{"min_tokens":-1}`, "min_tokens"},
		{`{"n":0}`, "n"},
		{`{"best_of":17}`, "best_of"},
		{`{"prompt_logprobs":-1}`, "prompt_logprobs"},
		{`{"top_k":-2}`, "top_k"},
		{`{"temperature":-0.1}`, "temperature"},
		{`{"temperature":"hot"}`, "temperature"},
		{`{"top_p":0}`, "top_p"},
		{`{"presence_penalty":2.5}`, "presence_penalty"},
		{`{"frequency_penalty":-3}`, "frequency_penalty"},
		{`{"logprobs":"yes"}`, "logprobs"},
		{`{"stream":1}`, "stream"},
		{`{"stop":5}`, "stop"},
		{`{"stop":["a","b","c","d","e","f","g","h","i"]}`, "stop"},
		{`{"stop":[1]}`, "stop[0]"},
		{`{"stop":"` + strings.Repeat("s", MaxStopBytes+1) + `"}`, "stop"},
	}
	for _, tt := range tests {
		v := fastjson.MustParse(tt.body)
		fe := Params(v, "p.")
		got := ""
		if fe != nil {
			got = strings.TrimPrefix(fe.Field, "p.")
		}
		if got != tt.wantField {
			t.Errorf("Params(%.60s) got field %q (%v), want %q", tt.body, got, fe, tt.wantField)
		}
	}
}

func TestDuplicate(t *testing.T) {
	// wide is an object of n distinct names and then, when dup, the first
	// again: past smallObject names the check uses a map.
	wide := func(n int, dup bool) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup {
			b.WriteString(`"k0":1,`)
		}
		return strings.TrimSuffix(b.String(), ",") + "}"
	}
	tests := []struct {
		body, want string
	}{
		{`{}`, ""},
		{`[]`, ""},
		{`"max_tokens"`, ""},
		{`{"max_tokens":16,"temperature":0,"messages":[{"role":"user","content":"x"}]}`, ""},
		{`{"a":{"x":1},"b":{"x":1}}`, ""}, // equal names in different objects
		{`{"max_tokens":16,"max_tokens":999999}`, "max_tokens"},
		{`{"max_tokens":16,"max_tokens":16}`, "max_tokens"}, // even with equal values
		{`{"messages":[],"model":"m","messages":[]}`, "messages"},
		{`{"messages":[{"role":"user"},{"role":"user","content":[{"type":"text"},{"image_url":{"url":"a","url":"b"}}]}]}`, "messages[1].content[1].image_url.url"},
		{`[[{"a":1}],[{"a":1,"a":2}]]`, "[1][0].a"},
		{`{"a\u0062":1,"ab":2}`, "ab"}, // the same name escaped: fastjson compares names unescaped
		{wide(smallObject, false), ""},
		{wide(smallObject, true), "k0"},
		{wide(3*smallObject, false), ""},
		{wide(3*smallObject, true), "k0"},
	}
	for _, tt := range tests {
		if got := Duplicate(fastjson.MustParse(tt.body)); got != tt.want {
			t.Errorf("Duplicate(%.80s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestQuoteIsShort(t *testing.T) {
	if got := Quote(strings.Repeat("x", 10000)); len(got) > MaxQuoted+8 {
		t.Errorf("Quote of 10000 bytes got %d bytes, want at most %d", len(got), MaxQuoted+8)
	}
	if got, want := Quote("ab"), `"ab"`; got != want {
		t.Errorf("Quote(ab) got %s, want %s", got, want)
	}
}

// BenchmarkValidBase64 is the check of a 1.6 MB screenshot's base64, which
// every image data URL gets on both fronts.
func BenchmarkValidBase64(b *testing.B) {
	p := []byte(strings.Repeat("iVBORw0K", 200000))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if !ValidBase64(p) {
			b.Fatal("valid base64 refused")
		}
	}
}
