package coordinator_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/serverkit/envflag"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator"
)

// healthy checks that the coordinator still answers after bad input.
func (h *harness) healthy(t *testing.T) {
	t.Helper()
	ctx := ctxT(t, 5*time.Second)
	resp, err := grpc_health_v1.NewHealthClient(h.cc).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || resp.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health after bad input: %v, %v", resp, err)
	}
	if _, err := h.client.ListRollouts(ctx, &pb.ListRolloutsRequest{}); err != nil {
		t.Fatalf("ListRollouts after bad input: %v", err)
	}
}

// TestTaskSourceConfined: task_source reads only inside the task roots,
// refuses devices and FIFOs at once, and its errors never quote a file
// (issue #16 items 1 and 2).
func TestTaskSourceConfined(t *testing.T) {
	outside := t.TempDir()
	shadow := filepath.Join(outside, "shadow")
	if err := os.WriteFile(shadow, []byte("root:$6$SECRETHASH:19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "math.jsonl"), []byte(`{"id":"a","question":"1+1","answer":"2","env_mode":"math"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("root:$6$SECRETHASH\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadow, filepath.Join(root, "escape.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(root, "zero.jsonl")); err != nil {
		t.Fatal(err)
	}
	// /dev is a root too, so that /dev/zero is refused for what it is, not
	// only for where it is.
	h := newHarness(t, coordinator.Config{TaskRoots: []string{root, "/dev"}})
	tests := []struct{ name, source string }{
		{"device", "/dev/zero"},
		{"fifo", "fifo.jsonl"},
		{"symlink to a device", "zero.jsonl"},
		{"outside the roots", shadow},
		{"dot-dot out of a root", filepath.Join(root, "..", filepath.Base(outside), "shadow")},
		{"relative dot-dot", "../" + filepath.Base(outside) + "/shadow"},
		{"symlink out of a root", "escape.jsonl"},
		{"not a task file", "notes.txt"},
		{"etc shadow", "/etc/shadow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxT(t, 10*time.Second)
			start := time.Now()
			_, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: tt.source, EnvMode: "math"}})
			if got := status.Code(err); got != codes.InvalidArgument {
				t.Fatalf("StartRollout(%s) code = %v (%v), want InvalidArgument", tt.source, got, err)
			}
			msg := status.Convert(err).Message()
			if !strings.HasPrefix(msg, "spec.task_source:") {
				t.Errorf("message %q does not name spec.task_source", msg)
			}
			if strings.Contains(msg, "SECRET") || strings.Contains(msg, "$6$") || strings.Contains(msg, "'r'") {
				t.Errorf("message quotes file content: %q", msg)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v", d)
			}
		})
	}
	h.healthy(t)
	ctx := ctxT(t, 10*time.Second)
	for _, ok := range []string{"math.jsonl", filepath.Join(root, "math.jsonl")} {
		if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{TaskSource: ok, EnvMode: "math"}}); err != nil {
			t.Errorf("StartRollout(%s) inside the root: %v", ok, err)
		}
	}
}

// TestTaskRootFlag: --task-root repeats, and its environment form lists
// several roots in one value.
func TestTaskRootFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"repeated flag", []string{"--task-root", "/a", "--task-root", "/b"}, "", "/a,/b"},
		{"environment list", nil, "/a,/b:/c", "/a,/b,/c"},
		{"flag wins over environment", []string{"--task-root", "/x"}, "/a", "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg coordinator.Config
			fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			lookup := func(k string) (string, bool) {
				if k == "ROLLOUTMESH_TASK_ROOT" && tt.env != "" {
					return tt.env, true
				}
				return "", false
			}
			if err := envflag.Apply(fs, "ROLLOUTMESH_", lookup); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cfg.TaskRoots, ","); got != tt.want {
				t.Errorf("TaskRoots = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := coordinator.New(t.Context(), coordinator.Config{TaskRoots: []string{filepath.Join(t.TempDir(), "missing")}}, daemontest.Env(t)); err == nil {
		t.Error("New with a missing task root succeeded")
	}
}

// TestUnknownIDsNotFound: every RPC naming a rollout or batch that does not
// exist answers NotFound, never an empty success (issue #16 item 8).
func TestUnknownIDsNotFound(t *testing.T) {
	h := newHarness(t, coordinator.Config{})
	ctx := ctxT(t, 10*time.Second)
	if _, err := h.client.StartRollout(ctx, &pb.StartRolloutRequest{RolloutId: "known", Spec: &pb.RolloutSpec{Tasks: mathTasks(1)}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"GetRollout", func() error {
			_, err := h.client.GetRollout(ctx, &pb.GetRolloutRequest{RolloutId: "nope"})
			return err
		}},
		{"CancelRollout", func() error {
			_, err := h.client.CancelRollout(ctx, &pb.CancelRolloutRequest{RolloutId: "nope"})
			return err
		}},
		{"AddTasks", func() error {
			_, err := h.client.AddTasks(ctx, &pb.AddTasksRequest{RolloutId: "nope", Tasks: mathTasks(1)})
			return err
		}},
		{"GetBatch", func() error {
			_, err := h.client.GetBatch(ctx, &pb.GetBatchRequest{RolloutId: "nope"})
			return err
		}},
		{"AckBatch unknown rollout", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: "nope", BatchId: "b-1"})
			return err
		}},
		{"AckBatch unknown batch", func() error {
			_, err := h.client.AckBatch(ctx, &pb.AckBatchRequest{RolloutId: "known", BatchId: "b-1"})
			return err
		}},
		{"ListQueuedEpisodes", func() error {
			_, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{RolloutId: "nope"})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := status.Code(tt.call()); got != codes.NotFound {
				t.Errorf("code = %v, want NotFound", got)
			}
		})
	}
	all, err := h.client.ListQueuedEpisodes(ctx, &pb.ListQueuedEpisodesRequest{})
	if err != nil || len(all.Episodes) != 1 {
		t.Errorf("ListQueuedEpisodes(all) = %v, %v; want the known rollout's one episode", all, err)
	}
}
