package command

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// TestViewServesEmbeddedData: `rollout view ID` over a data directory an
// embedded storage wrote serves that rollout's page until cancelled.
func TestViewServesEmbeddedData(t *testing.T) {
	data := t.TempDir()
	env := daemontest.Env(t)
	env.DataDir = filepath.Join(data, "storage")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := storage.New(ctx, storage.Config{}, env)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(daemontest.Serve(t, env, svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := pb.NewStorageClient(conn).AppendSteps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ep := &pb.Episode{EpisodeId: "ep-1", RolloutId: "r-view", GroupId: "g", TaskId: "t-1", Domain: "os",
		Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1, StartTime: timestamppb.Now(), EndTime: timestamppb.Now()}
	if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr syncBuffer
	vctx, vcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(vctx, []string{"view", "r-view", "--data-dir", data, "--listen", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	var u string
	for deadline := time.Now().Add(20 * time.Second); u == ""; {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			u = line
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL printed; stderr: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:") || !strings.HasSuffix(u, "/ui/rollouts/r-view") {
		t.Fatalf("URL = %q, want http://127.0.0.1:PORT/ui/rollouts/r-view", u)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-episode="ep-1"`) {
		t.Errorf("GET %s = %d, want 200 with ep-1", u, resp.StatusCode)
	}
	vcancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("view after Ctrl+C: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("view did not stop when cancelled")
	}
}

func TestViewURLs(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     string
		usageErr bool
	}{
		{[]string{"view", "--remote"}, "http://localhost:9105/ui/\n", false},
		{[]string{"view", "--remote", "--storage-http", "0.0.0.0:9200", "r 1"}, "http://localhost:9200/ui/rollouts/r%201\n", false},
		{[]string{"view", "r-1", "--remote", "--storage-http", "mesh.lan:9105"}, "http://mesh.lan:9105/ui/rollouts/r-1\n", false},
		{[]string{"view", "--remote", "--storage-http", "nope"}, "", true},
		{[]string{"view", "a", "b", "--remote"}, "", true},
		{[]string{"view", "--data-dir", "/nonexistent/rolloutmesh"}, "", true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Setenv("ROLLOUTMESH_STORAGE_HTTP", "")
			var out, errOut bytes.Buffer
			err := Run(context.Background(), tc.args, &out, &errOut)
			if got := ExitCode(err) == 2; err != nil && got != tc.usageErr || err == nil && tc.usageErr {
				t.Fatalf("err = %v, want usage error %v", err, tc.usageErr)
			}
			if out.String() != tc.want {
				t.Errorf("stdout = %q, want %q", out.String(), tc.want)
			}
		})
	}
}
