package vmmanager

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"

	rolloutmeshv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// fuzzMethods are the RPCs FuzzRequests calls, chosen by the first input
// byte, with the request type the rest of the input is parsed into.
var fuzzMethods = []struct {
	method string
	new    func() proto.Message
	stream bool
}{
	{"AcquireLease", func() proto.Message { return &rolloutmeshv1.AcquireLeaseRequest{} }, false},
	{"RenewLease", func() proto.Message { return &rolloutmeshv1.RenewLeaseRequest{} }, false},
	{"ReleaseLease", func() proto.Message { return &rolloutmeshv1.ReleaseLeaseRequest{} }, false},
	{"GetLease", func() proto.Message { return &rolloutmeshv1.GetLeaseRequest{} }, false},
	{"ListLeases", func() proto.Message { return &rolloutmeshv1.ListLeasesRequest{} }, false},
	{"ListVMs", func() proto.Message { return &rolloutmeshv1.ListVMsRequest{} }, false},
	{"ListPools", func() proto.Message { return &rolloutmeshv1.ListPoolsRequest{} }, false},
	{"ForceRelease", func() proto.Message { return &rolloutmeshv1.ForceReleaseRequest{} }, false},
	{"WatchPool", func() proto.Message { return &rolloutmeshv1.WatchPoolRequest{} }, true},
}

// FuzzRequests sends requests built from fuzz input to the real service,
// through the real interceptor chain, over an in-process connection: a
// static pool of one VM whose guest is a local HTTP server, so no Docker
// or X is needed. Bytes that do not parse as the request are sent as
// they are and must be InvalidArgument; no request may get Internal or
// Unknown, and health stays SERVING.
func FuzzRequests(f *testing.F) {
	guest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("Linux")) }))
	f.Cleanup(guest.Close)
	env := daemontest.Env(f)
	// A logger bound to f may not be used inside the fuzz function.
	env.Logger = zap.NewNop()
	svc, err := New(context.Background(), Config{Pools: []PoolSpec{{
		Name: "one", Provider: "static", Size: 1, BootTimeout: Duration(10 * time.Second),
		Static: &StaticSpec{Endpoints: []string{guest.URL}},
	}}}, env)
	if err != nil {
		f.Fatal(err)
	}
	conn := daemontest.ServeInMemory(f, env, svc)
	health := healthpb.NewHealthClient(conn)
	var calls atomic.Int64

	seeds := []proto.Message{
		&rolloutmeshv1.AcquireLeaseRequest{Pool: "one", Ttl: durationpb.New(time.Minute), Holder: "h"},
		&rolloutmeshv1.RenewLeaseRequest{LeaseId: "lease-x", Token: "t", Ttl: durationpb.New(time.Minute)},
		&rolloutmeshv1.ReleaseLeaseRequest{LeaseId: "lease-x", Token: "t"},
		&rolloutmeshv1.GetLeaseRequest{LeaseId: "lease-x"},
		&rolloutmeshv1.ListLeasesRequest{Pool: "one", HolderPrefix: "h"},
		&rolloutmeshv1.ListVMsRequest{Pool: "one", State: rolloutmeshv1.VMState_VM_STATE_READY},
		&rolloutmeshv1.ListPoolsRequest{},
		&rolloutmeshv1.ForceReleaseRequest{LeaseId: "lease-x", Reason: "r"},
		&rolloutmeshv1.WatchPoolRequest{Pool: "one", IncludeInitial: true},
	}
	for i, m := range seeds {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Add([]byte{0, 0x0a, 0x05, 'a'}) // a truncated string

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := fuzzMethods[int(data[0])%len(fuzzMethods)]
		full := "/rolloutmesh.v1.VMManager/" + m.method
		body := data[1:]
		req := m.new()
		malformed := proto.Unmarshal(body, req) != nil
		if !malformed {
			// An acquire that waits for the single VM, or a watch that
			// waits for changes, would only measure the clock.
			switch r := req.(type) {
			case *rolloutmeshv1.AcquireLeaseRequest:
				r.WaitTimeout = nil
			case *rolloutmeshv1.WatchPoolRequest:
				r.IncludeInitial = true
			}
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		var err error
		var sendArg any = req
		var opts []grpc.CallOption
		if malformed {
			sendArg, opts = body, []grpc.CallOption{grpc.ForceCodecV2(daemontest.RawCodec{})}
		}
		if m.stream {
			var st grpc.ClientStream
			st, err = conn.NewStream(cctx, &grpc.StreamDesc{ServerStreams: true}, full, opts...)
			if err == nil {
				if err = st.SendMsg(sendArg); err == nil {
					_ = st.CloseSend()
					err = st.RecvMsg(new(rolloutmeshv1.WatchPoolResponse))
				}
			}
			ccancel()
		} else {
			out := new(rolloutmeshv1.Lease) // any message: only the status matters
			if malformed {
				var raw []byte
				err = conn.Invoke(cctx, full, sendArg, &raw, opts...)
			} else {
				err = conn.Invoke(cctx, full, sendArg, anyReply(m.method, out), opts...)
			}
		}
		code := status.Code(err)
		switch {
		case malformed && code != codes.InvalidArgument:
			t.Fatalf("%s with bytes that do not parse (%x): %v, want InvalidArgument", m.method, body, err)
		case code == codes.Internal || code == codes.Unknown:
			t.Fatalf("%s(%v): %v", m.method, req, err)
		}
		// Health every 16th call: each check is a call of its own, and a
		// dead or stuck server would fail the next calls as well.
		if calls.Add(1)%16 != 0 {
			return
		}
		hc, err := health.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health after %s(%v): %v, %v", m.method, req, hc.GetStatus(), err)
		}
	})
}

// anyReply returns a message of the reply type of method, so that the
// answer unmarshals.
func anyReply(method string, lease *rolloutmeshv1.Lease) proto.Message {
	switch method {
	case "AcquireLease", "RenewLease", "GetLease":
		return lease
	case "ReleaseLease":
		return &rolloutmeshv1.ReleaseLeaseResponse{}
	case "ListLeases":
		return &rolloutmeshv1.ListLeasesResponse{}
	case "ListVMs":
		return &rolloutmeshv1.ListVMsResponse{}
	case "ListPools":
		return &rolloutmeshv1.ListPoolsResponse{}
	case "ForceRelease":
		return &rolloutmeshv1.ForceReleaseResponse{}
	}
	return lease
}
