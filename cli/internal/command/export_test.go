package command

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestExportPrintsSummary: `rollout export` says what it wrote (episodes,
// files, where) in a sentence, not as a Go struct.
func TestExportPrintsSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := mesh.Start(ctx, mesh.Options{DataDir: t.TempDir(), Model: "fake-model",
		FakeScript: filepath.Join(repoRoot(t), "examples", "fakellm", "demo.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cc := dialMesh(t, m, mesh.Coordinator)
	c := pb.NewCoordinatorClient(cc)
	ro, err := c.StartRollout(ctx, &pb.StartRolloutRequest{Spec: &pb.RolloutSpec{GroupSize: 2,
		Tasks: []*pb.Task{{Id: "a", EnvMode: "math", Domain: "math", Instruction: "What is 3/8 of 96?", Answer: "36"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch(ctx, c, ro.GetRolloutId(), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		format, layout string
	}{
		{"both", "rollout.jsonl and <domain>/<task>/ in OSWorld's layout"},
		{"jsonl", "rollout.jsonl"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			var stdout, stderr bytes.Buffer
			if err := Run(ctx, []string{"export", "--storage", m.Addr(mesh.Storage), "--format", tt.format,
				"--output-dir", dir, ro.GetRolloutId()}, &stdout, &stderr); err != nil {
				t.Fatalf("rollout export: %v\n%s", err, stderr.String())
			}
			want := regexp.MustCompile(fmt.Sprintf(`^rollout %s: 2 episodes, \d+ files \([0-9.]+ (bytes|KiB)\) written to %s \(%s\)\n$`,
				ro.GetRolloutId(), regexp.QuoteMeta(dir), regexp.QuoteMeta(tt.layout)))
			if got := stdout.String(); !want.MatchString(got) || strings.Contains(got, "{") {
				t.Errorf("rollout export printed %q, want a line matching %s", got, want)
			}
		})
	}
}
