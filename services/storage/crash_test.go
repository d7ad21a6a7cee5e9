package storage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/proctest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// binDir holds the storage binary the crash test builds; TestMain removes it.
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildStorage builds cmd/storage once per test binary run.
var buildStorage = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "storage-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "storage")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/storage").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/storage: %v\n%s", err, out)
	}
	return bin, nil
})

// process is a storage server running as a child process.
type process struct {
	cmd  *exec.Cmd
	addr string
	logs *bytes.Buffer
}

func startProcess(t *testing.T, bin, dataDir string, cfg storage.Config) *process {
	t.Helper()
	addr := proctest.FreeAddr(t)
	args := []string{"--grpc-addr", addr, "--http-addr", "", "--data-dir", dataDir, "--log-level", "warn"}
	if cfg.Index != "" {
		args = append(args, "--index", cfg.Index)
	}
	if cfg.Blobs != "" {
		args = append(args, "--blobs", cfg.Blobs)
	}
	if cfg.S3Endpoint != "" {
		args = append(args, "--s3-endpoint", cfg.S3Endpoint)
	}
	p := &process{cmd: exec.Command(bin, args...), addr: addr, logs: &bytes.Buffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start storage: %v", err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

func dial(t *testing.T, addr string) pb.StorageClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := pb.NewStorageClient(conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ListStoredRollouts(ctx, &pb.ListStoredRolloutsRequest{})
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("storage at %s not answering: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKill9KeepsAcknowledgedSteps kills the storage process with SIGKILL
// while 8 writers stream steps with screenshots, restarts it, and checks
// that every acknowledged step is there, intact and not duplicated.
func TestKill9KeepsAcknowledgedSteps(t *testing.T) {
	bin, err := buildStorage()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := b.config(t)
			dataDir := t.TempDir()
			p := startProcess(t, bin, dataDir, cfg)
			c := dial(t, p.addr)

			type ack struct {
				key  *pb.StepKey
				shot []byte
			}
			var mu sync.Mutex
			var acked []ack
			var unacked [][]*pb.AppendStepsRequest
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						id := fmt.Sprintf("crash-w%d-e%d", w, n)
						msgs := []*pb.AppendStepsRequest{epMsg(episode("crash", id, "g", "t", "os", n))}
						shots := map[int32][]byte{}
						for i := int32(0); i < 6; i++ {
							shot := make([]byte, 32<<10)
							rand.Read(shot)
							// Every third step repeats the previous screenshot,
							// as idle screens do.
							if i%3 == 2 {
								shot = shots[i-1]
							}
							shots[i] = shot
							msgs = append(msgs, stepMsg(step(id, i, shot, 1)))
						}
						resp, err := appendAll(ctx, c, msgs...)
						mu.Lock()
						if err != nil {
							unacked = append(unacked, msgs)
							mu.Unlock()
							return
						}
						for _, k := range resp.GetAcked() {
							acked = append(acked, ack{key: k, shot: shots[k.GetIndex()]})
						}
						mu.Unlock()
					}
				}()
			}
			// Let the writers get going, then pull the plug.
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= 200 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.cmd.Wait()
			wg.Wait()
			if len(acked) == 0 {
				t.Fatalf("no step was acknowledged before the kill; logs:\n%s", p.logs)
			}
			if len(unacked) == 0 {
				t.Fatalf("the kill interrupted no stream; the test proves nothing")
			}

			p2 := startProcess(t, bin, dataDir, cfg)
			c2 := dial(t, p2.addr)
			rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer rcancel()
			// Retrying the interrupted streams must not duplicate anything.
			for _, msgs := range unacked {
				if _, err := appendAll(rctx, c2, msgs...); err != nil {
					t.Fatalf("retry interrupted stream: %v", err)
				}
			}
			episodes := map[string]*pb.GetEpisodeResponse{}
			for _, a := range acked {
				id := a.key.GetEpisodeId()
				got, ok := episodes[id]
				if !ok {
					var err error
					got, err = c2.GetEpisode(rctx, &pb.GetEpisodeRequest{EpisodeId: id, IncludeSteps: true})
					if err != nil {
						t.Fatalf("GetEpisode %s after restart: %v", id, err)
					}
					episodes[id] = got
					seen := map[int32]bool{}
					for _, st := range got.GetSteps() {
						if seen[st.GetIndex()] {
							t.Fatalf("episode %s has step %d twice", id, st.GetIndex())
						}
						seen[st.GetIndex()] = true
					}
					if int(got.GetEpisode().GetNumSteps()) != len(got.GetSteps()) || len(got.GetSteps()) != 6 {
						t.Fatalf("episode %s: num_steps %d, %d steps stored, want 6", id, got.GetEpisode().GetNumSteps(), len(got.GetSteps()))
					}
				}
				st := got.GetSteps()[a.key.GetIndex()]
				if st.GetIndex() != a.key.GetIndex() {
					t.Fatalf("episode %s: step at %d has index %d", id, a.key.GetIndex(), st.GetIndex())
				}
				if st.GetObservation().GetScreenshot().GetSha256() != sha(a.shot) {
					t.Fatalf("step %s/%d: screenshot ref %s, want %s", id, a.key.GetIndex(), st.GetObservation().GetScreenshot().GetSha256(), sha(a.shot))
				}
				data, _, err := blobBytes(t, rctx, c2, sha(a.shot))
				if err != nil {
					t.Fatalf("GetBlob of acknowledged step %s/%d: %v", id, a.key.GetIndex(), err)
				}
				if sha(data) != sha(a.shot) {
					t.Fatalf("step %s/%d: screenshot content hashes to %s, want %s", id, a.key.GetIndex(), sha(data), sha(a.shot))
				}
			}
			t.Logf("%d steps acknowledged before SIGKILL, %d streams interrupted and retried; all intact", len(acked), len(unacked))
		})
	}
}
