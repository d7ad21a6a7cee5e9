package grpcloop

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc/status"
)

// parseTimeout reads a grpc-timeout value: at most eight digits and a
// unit (Hours, Minutes, Seconds, milliseconds, microseconds,
// nanoseconds). A value past what a Duration holds is the longest one.
func parseTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(v[:len(v)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	if n > uint64(math.MaxInt64/int64(unit)) {
		return math.MaxInt64, true
	}
	return time.Duration(n) * unit, true
}

// statusFields are a status's trailer fields.
func statusFields(s *status.Status) []hpack.HeaderField {
	fields := []hpack.HeaderField{{Name: "grpc-status", Value: strconv.Itoa(int(s.Code()))}}
	if m := s.Message(); m != "" {
		fields = append(fields, hpack.HeaderField{Name: "grpc-message", Value: encodeMessage(m)})
	}
	if p := s.Proto(); len(p.GetDetails()) > 0 {
		if b, err := proto.Marshal(p); err == nil {
			fields = append(fields, hpack.HeaderField{Name: "grpc-status-details-bin", Value: base64.RawStdEncoding.EncodeToString(b)})
		}
	}
	return fields
}

// encodeMessage percent-encodes a grpc-message: every byte outside
// printable ASCII, and '%'.
func encodeMessage(m string) string {
	clean := true
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < ' ' || c > '~' || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return m
	}
	var b strings.Builder
	for i := 0; i < len(m); i++ {
		if c := m[i]; c < ' ' || c > '~' || c == '%' {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// reserved reports whether a header field is gRPC's or HTTP/2's own, not
// metadata.
func reserved(name string) bool {
	if name != "" && name[0] == ':' {
		return true
	}
	switch name {
	case "content-type", "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-status",
		"grpc-timeout", "grpc-status-details-bin", "te", "connection":
		return true
	}
	return false
}

// incoming is a call's metadata as grpc-go's server gives it to
// handlers: the request's header fields but gRPC's own, with
// :authority, user-agent and content-type, and binary values decoded.
func incoming(fields []hpack.HeaderField) (metadata.MD, error) {
	md := make(metadata.MD, len(fields))
	for _, f := range fields {
		if reserved(f.Name) && f.Name != ":authority" && f.Name != "user-agent" && f.Name != "content-type" {
			continue
		}
		v := f.Value
		if strings.HasSuffix(f.Name, "-bin") {
			b, err := decodeBin(v)
			if err != nil {
				return nil, fmt.Errorf("malformed binary metadata %q: %w", f.Name, err)
			}
			v = string(b)
		}
		md[f.Name] = append(md[f.Name], v)
	}
	return md, nil
}

// decodeBin reads a binary header value, padded or not.
func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// outgoing turns metadata a handler set into header fields.
func outgoing(md metadata.MD) []hpack.HeaderField {
	var fields []hpack.HeaderField
	for k, vv := range md {
		if reserved(k) {
			continue
		}
		for _, v := range vv {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			fields = append(fields, hpack.HeaderField{Name: k, Value: v})
		}
	}
	return fields
}
