package command

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
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

// writeEpisode stores one finished episode of rollout in the embedded
// mesh's data directory data, through a storage service that runs until
// the test ends.
func writeEpisode(t *testing.T, data, rollout string) {
	t.Helper()
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
	ep := &pb.Episode{EpisodeId: "ep-1", RolloutId: rollout, GroupId: "g", TaskId: "t-1", Domain: "os",
		Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1, StartTime: timestamppb.Now(), EndTime: timestamppb.Now()}
	if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
}

// TestViewServesEmbeddedData: `rollout view ID` over a data directory an
// embedded storage wrote serves that rollout's page until cancelled.
func TestViewServesEmbeddedData(t *testing.T) {
	data := t.TempDir()
	writeEpisode(t, data, "r-view")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, stop := startView(t, ctx, "view", "r-view", "--data-dir", data, "--listen", "127.0.0.1:0")
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
	stop()
}

// startView runs `rollout` with args (a view of embedded data) until the
// test ends or stop is called, and returns the URL it printed. stop wants
// it to end cleanly when cancelled.
func startView(t *testing.T, ctx context.Context, args ...string) (u string, stop func()) {
	t.Helper()
	var stdout, stderr syncBuffer
	vctx, vcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(vctx, args, &stdout, &stderr) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		vcancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("view after Ctrl+C: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("view did not stop when cancelled")
		}
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			return line, stop
		}
		select {
		case err := <-done:
			t.Fatalf("view ended before printing a URL: %v; stderr: %s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL printed; stderr: %s", stderr.String())
		}
	}
}

// fakeOpener puts an xdg-open first on PATH that records the arguments it
// was started with, one line per start, in the returned file.
func fakeOpener(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "opened")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + shellQuote(log) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// opened waits for the fake xdg-open to have been started n times and
// returns the arguments of each start.
func opened(t *testing.T, log string, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(log)
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(b) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("xdg-open was not started %d times (log: %q)", n, b)
		}
	}
}

// TestViewOpen: --open starts the desktop's browser (xdg-open) on the
// printed URL, for a remote mesh and for the viewer of embedded data.
func TestViewOpen(t *testing.T) {
	t.Setenv("ROLLOUTMESH_STORAGE_HTTP", "")
	log := fakeOpener(t)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"view", "--remote", "--storage-http", "mesh.lan:9105", "r-1", "--open"}, &stdout, &stderr); err != nil {
		t.Fatalf("view --remote --open: %v\n%s", err, stderr.String())
	}
	const remote = "http://mesh.lan:9105/ui/rollouts/r-1"
	if stdout.String() != remote+"\n" {
		t.Errorf("stdout = %q, want %q", stdout.String(), remote+"\n")
	}
	if got := opened(t, log, 1); got[0] != remote {
		t.Errorf("xdg-open started with %q, want %q", got[0], remote)
	}

	data := t.TempDir()
	writeEpisode(t, data, "r-open")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, _ := startView(t, ctx, "view", "--open", "--data-dir", data, "--listen", "127.0.0.1:0")
	got := opened(t, log, 2)
	if got[1] != u || !strings.HasSuffix(u, "/ui/") {
		t.Fatalf("xdg-open started with %q, want the printed %q", got[1], u)
	}
	// What the browser was sent to is the viewer.
	resp, err := http.Get(got[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-rollout="r-open"`) {
		t.Errorf("GET %s = %d, want 200 listing r-open", got[1], resp.StatusCode)
	}
}

// TestViewOpenWithoutXdgOpen: --open with no xdg-open says how to get it,
// after printing the URL to open by hand.
func TestViewOpenWithoutXdgOpen(t *testing.T) {
	t.Setenv("ROLLOUTMESH_STORAGE_HTTP", "")
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"view", "--remote", "--open"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--open needs xdg-open") || !strings.Contains(err.Error(), "http://localhost:9105/ui/") {
		t.Errorf("err = %v, want one naming xdg-open and the URL", err)
	}
	if stdout.String() != "http://localhost:9105/ui/\n" {
		t.Errorf("stdout = %q, want the URL", stdout.String())
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
