package mesh

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

func TestOffsetAddrs(t *testing.T) {
	got, err := OffsetAddrs(map[string][2]string{"a": {":50051", "127.0.0.1:9101"}, "b": {":8000", ""}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got["a"] != [2]string{":51051", "127.0.0.1:10101"} || got["b"] != [2]string{":9000", ""} {
		t.Errorf("OffsetAddrs = %v", got)
	}
	if _, err := OffsetAddrs(map[string][2]string{"a": {":65535", ""}}, 1); err == nil {
		t.Error("OffsetAddrs past port 65535 succeeded")
	}
	if _, err := OffsetAddrs(StandardAddrs, 0); err != nil {
		t.Errorf("OffsetAddrs(0) = %v", err)
	}
}

func TestWithHost(t *testing.T) {
	got, err := WithHost(map[string][2]string{"a": {":50051", "0.0.0.0:9101"}, "b": {"[::]:8000", ""}}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"a": {"127.0.0.1:50051", "127.0.0.1:9101"}, "b": {"127.0.0.1:8000", ""}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("WithHost[%s] = %v, want %v", k, got[k], w)
		}
	}
	if _, err := WithHost(map[string][2]string{"a": {"nope", ""}}, "127.0.0.1"); err == nil {
		t.Error("WithHost of an address without a port succeeded")
	}
}

// TestAuthToken: a mesh started with a token refuses calls without it, on
// gRPC and on the OpenAI-compatible front, and its services still reach
// each other: a rollout runs to the end.
func TestAuthToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := t.TempDir()
	task := []byte(`{"id":"a","question":"1+1","answer":"2","env_mode":"math"}` + "\n")
	if err := os.WriteFile(filepath.Join(root, "math.jsonl"), task, 0o644); err != nil {
		t.Fatal(err)
	}
	const token = "s3cret-token"
	m, err := Start(ctx, Options{DataDir: t.TempDir(), TaskRoots: []string{root}, Model: "fake-model",
		AuthToken: token, OpenAIAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dial := func(tok string) pb.CoordinatorClient {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if tok != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(testBearer(tok)))
		}
		cc, err := grpc.NewClient(m.Addr(Coordinator), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return pb.NewCoordinatorClient(cc)
	}
	spec := &pb.RolloutSpec{TaskSource: filepath.Join(root, "math.jsonl"), EnvMode: "math", GroupSize: 2}
	if _, err := dial("").StartRollout(ctx, &pb.StartRolloutRequest{Spec: spec}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("StartRollout without the token: %v, want Unauthenticated", err)
	}
	c := dial(token)
	ro, err := c.StartRollout(ctx, &pb.StartRolloutRequest{Spec: spec})
	if err != nil {
		t.Fatalf("StartRollout with the token: %v", err)
	}
	for {
		got, err := c.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: ro.RolloutId})
		if err != nil {
			t.Fatal(err)
		}
		if p := got.GetProgress(); p.GetDone()+p.GetFailed() >= 2 {
			if p.GetDone() != 2 {
				t.Fatalf("progress %v: want both episodes done through the authenticated mesh", p)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rollout did not finish: %v", got.GetProgress())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if m.OpenAIAddr() == "" {
		t.Fatal("no OpenAI-compatible address")
	}
	resp, err := http.Get("http://" + m.OpenAIAddr() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/models without the token: %d, want 401", resp.StatusCode)
	}
}

type testBearer string

func (b testBearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (testBearer) RequireTransportSecurity() bool { return false }

// TestTaskRoots: the embedded coordinator reads task files only inside the
// roots it is given.
func TestTaskRoots(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, outside := t.TempDir(), t.TempDir()
	task := []byte(`{"id":"a","question":"1+1","answer":"2","env_mode":"math"}` + "\n")
	for _, d := range []string{root, outside} {
		if err := os.WriteFile(filepath.Join(d, "math.jsonl"), task, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := Start(ctx, Options{DataDir: t.TempDir(), TaskRoots: []string{root}, Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cc, err := grpc.NewClient(m.Addr(Coordinator), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := pb.NewCoordinatorClient(cc)
	tests := []struct {
		source string
		want   codes.Code
	}{
		{filepath.Join(root, "math.jsonl"), codes.OK},
		{filepath.Join(outside, "math.jsonl"), codes.InvalidArgument},
	}
	for _, tt := range tests {
		_, err := c.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: tt.source, EnvMode: "math"}})
		if got := status.Code(err); got != tt.want {
			t.Errorf("StartRollout(%s) code = %v (%v), want %v", tt.source, got, err, tt.want)
		}
	}
}
