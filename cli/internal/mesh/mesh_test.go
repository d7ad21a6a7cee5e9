package mesh

import (
	"context"
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
