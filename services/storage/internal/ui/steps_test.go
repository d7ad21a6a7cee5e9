package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// TestEpisodePagesShowEveryStep: step indexes need not be dense (a runner
// may number its steps with gaps), and every step must be on exactly one
// page of the episode. Pages were ranges of indexes, offset by 50 per
// page: with steps 0, 100, 200... page 2 repeated most of page 1 and the
// steps past it were on no page.
func TestEpisodePagesShowEveryStep(t *testing.T) {
	v := startViewer(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := v.client.AppendSteps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []*pb.AppendStepsRequest{{Item: &pb.AppendStepsRequest_Episode{Episode: &pb.Episode{EpisodeId: "ep-sparse",
		RolloutId: "r-sparse", Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Attempt: 1}}}}
	const steps = 60
	for i := range steps {
		msgs = append(msgs, &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: &pb.Step{EpisodeId: "ep-sparse",
			Index: int32(i * 100), ModelCall: &pb.ModelCall{ResponseText: fmt.Sprint("step ", i)}}}})
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}

	shown := map[string]int{}
	sectionRE := regexp.MustCompile(`<section class="step[^"]*" id="step-(\d+)"`)
	for page := 1; page <= 2; page++ {
		resp, err := http.Get(fmt.Sprintf("%s/ui/episodes/ep-sparse?page=%d", v.url, page))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d", page, resp.StatusCode)
		}
		for _, m := range sectionRE.FindAllStringSubmatch(string(body), -1) {
			shown[m[1]]++
		}
	}
	for i := range steps {
		if n := shown[fmt.Sprint(i*100)]; n != 1 {
			t.Errorf("step %d shown on %d pages, want 1", i*100, n)
		}
	}
}
