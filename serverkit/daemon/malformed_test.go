package daemon

import (
	"context"
	"errors"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rawCodec sends []byte as it is, so a test can put bytes on the wire that
// no proto message would marshal to.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("rawCodec: want []byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: want *[]byte")
	}
	*p = data.Materialize()
	return nil
}

func TestMalformedMessagesAreInvalidArgument(t *testing.T) {
	r := start(t, "")
	ctx := context.Background()
	good, _ := proto.Marshal(wrapperspb.String("ok"))
	tests := []struct {
		name string
		msg  []byte
		want codes.Code
	}{
		{name: "truncated length", msg: []byte{0x0a, 0x05, 'a'}, want: codes.InvalidArgument},
		{name: "truncated varint", msg: []byte{0xff}, want: codes.InvalidArgument},
		{name: "invalid utf-8", msg: []byte{0x0a, 0x02, 0xff, 0xfe}, want: codes.InvalidArgument},
		{name: "bad wire type", msg: []byte{0x0f}, want: codes.InvalidArgument},
		{name: "well formed", msg: good, want: codes.OK},
	}
	for _, tt := range tests {
		t.Run("unary/"+tt.name, func(t *testing.T) {
			var out []byte
			err := r.conn.Invoke(ctx, "/test.Echo/Echo", tt.msg, &out, grpc.ForceCodecV2(rawCodec{}))
			if got := status.Code(err); got != tt.want {
				t.Errorf("Echo(%x) code %v (%v), want %v", tt.msg, got, err, tt.want)
			}
		})
		t.Run("stream/"+tt.name, func(t *testing.T) {
			st, err := r.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
				"/test.Echo/Collect", grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			// A good message first: the stream is refused at the bad one.
			if err := st.SendMsg(good); err != nil {
				t.Fatal(err)
			}
			if err := st.SendMsg(tt.msg); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			_ = st.CloseSend()
			var out []byte
			for err == nil {
				err = st.RecvMsg(&out)
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			if got := status.Code(err); got != tt.want {
				t.Errorf("Collect(%x) code %v (%v), want %v", tt.msg, got, err, tt.want)
			}
		})
	}
	// The server is still serving, over the same connection.
	if got, err := r.echo(ctx, "alive"); err != nil || got != "alive" {
		t.Errorf("Echo after malformed messages = %q, %v; want alive", got, err)
	}
}
