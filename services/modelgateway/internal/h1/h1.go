// Package h1 frames HTTP/1.1 messages in a byte stream that arrives in
// pieces, for code on an event loop, which cannot block in a reader until
// a message is whole: it says where a head ends, how long the body after
// it is, and where each message of a stream ends. It reads no more of a
// head than framing needs; the rest is the caller's to parse.
package h1

import (
	"bytes"
	"errors"
	"strconv"
)

const (
	// MaxChunkLine bounds a chunk's size line, and a trailer line.
	MaxChunkLine = 4 << 10
)

// ErrFraming is a stream that is not framed as HTTP/1.1.
var ErrFraming = errors.New("h1: message not framed as HTTP/1.1")

// Span is a part of a head: [Start, End).
type Span struct{ Start, End int }

// Head is what framing needs from a head, and what a proxy reads of an
// answer's.
type Head struct {
	// Length is the body's length (0 when none was given); HasLength
	// says whether it was.
	Length    int64
	HasLength bool
	// Chunked is set when the body comes in chunks.
	Chunked bool
	// Conn is the Connection header's line, CRLF included, to drop it.
	Conn Span
	// Close is set when the Connection header asks for the close.
	Close bool
	// Status is a response's status code; 0 for a request.
	Status int
	// ContentType is the Content-Type header's value.
	ContentType Span
}

// HeadEnd returns the length of the head at the start of buf (its CRLF
// CRLF included), or -1 when it has not all arrived.
func HeadEnd(buf []byte) int {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return -1
	}
	return end + 4
}

// ScanHead reads a head that ends in CRLF CRLF. ok is false for one that is
// not HTTP/1.1's: a bare LF, a line without a colon, a length given twice
// or not a number, a length beside chunks, a response's status line
// without a status code.
func ScanHead(head []byte) (h Head, ok bool) {
	line := bytes.IndexByte(head, '\n')
	if line < 1 || head[line-1] != '\r' {
		return Head{}, false
	}
	if first := head[:line-1]; bytes.HasPrefix(first, []byte("HTTP/1.")) {
		// "HTTP/1.1 200 OK": the code is the three digits after the
		// first space.
		sp := bytes.IndexByte(first, ' ')
		if sp < 0 || len(first) < sp+4 || (len(first) > sp+4 && first[sp+4] != ' ') {
			return Head{}, false
		}
		code, err := strconv.Atoi(string(first[sp+1 : sp+4]))
		if err != nil || code < 100 {
			return Head{}, false
		}
		h.Status = code
	}
	seenLength := false
	for i := line + 1; i < len(head)-2; {
		n := bytes.IndexByte(head[i:], '\n')
		if n < 1 || head[i+n-1] != '\r' {
			return Head{}, false
		}
		field := head[i : i+n-1]
		colon := bytes.IndexByte(field, ':')
		if colon < 1 {
			return Head{}, false
		}
		name := field[:colon]
		if !framingHeader(name) {
			i += n + 1
			continue
		}
		value := bytes.TrimSpace(field[colon+1:])
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			v, err := strconv.ParseInt(string(value), 10, 63)
			if seenLength || err != nil || len(value) == 0 || value[0] < '0' || value[0] > '9' {
				return Head{}, false
			}
			seenLength, h.Length, h.HasLength = true, v, true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			h.Chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			h.Conn = Span{i, i + n + 1}
			h.Close = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Content-Type")):
			start := i + colon + 1
			for start < i+n-1 && (head[start] == ' ' || head[start] == '\t') {
				start++
			}
			h.ContentType = Span{start, start + len(value)}
		}
		i += n + 1
	}
	if h.Chunked && seenLength {
		return Head{}, false
	}
	return h, true
}

// framingHeader reports whether name may be one of the headers ScanHead
// reads, by its length and first letter: most lines of a head are none,
// and comparing each with four names case-insensitively was most of
// ScanHead's cost.
func framingHeader(name []byte) bool {
	switch len(name) {
	case len("Content-Length"), len("Transfer-Encoding"), len("Connection"), len("Content-Type"):
		return name[0]|0x20 == 'c' || name[0]|0x20 == 't'
	}
	return false
}

// Frame follows a byte stream message by message, so that its reader
// knows where each ends.
type Frame struct {
	// MaxHead bounds a head; a longer one is ErrFraming.
	MaxHead int
	// Head is the last head read, HeadLen its length.
	Head    Head
	HeadLen int

	state  frameState
	remain int64 // body or chunk bytes still to come
}

type frameState int

const (
	frameHead      frameState = iota // reading a head
	frameBody                        // remain bytes of a body with a length
	frameChunkSize                   // reading a chunk's size line
	frameChunkData                   // remain bytes of a chunk
	frameChunkEnd                    // the CRLF after a chunk, remain bytes of it to come
	frameTrailer                     // reading trailer lines to the empty one
)

// InHead reports whether the frame waits for a head: between messages.
func (f *Frame) InHead() bool { return f.state == frameHead }

// BodyLeft is how many bytes of a body with a length are still to come
// (0 in any other state): a reader can wait for that many before it
// looks again.
func (f *Frame) BodyLeft() int64 {
	if f.state != frameBody {
		return 0
	}
	return f.remain
}

// Consume frames as much of buf as has arrived whole enough, up to the end
// of the first message that ends in it. It returns how many bytes it
// framed, and ended when a message ended there; the rest waits for more.
func (f *Frame) Consume(buf []byte) (used int, ended bool, err error) {
	for used < len(buf) {
		rest := buf[used:]
		switch f.state {
		case frameHead:
			end := HeadEnd(rest)
			if end < 0 {
				if f.MaxHead > 0 && len(rest) > f.MaxHead {
					return used, false, ErrFraming
				}
				return used, false, nil
			}
			h, ok := ScanHead(rest[:end])
			if !ok {
				return used, false, ErrFraming
			}
			f.Head, f.HeadLen = h, end
			used += end
			switch {
			case h.Status >= 100 && h.Status < 200, h.Status == 204, h.Status == 304:
				// No body, whatever the head says.
				return used, true, nil
			case h.Chunked:
				f.state = frameChunkSize
			case h.Length > 0:
				f.state, f.remain = frameBody, h.Length
			default:
				return used, true, nil
			}
		case frameBody:
			n := min(int64(len(rest)), f.remain)
			used += int(n)
			if f.remain -= n; f.remain == 0 {
				f.state = frameHead
				return used, true, nil
			}
		case frameChunkSize, frameTrailer:
			end := bytes.Index(rest, []byte("\r\n"))
			if end < 0 {
				if len(rest) > MaxChunkLine {
					return used, false, ErrFraming
				}
				return used, false, nil
			}
			line := rest[:end]
			used += end + 2
			if f.state == frameTrailer {
				if end == 0 {
					f.state = frameHead
					return used, true, nil
				}
				continue
			}
			size, err := chunkSize(line)
			if err != nil {
				return used, false, err
			}
			if size == 0 {
				f.state = frameTrailer
			} else {
				f.state, f.remain = frameChunkData, size
			}
		case frameChunkData:
			n := min(int64(len(rest)), f.remain)
			used += int(n)
			if f.remain -= n; f.remain == 0 {
				f.state, f.remain = frameChunkEnd, 2
			}
		case frameChunkEnd:
			if rest[0] != "\r\n"[2-f.remain] {
				return used, false, ErrFraming
			}
			used++
			if f.remain--; f.remain == 0 {
				f.state = frameChunkSize
			}
		}
	}
	return used, false, nil
}

// chunkSize reads a chunk's size line, extensions left out.
func chunkSize(line []byte) (int64, error) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	size, err := strconv.ParseInt(string(line), 16, 63)
	if err != nil || size < 0 || len(line) == 0 || line[0] == '+' || line[0] == '-' {
		return 0, ErrFraming
	}
	return size, nil
}

// Dechunk appends to dst the data of the chunked body that src holds
// whole (as framed by Frame, trailers included), or fails with
// ErrFraming. limit bounds what it appends: over it, it returns
// ErrTooLong.
func Dechunk(dst, src []byte, limit int64) ([]byte, error) {
	start := len(dst)
	for {
		end := bytes.Index(src, []byte("\r\n"))
		if end < 0 {
			return dst, ErrFraming
		}
		size, err := chunkSize(src[:end])
		if err != nil {
			return dst, err
		}
		src = src[end+2:]
		if size == 0 {
			return dst, nil // the trailers are the frame's to have checked
		}
		if int64(len(src)) < size+2 || src[size] != '\r' || src[size+1] != '\n' {
			return dst, ErrFraming
		}
		if limit >= 0 && int64(len(dst)-start)+size > limit {
			return dst, ErrTooLong
		}
		dst = append(dst, src[:size]...)
		src = src[size+2:]
	}
}

// ErrTooLong is a body over the limit given to Dechunk.
var ErrTooLong = errors.New("h1: body over the limit")

// Dechunker decodes a chunked body as it arrives, for a reader that
// passes its data on piece by piece (a streamed answer).
type Dechunker struct {
	state  frameState // frameChunkSize to frameTrailer, frameHead once done
	remain int64
}

// NewDechunker starts at a body's first chunk.
func NewDechunker() Dechunker { return Dechunker{state: frameChunkSize} }

// Next decodes from the start of buf: it returns the data found there (a
// part of buf, maybe empty), how many bytes of buf it used, and done once
// the last chunk and the trailers were read. A call that uses nothing
// waits for more.
func (d *Dechunker) Next(buf []byte) (data []byte, used int, done bool, err error) {
	switch d.state {
	case frameChunkSize, frameTrailer:
		end := bytes.Index(buf, []byte("\r\n"))
		if end < 0 {
			if len(buf) > MaxChunkLine {
				return nil, 0, false, ErrFraming
			}
			return nil, 0, false, nil
		}
		if d.state == frameTrailer {
			if end == 0 {
				d.state = frameHead
				return nil, 2, true, nil
			}
			return nil, end + 2, false, nil
		}
		size, err := chunkSize(buf[:end])
		if err != nil {
			return nil, 0, false, err
		}
		if size == 0 {
			d.state = frameTrailer
		} else {
			d.state, d.remain = frameChunkData, size
		}
		return nil, end + 2, false, nil
	case frameChunkData:
		n := min(int64(len(buf)), d.remain)
		if d.remain -= n; d.remain == 0 {
			d.state, d.remain = frameChunkEnd, 2
		}
		return buf[:n], int(n), false, nil
	case frameChunkEnd:
		if len(buf) == 0 {
			return nil, 0, false, nil
		}
		if buf[0] != "\r\n"[2-d.remain] {
			return nil, 0, false, ErrFraming
		}
		if d.remain--; d.remain == 0 {
			d.state = frameChunkSize
		}
		return nil, 1, false, nil
	}
	return nil, 0, true, nil
}

// AppendHeaderValue appends v to a head being written, with the line
// breaks and other control bytes of a value made spaces: a routing key
// made from a caller's user member may hold any, and must not end or
// split its header line.
func AppendHeaderValue(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}
