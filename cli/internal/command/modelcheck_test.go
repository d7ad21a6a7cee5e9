package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedBaseURL is a model server URL on a loopback port nothing listens on.
func closedBaseURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}

// modelServer answers GET /v1/models with ids, when the request carries
// the key (any request when key is empty).
func modelServer(t *testing.T, key string, ids ...string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided"}}`)
			return
		}
		writeModels(w, ids)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func writeModels(w http.ResponseWriter, ids []string) {
	var items []string
	for _, id := range ids {
		items = append(items, fmt.Sprintf(`{"id":%q,"object":"model"}`, id))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(items, ","))
}

func TestCheckModelServer(t *testing.T) {
	one := modelServer(t, "k", "Qwen/Qwen2.5-VL-7B")
	two := modelServer(t, "k", "gpt-a", "gpt-b")
	none := modelServer(t, "k")
	closed := closedBaseURL(t)
	tests := []struct {
		name, base, key, model string
		want, wantErr          string
	}{
		{name: "the only model", base: one, key: "k", want: "Qwen/Qwen2.5-VL-7B"},
		{name: "base without /v1", base: strings.TrimSuffix(one, "/v1"), key: "k", want: "Qwen/Qwen2.5-VL-7B"},
		{name: "the model asked for", base: two, key: "k", model: "gpt-b", want: "gpt-b"},
		{name: "several, none chosen", base: two, key: "k", wantErr: `serves 2 models, so give --model with one of "gpt-a", "gpt-b"`},
		{name: "a model not served", base: one, key: "k", model: "qwen", wantErr: `does not serve --model "qwen"; it serves "Qwen/Qwen2.5-VL-7B"`},
		{name: "an empty list, a model given", base: none, key: "k", model: "m", want: "m"},
		{name: "an empty list, no model", base: none, key: "k", wantErr: "lists no models: give --model"},
		{name: "wrong key", base: one, key: "x", wantErr: "401 Unauthorized: Incorrect API key provided (is OPENAI_API_KEY set"},
		{name: "unreachable", base: closed, model: "m", wantErr: "model server " + closed + ": connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkModelServer(context.Background(), tt.base, tt.key, tt.model)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("checkModelServer() = %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("checkModelServer() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestRunUnreachableModel: `rollout run` against a model server nobody
// listens on says so before it starts anything, with or without --model.
func TestRunUnreachableModel(t *testing.T) {
	root := repoRoot(t)
	base := closedBaseURL(t)
	for _, model := range []string{"", "some-model"} {
		t.Run("model="+model, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "mesh")
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), []string{"run", "--data", filepath.Join(root, "examples", "tasks", "math.jsonl"),
				"--mode", "math", "--data-dir", dataDir, "--model-base-url", base, "--model", model}, &stdout, &stderr)
			want := "model server " + base + ": connection refused"
			if err == nil || err.Error() != want {
				t.Fatalf("rollout run = %v, want %q", err, want)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("the mesh started (%s exists) for an unreachable model server", dataDir)
			}
		})
	}
}

// TestRunFailsOnInfrastructureFailures: a model server that dies after the
// check fails every episode with model_error; `rollout run` says why
// (connection refused) in the summary and exits non-zero, unless
// --fail-threshold 1 tolerates it.
func TestRunFailsOnInfrastructureFailures(t *testing.T) {
	root := repoRoot(t)
	for _, tt := range []struct {
		threshold string
		wantErr   bool
	}{{"0", true}, {"1", false}} {
		t.Run("threshold="+tt.threshold, func(t *testing.T) {
			base := dyingModelServer(t, "m")
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := Run(ctx, []string{"run", "--data", filepath.Join(root, "examples", "tasks", "math.jsonl"),
				"--mode", "math", "--num-rollouts", "3", "--max-retries", "0", "--data-dir", filepath.Join(dir, "mesh"),
				"--output-dir", filepath.Join(dir, "results"), "--model-base-url", base, "--fail-threshold", tt.threshold},
				&stdout, &stderr)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "3 of 3 episodes failed for infrastructure reasons") ||
					!strings.Contains(err.Error(), "connection refused") {
					t.Fatalf("rollout run = %v, want an error naming the infrastructure failures and connection refused\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
				}
				if ExitCode(err) == 0 || errors.As(err, new(usageError)) {
					t.Errorf("exit code %d, want 1", ExitCode(err))
				}
			} else if err != nil {
				t.Fatalf("rollout run --fail-threshold 1 = %v, want nil", err)
			}
			summary := stdout.String()
			for _, want := range []string{"INFRASTRUCTURE FAILURES: 3 of 3 episodes (model_error 3)", "connection refused"} {
				if !strings.Contains(summary, want) {
					t.Errorf("summary lacks %q:\n%s", want, summary)
				}
			}
			if !strings.Contains(stderr.String(), "model: m at "+base) {
				t.Errorf("stderr does not name the model the server listed:\n%s", stderr.String())
			}
		})
	}
}

// dyingModelServer lists ids once, then stops listening: the check before
// the run passes and every later call is refused.
func dyingModelServer(t *testing.T, ids ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		writeModels(w, ids)
		once.Do(func() { l.Close() })
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String() + "/v1"
}

// TestUpChecksTheModelServer: `rollout up` checks the model server as run
// does, before it listens anywhere, and takes the server's only model.
func TestUpChecksTheModelServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	base := closedBaseURL(t)
	dataDir := filepath.Join(t.TempDir(), "mesh")
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"up", "--data-dir", dataDir, "--port-offset", "13000", "--model-base-url", base}, &stdout, &stderr)
	if want := "model server " + base + ": connection refused"; err == nil || err.Error() != want {
		t.Fatalf("rollout up = %v, want %q", err, want)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("the mesh started (%s exists)", dataDir)
	}

	base = modelServer(t, "", "only-model")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"up", "--data-dir", t.TempDir(), "--port-offset", "13000", "--model-base-url", base}, out, out)
	}()
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), "Ctrl+C") {
		select {
		case err := <-done:
			t.Fatalf("rollout up ended: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("rollout up did not come up:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if want := "model: only-model at " + base; !strings.Contains(out.String(), want) {
		t.Errorf("banner lacks %q:\n%s", want, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("rollout up: %v", err)
	}
}
