package grpcserver

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped below
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A request that does not parse is the caller's fault, so it should be
// InvalidArgument, but grpc-go turns any codec error into Internal ("grpc:
// error unmarshalling request"), and for unary calls it decodes in the
// generated handler before any interceptor runs: neither an interceptor nor
// the codec's error can change that code. The server codec below therefore
// never fails on a proto message it cannot parse: it resets the message and
// leaves a marker in its unknown fields, carrying the parser's error, and
// the validation interceptor (which sees every unary request and every
// message received on a stream) answers InvalidArgument for a marked
// message. The marker keeps the state in the message itself, so nothing
// leaks when an earlier interceptor (auth) refuses the call, and a handler
// that somehow got a marked message would only see an empty request.
//
// Decompression failures ("grpc: failed to decompress") still answer
// Internal: they happen before the codec and no hook reaches them.

// malformedField is the field number of the marker: the largest one
// protobuf allows, which no rolloutmesh message uses.
const malformedField protowire.Number = protowire.MaxValidNumber

// maxMalformedDetail bounds the parser's message kept in the marker.
const maxMalformedDetail = 200

type serverCodec struct{ inner encoding.CodecV2 }

func newServerCodec() serverCodec {
	return serverCodec{inner: encoding.GetCodecV2("proto")}
}

var _ encoding.CodecV2 = serverCodec{}

func (c serverCodec) Name() string { return c.inner.Name() }

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return err
	}
	detail := err.Error()
	if len(detail) > maxMalformedDetail {
		detail = detail[:maxMalformedDetail]
	}
	proto.Reset(m)
	marker := protowire.AppendTag(nil, malformedField, protowire.BytesType)
	marker = protowire.AppendString(marker, detail)
	m.ProtoReflect().SetUnknown(protoreflect.RawFields(marker))
	return nil
}

// malformed returns an InvalidArgument error when the codec marked req as
// unparseable, and nil otherwise.
func malformed(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	raw := m.ProtoReflect().GetUnknown()
	if len(raw) == 0 {
		return nil
	}
	num, typ, n := protowire.ConsumeTag(raw)
	if n < 0 || num != malformedField || typ != protowire.BytesType {
		return nil
	}
	detail, m2 := protowire.ConsumeString(raw[n:])
	if m2 < 0 || n+m2 != len(raw) {
		return nil
	}
	return status.Error(codes.InvalidArgument, "malformed request message: "+detail)
}
