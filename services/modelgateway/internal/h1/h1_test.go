package h1

import (
	"errors"
	"strings"
	"testing"
)

// TestFrame wants messages framed whole however the stream is cut, each
// end reported once.
func TestFrame(t *testing.T) {
	answers := "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" +
		"HTTP/1.1 204 No Content\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n" +
		"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n" +
		"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab"
	const messages = 5
	for cut := 1; cut <= len(answers); cut++ {
		f := Frame{MaxHead: 1 << 10}
		pending, ends := "", 0
		for i := 0; i < len(answers); i += cut {
			pending += answers[i:min(i+cut, len(answers))]
			for {
				n, ended, err := f.Consume([]byte(pending))
				if err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				pending = pending[n:]
				if ended {
					ends++
				}
				if n == 0 || pending == "" {
					break
				}
			}
		}
		if pending != "" || !f.InHead() || ends != messages {
			t.Errorf("cut %d: %q left unframed, state %d, %d ends; want %d", cut, pending, f.state, ends, messages)
		}
	}
	for _, bad := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-3\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1", MaxChunkLine+1),
		"HTTP/1.1 200 OK\r\n" + strings.Repeat("a", 1<<10+1),
	} {
		f := Frame{MaxHead: 1 << 10}
		if _, _, err := f.Consume([]byte(bad)); !errors.Is(err, ErrFraming) {
			t.Errorf("Consume(%.60q) = %v, want ErrFraming", bad, err)
		}
	}
}

func TestScanHead(t *testing.T) {
	head := "HTTP/1.1 503 Service Unavailable\r\nContent-Type:  application/json\r\nConnection: close\r\nContent-Length: 12\r\n\r\n"
	h, ok := ScanHead([]byte(head))
	if !ok {
		t.Fatal("not ok")
	}
	if got := head[h.ContentType.Start:h.ContentType.End]; got != "application/json" {
		t.Errorf("content type %q", got)
	}
	if got := head[h.Conn.Start:h.Conn.End]; got != "Connection: close\r\n" {
		t.Errorf("connection line %q", got)
	}
	if h.Status != 503 || h.Length != 12 || !h.Close || h.Chunked {
		t.Errorf("got %+v", h)
	}
	if h, ok := ScanHead([]byte("POST /v1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")); !ok || h.Status != 0 || !h.Chunked {
		t.Errorf("request head: %+v %v", h, ok)
	}
}

func TestDechunk(t *testing.T) {
	tests := []struct {
		src   string
		limit int64
		want  string
		err   error
	}{
		{"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n", -1, "abcde", nil},
		{"0\r\nX-T: 1\r\n\r\n", -1, "", nil},
		{"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 4, "abc", ErrTooLong},
		{"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 5, "abcde", nil},
		{"3\r\nabcd\r\n0\r\n\r\n", -1, "", ErrFraming},
		{"3\r\nab", -1, "", ErrFraming},
		{"g\r\n", -1, "", ErrFraming},
	}
	for _, tt := range tests {
		got, err := Dechunk([]byte("<"), []byte(tt.src), tt.limit)
		if !errors.Is(err, tt.err) || (err == nil && string(got) != "<"+tt.want) {
			t.Errorf("Dechunk(%q, %d) = %q, %v; want %q, %v", tt.src, tt.limit, got, err, "<"+tt.want, tt.err)
		}
	}
}

// TestDechunker wants the same data however the body is cut.
func TestDechunker(t *testing.T) {
	body := "3;x=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\nNEXT"
	for cut := 1; cut <= len(body); cut++ {
		d := NewDechunker()
		var got []byte
		pending, done := "", false
		for i := 0; i < len(body) && !done; i += cut {
			pending += body[i:min(i+cut, len(body))]
			for !done {
				data, n, end, err := d.Next([]byte(pending))
				if err != nil {
					t.Fatalf("cut %d: %v", cut, err)
				}
				got = append(got, data...)
				pending, done = pending[n:], end
				if n == 0 {
					break
				}
			}
		}
		if string(got) != "abc0123456789" || !done || !strings.HasPrefix("NEXT", pending) {
			t.Errorf("cut %d: data %q, done %v, left %q", cut, got, done, pending)
		}
	}
	for _, bad := range []string{"zz\r\n", "3\r\nabcX", strings.Repeat("1", MaxChunkLine+1)} {
		d := NewDechunker()
		var err error
		for buf := []byte(bad); err == nil; {
			var n int
			_, n, _, err = d.Next(buf)
			if n == 0 {
				break
			}
			buf = buf[n:]
		}
		if !errors.Is(err, ErrFraming) {
			t.Errorf("Next(%.40q): %v, want ErrFraming", bad, err)
		}
	}
}

func BenchmarkScanHead(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\ndate: Sun, 06 Dec 2026 15:00:00 GMT\r\nserver: uvicorn\r\ncontent-length: 612\r\ncontent-type: application/json\r\nx-request-id: 1234\r\n\r\n")
	for b.Loop() {
		if _, ok := ScanHead(head); !ok {
			b.Fatal("not ok")
		}
	}
}

func TestAppendHeaderValue(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\r\nX-Injected: 1", "a  X-Injected: 1"},
		{"nul\x00byte\x7f", "nul byte "},
		{"tab\tkept", "tab\tkept"},
	} {
		if got := string(AppendHeaderValue(nil, tt.in)); got != tt.want {
			t.Errorf("AppendHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
