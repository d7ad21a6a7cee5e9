package grpcserver

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestBeginEnd checks that a call begun and ended outside the chain is
// refused, counted and logged as the chain would.
func TestBeginEnd(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	reg := prometheus.NewRegistry()
	s, err := New(Options{
		Logger: zap.New(core), Registry: reg, SlowCall: slowCall, AuthToken: "tok",
		Validate: func(_ string, req any) error {
			if req.(*wrapperspb.StringValue).GetValue() == "" {
				return errors.New("value is empty")
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.GRPC.RegisterService(&echoDesc, echoServer{})
	s.Ready()
	const method = "/test.Echo/Echo"
	authed := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer tok"))
	bad := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer nope"))
	// A truncated length: the codec marks the message malformed.
	malformedReq := &wrapperspb.StringValue{}
	if err := s.Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0xff})}, malformedReq); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		req  any
		want codes.Code
	}{
		{"no token", context.Background(), wrapperspb.String("x"), codes.Unauthenticated},
		{"wrong token", bad, wrapperspb.String("x"), codes.Unauthenticated},
		{"invalid", authed, wrapperspb.String(""), codes.InvalidArgument},
		{"malformed", authed, malformedReq, codes.InvalidArgument},
		{"ok", authed, wrapperspb.String("x"), codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Begin(tc.ctx, method, tc.req)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("Begin: code %v (%v), want %v", got, err, tc.want)
			}
			if (c == nil) != (err != nil) {
				t.Fatalf("Begin returned call %v with error %v", c, err)
			}
		})
	}
	// The refused calls were ended by Begin; the good one ends now, failed.
	c, err := s.Begin(authed, method, wrapperspb.String("y"))
	if err != nil {
		t.Fatal(err)
	}
	c.End(status.Error(codes.Unavailable, "backend down"))
	c.End(nil) // a second End does nothing
	// One call still open: begun in the "ok" case and not ended.
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_started_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo"}, 6},
		{"grpc_server_handled_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo", "grpc_code": "Unauthenticated"}, 2},
		{"grpc_server_handled_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo", "grpc_code": "InvalidArgument"}, 2},
		{"grpc_server_handled_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo", "grpc_code": "Unavailable"}, 1},
		{"grpc_server_handled_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo", "grpc_code": "OK"}, 0},
		{"grpc_server_msg_sent_total", map[string]string{"grpc_type": "unary", "grpc_service": "test.Echo", "grpc_method": "Echo"}, 0},
	} {
		if got := metricValue(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	failed := logs.FilterMessage("call failed")
	if got := failed.Len(); got != 5 {
		t.Errorf("%d calls logged as failed, want 5: %v", got, failed.All())
	}
	if got := failed.FilterField(zap.String("grpc.code", "Unavailable")).Len(); got != 1 {
		t.Errorf("Unavailable logged %d times, want 1", got)
	}
}
