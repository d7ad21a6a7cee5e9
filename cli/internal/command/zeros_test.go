package command

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rolloutmesh/rolloutmesh/cli/internal/mesh"
	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestZeroScoresSummary stores finished episodes in a real storage (the
// embedded mesh's) and reads back why the zeros scored 0: each kind of
// note once per episode, the most frequent first with an example, and the
// zeros without a note counted apart. Scores above 0 and failed episodes
// are not zeros.
func TestZeroScoresSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := mesh.Start(ctx, mesh.Options{DataDir: t.TempDir(), Model: "fake-model"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cc := dialMesh(t, m, mesh.Storage)
	store := pb.NewStorageClient(cc)
	const (
		missing = `the result getter \"vm_file\" gave None: the guest has no file /home/user/Desktop/report.xlsx`
		broken  = `report.docx does not open as a .docx: open zip: zip: not a valid zip file`
	)
	episodes := []struct {
		status  pb.EpisodeStatus
		score   float64
		details string
	}{
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0, `{"notes": [["` + missing + `"]]}`},
		// the same kind twice in one episode counts once
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0, `{"notes": [["` + missing + `"], ["` + missing + `"]]}`},
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0, `{"notes": [["` + broken + `"], []]}`},
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0, `{"scores": [0]}`},
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0, ``},
		{pb.EpisodeStatus_EPISODE_STATUS_DONE, 0.5, `{"notes": [["` + broken + `"]]}`},
		{pb.EpisodeStatus_EPISODE_STATUS_FAILED, 0, `{"notes": [["` + broken + `"]]}`},
	}
	stream, err := store.AppendSteps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for i, e := range episodes {
		ep := &pb.Episode{EpisodeId: fmt.Sprintf("e%d", i), RolloutId: "r-zeros", GroupId: "g", TaskId: "t1", Domain: "libreoffice_calc",
			Status: e.status, Score: e.score, EvaluatorDetailsJson: e.details, Attempt: 1,
			StartTime: timestamppb.New(start.Add(time.Duration(i) * time.Second)), EndTime: timestamppb.New(start.Add(time.Minute))}
		if e.status == pb.EpisodeStatus_EPISODE_STATUS_FAILED {
			ep.FailureReason = "env_error"
		}
		if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	s, err := zeroScores(ctx, store, "r-zeros")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.write(&out)
	want := `SCORED 0: 5 episodes; the evaluator noted why for 3, and nothing for the rest (a value that did not match)
      2  the result getter "vm_file" gave None
         e.g. libreoffice_calc/t1: the result getter "vm_file" gave None: the guest has no file /home/user/Desktop/report.xlsx
      1  report.docx does not open as a .docx
         e.g. libreoffice_calc/t1: report.docx does not open as a .docx: open zip: zip: not a valid zip file
`
	if got := out.String(); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

// TestZeroSummaryBounds: past maxZeroKinds kinds the rest are counted, and
// a long note is cut at a character.
func TestZeroSummaryBounds(t *testing.T) {
	s := zeroSummary{kinds: map[string]int64{}, example: map[string]string{}}
	for i := range maxZeroKinds + 2 {
		s.add(&pb.Episode{TaskId: "t", EvaluatorDetailsJson: fmt.Sprintf(`{"notes": [["kind %d"]]}`, i)})
	}
	var out bytes.Buffer
	s.write(&out)
	if !bytes.Contains(out.Bytes(), []byte("  and 2 more kinds of note\n")) {
		t.Errorf("summary lacks the count of kinds left out:\n%s", out.String())
	}
	if got, want := truncateNote("ééé", 3), "é…"; got != want {
		t.Errorf("truncateNote = %q, want %q", got, want)
	}
}
