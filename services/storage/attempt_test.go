package storage_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// testStaleAttemptSteps: an episode requeued runs again under its id with
// attempt+1, while the runner of the earlier attempt may still be
// retrying its stream (header of its attempt, then its unacknowledged
// steps). Steps carry no attempt; the stream's header names it. Steps of
// the earlier attempt must never be stored as the later attempt's, nor
// acknowledged as its duplicates: they are refused with FailedPrecondition
// naming both attempts, and the later attempt's steps stay as they were.
// A stream of the current attempt (a legitimate retry) still works.
func testStaleAttemptSteps(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	const id = "rsa-e1"
	hdr := func(attempt int32) *pb.Episode {
		e := episode("rsa", id, "g", "t", "os", 0)
		e.Attempt = attempt
		return e
	}
	stepOf := func(attempt, idx int32) *pb.Step {
		st := step(id, idx, pngBytes(t, int(1000*attempt+idx)), int64(attempt))
		st.Error = fmt.Sprint("attempt ", attempt)
		return st
	}
	stream := func(attempt int32, idx ...int32) []*pb.AppendStepsRequest {
		msgs := []*pb.AppendStepsRequest{epMsg(hdr(attempt))}
		for _, i := range idx {
			msgs = append(msgs, stepMsg(stepOf(attempt, i)))
		}
		return msgs
	}
	if _, err := appendAll(ctx, c, stream(1, 0, 1, 2)...); err != nil {
		t.Fatalf("attempt 1: %v", err)
	}
	if _, err := appendAll(ctx, c, stream(2, 0)...); err != nil {
		t.Fatalf("attempt 2: %v", err)
	}

	// The runner of attempt 1 retries its stream: the header of attempt 1
	// and the steps storage had not acknowledged (and one it had).
	_, err := appendAll(ctx, c, stream(1, 0, 1, 2, 3)...)
	wantCode(t, err, codes.FailedPrecondition, "attempt 1")
	wantCode(t, err, codes.FailedPrecondition, "attempt 2")

	// Attempt 1's header went before attempt 2 started, its steps after:
	// the check holds when the steps commit, not only when they arrive.
	late, err := c.AppendSteps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Send(epMsg(hdr(2))); err != nil {
		t.Fatal(err)
	}
	if err := late.Send(stepMsg(stepOf(2, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := appendAll(ctx, c, stream(3, 0)...); err != nil {
		t.Fatalf("attempt 3: %v", err)
	}
	if err := late.Send(stepMsg(stepOf(2, 2))); err != nil {
		t.Fatal(err)
	}
	_, err = late.CloseAndRecv()
	wantCode(t, err, codes.FailedPrecondition, "attempt 2")

	// A retry of the current attempt is idempotent, and a stream without
	// a header appends to the stored attempt.
	resp, err := appendAll(ctx, c, stream(3, 0, 1)...)
	if err != nil {
		t.Fatalf("retry of attempt 3: %v", err)
	}
	if len(resp.GetAcked()) != 2 || resp.GetDuplicates() != 1 {
		t.Errorf("retry of attempt 3: acked %d, duplicates %d; want 2, 1", len(resp.GetAcked()), resp.GetDuplicates())
	}
	if _, err := appendAll(ctx, c, stepMsg(stepOf(3, 2))); err != nil {
		t.Fatalf("headerless step of attempt 3: %v", err)
	}

	got, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: id, IncludeSteps: true})
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for _, st := range got.GetSteps() {
		from = append(from, fmt.Sprintf("%d:%s", st.GetIndex(), st.GetError()))
	}
	want := []string{"0:attempt 3", "1:attempt 3", "2:attempt 3"}
	if fmt.Sprint(from) != fmt.Sprint(want) || got.GetEpisode().GetNumSteps() != 3 || got.GetEpisode().GetAttempt() != 3 {
		t.Errorf("stored attempt %d, num_steps %d, steps %v; want attempt 3, 3 steps %v",
			got.GetEpisode().GetAttempt(), got.GetEpisode().GetNumSteps(), from, want)
	}
	if v := got.GetEpisode().GetModelVersions(); !proto.Equal(&pb.Episode{ModelVersions: v}, &pb.Episode{ModelVersions: []int64{3}}) {
		t.Errorf("model versions %v, want [3]", v)
	}
}
