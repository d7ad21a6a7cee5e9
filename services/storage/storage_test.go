package storage_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// startService runs the storage service for cfg on a loopback port.
func startService(t *testing.T, cfg storage.Config) pb.StorageClient {
	t.Helper()
	env := daemontest.Env(t)
	// Request logs at debug level drown the failures.
	env.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	return startServiceEnv(t, cfg, env)
}

// startServiceEnv is startService with the caller's logger and registry.
func startServiceEnv(t *testing.T, cfg storage.Config, env daemon.Env) pb.StorageClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := storage.New(ctx, cfg, env)
	if err != nil {
		t.Fatalf("storage.New: %v", err)
	}
	addr := daemontest.Serve(t, env, svc)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewStorageClient(conn)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func episode(rollout, id, group, task, domain string, start int) *pb.Episode {
	return &pb.Episode{EpisodeId: id, RolloutId: rollout, GroupId: group, TaskId: task, Domain: domain,
		Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING, Attempt: 1, Seed: 7,
		StartTime: timestamppb.New(t0.Add(time.Duration(start) * time.Second)), Instruction: "do " + task}
}

func step(ep string, idx int32, screenshot []byte, version int64) *pb.Step {
	return &pb.Step{EpisodeId: ep, Index: idx,
		Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: screenshot, MediaType: "image/png"}},
		ModelCall: &pb.ModelCall{ResponseText: fmt.Sprintf("click %d", idx), ModelVersion: version,
			PromptTokenIds: []int32{1, 2, 3}, CompletionTokenIds: []int32{4, 5},
			Logprobs: []*pb.TokenLogprob{{TokenId: 4, Logprob: -0.5}, {TokenId: 5, Logprob: -0.25}}},
		Actions:   []*pb.Action{{ActionType: "CLICK", ParametersJson: `{"x":1,"y":2}`}},
		Results:   []*pb.ActionResult{{Ok: true}},
		StartTime: timestamppb.New(t0.Add(time.Duration(idx) * time.Second)),
	}
}

func epMsg(e *pb.Episode) *pb.AppendStepsRequest {
	return &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: e}}
}

func stepMsg(s *pb.Step) *pb.AppendStepsRequest {
	return &pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: s}}
}

// appendAll sends msgs on one AppendSteps stream. Messages are cloned so
// callers can resend them.
func appendAll(ctx context.Context, c pb.StorageClient, msgs ...*pb.AppendStepsRequest) (*pb.AppendStepsResponse, error) {
	stream, err := c.AppendSteps(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := stream.Send(proto.Clone(m).(*pb.AppendStepsRequest)); err != nil {
			break // the server ended the stream; CloseAndRecv has why
		}
	}
	return stream.CloseAndRecv()
}

func finished(e *pb.Episode, status pb.EpisodeStatus, score float64, reason string) *pb.Episode {
	e = proto.Clone(e).(*pb.Episode)
	e.Status, e.Score, e.FailureReason = status, score, reason
	e.EndTime = timestamppb.New(e.GetStartTime().AsTime().Add(time.Minute))
	return e
}

func blobBytes(t *testing.T, ctx context.Context, c pb.StorageClient, sha string) ([]byte, []*pb.GetBlobResponse, error) {
	t.Helper()
	stream, err := c.GetBlob(ctx, &pb.GetBlobRequest{Sha256: sha})
	if err != nil {
		return nil, nil, err
	}
	var data []byte
	var msgs []*pb.GetBlobResponse
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return data, msgs, nil
		}
		if err != nil {
			return nil, msgs, err
		}
		msgs = append(msgs, m)
		data = append(data, m.GetData()...)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
	if field != "" && !strings.Contains(status.Convert(err).Message(), field) {
		t.Fatalf("error %q does not name field %q", status.Convert(err).Message(), field)
	}
}

func TestSuite(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := b.config(t)
			cfg.MaxBlobBytes = 3 << 20
			c := startService(t, cfg)
			t.Run("AppendIdempotentAndRead", func(t *testing.T) { testAppendAndRead(t, c) })
			t.Run("GetBlobChunks", func(t *testing.T) { testGetBlobChunks(t, c) })
			t.Run("ListEpisodes", func(t *testing.T) { testListEpisodes(t, c) })
			t.Run("StatsAndCompare", func(t *testing.T) { testStatsAndCompare(t, c) })
			t.Run("Exports", func(t *testing.T) { testExports(t, c) })
			t.Run("ExportAdvantages", func(t *testing.T) { testExportAdvantages(t, c) })
			t.Run("RejectsBadInputWithoutPartialState", func(t *testing.T) { testRejects(t, c) })
			t.Run("DeleteRolloutKeepsSharedBlobs", func(t *testing.T) { testDelete(t, c) })
			t.Run("DeleteWhileWriting", func(t *testing.T) { testDeleteWhileWriting(t, c) })
			t.Run("UnknownIDsAreNotFound", func(t *testing.T) { testUnknownIDs(t, c) })
			t.Run("StaleAttemptStepsRefused", func(t *testing.T) { testStaleAttemptSteps(t, c) })
		})
	}
}

func testAppendAndRead(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	a, b := pngBytes(t, 1), pngBytes(t, 2)
	tree := []byte("<desktop-frame/>")
	ep := episode("ra", "ra-e1", "ra-g1", "task1", "os", 0)
	s0, s1, s2 := step("ra-e1", 0, a, 1), step("ra-e1", 1, a, 1), step("ra-e1", 2, b, 2)
	s2.Observation.AccessibilityTree = &pb.BlobRef{Data: tree, MediaType: "application/xml"}
	s2.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
		{Part: &pb.ContentPart_Text{Text: "look"}},
		{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: b, MediaType: "image/png"}}},
	}}}
	s2.Done = true
	final := &pb.Episode{EpisodeId: "ra-e1", RolloutId: "ra", GroupId: "ra-g1", TaskId: "task1", Domain: "os",
		Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1, Attempt: 1, EndTime: timestamppb.New(t0.Add(time.Minute))}
	msgs := []*pb.AppendStepsRequest{epMsg(ep), stepMsg(s0), stepMsg(s1), stepMsg(s2), epMsg(final)}

	resp, err := appendAll(ctx, c, msgs...)
	if err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}
	wantAcked := []*pb.StepKey{{EpisodeId: "ra-e1", Index: 0}, {EpisodeId: "ra-e1", Index: 1}, {EpisodeId: "ra-e1", Index: 2}}
	if got := resp.GetAcked(); len(got) != 3 || !proto.Equal(got[0], wantAcked[0]) || !proto.Equal(got[2], wantAcked[2]) {
		t.Fatalf("acked = %v, want %v", got, wantAcked)
	}
	if got, want := resp.GetBlobBytesWritten(), int64(len(a)+len(b)+len(tree)); got != want {
		t.Errorf("blob_bytes_written = %d, want %d (each content once)", got, want)
	}
	if resp.GetEpisodes() != 2 || resp.GetDuplicates() != 0 {
		t.Errorf("episodes, duplicates = %d, %d; want 2, 0", resp.GetEpisodes(), resp.GetDuplicates())
	}

	retry, err := appendAll(ctx, c, msgs...)
	if err != nil {
		t.Fatalf("retried AppendSteps: %v", err)
	}
	if len(retry.GetAcked()) != 3 || retry.GetDuplicates() != 3 || retry.GetBlobBytesWritten() != 0 {
		t.Errorf("retry: acked %d, duplicates %d, blob bytes %d; want 3, 3, 0", len(retry.GetAcked()), retry.GetDuplicates(), retry.GetBlobBytesWritten())
	}

	// A late header of the same attempt does not reopen a finished episode.
	if _, err := appendAll(ctx, c, epMsg(ep)); err != nil {
		t.Fatalf("late header: %v", err)
	}
	got, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "ra-e1", IncludeSteps: true})
	if err != nil {
		t.Fatalf("GetEpisode: %v", err)
	}
	if got.GetEpisode().GetNumSteps() != 3 || len(got.GetSteps()) != 3 {
		t.Fatalf("num_steps %d, steps %d; want 3, 3", got.GetEpisode().GetNumSteps(), len(got.GetSteps()))
	}
	if !slices.Equal(got.GetEpisode().GetModelVersions(), []int64{1, 2}) {
		t.Errorf("model_versions = %v, want [1 2]", got.GetEpisode().GetModelVersions())
	}
	if got.GetEpisode().GetStatus() != pb.EpisodeStatus_EPISODE_STATUS_DONE || got.GetEpisode().GetScore() != 1 {
		t.Errorf("episode status %v score %v, want DONE 1", got.GetEpisode().GetStatus(), got.GetEpisode().GetScore())
	}
	// The final header omitted what did not change; the stored episode
	// keeps it.
	if !got.GetEpisode().GetStartTime().AsTime().Equal(t0) || got.GetEpisode().GetInstruction() != "do task1" {
		t.Errorf("episode start %v instruction %q, want %v and the first header's instruction",
			got.GetEpisode().GetStartTime(), got.GetEpisode().GetInstruction(), t0)
	}
	for i, st := range got.GetSteps() {
		ss := st.GetObservation().GetScreenshot()
		want := a
		if i == 2 {
			want = b
		}
		if ss.GetSha256() != sha(want) || ss.GetSize() != int64(len(want)) || len(ss.GetData()) != 0 {
			t.Errorf("step %d screenshot = %s/%d/%d bytes inline, want %s/%d/0", i, ss.GetSha256(), ss.GetSize(), len(ss.GetData()), sha(want), len(want))
		}
	}
	img := got.GetSteps()[2].GetModelCall().GetNewMessages()[0].GetContent()[1].GetImage()
	if img.GetBlob().GetSha256() != sha(b) || len(img.GetData()) != 0 {
		t.Errorf("message image = %v, want a blob ref to %s", img, sha(b))
	}

	inl, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "ra-e1", IncludeSteps: true, InlineBlobs: true})
	if err != nil {
		t.Fatalf("GetEpisode inline: %v", err)
	}
	if d := inl.GetSteps()[2].GetObservation().GetAccessibilityTree().GetData(); !bytes.Equal(d, tree) {
		t.Errorf("inline tree = %q, want %q", d, tree)
	}
	if d := inl.GetSteps()[2].GetModelCall().GetNewMessages()[0].GetContent()[1].GetImage().GetBlob().GetData(); !bytes.Equal(d, b) {
		t.Errorf("inline message image differs from what was sent")
	}

	// A step may reference stored content by hash only.
	ref := step("ra-e1", 3, nil, 2)
	ref.Observation.Screenshot = &pb.BlobRef{Sha256: sha(a)}
	if _, err := appendAll(ctx, c, stepMsg(ref)); err != nil {
		t.Fatalf("append step by reference: %v", err)
	}
}

func testGetBlobChunks(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	big := make([]byte, 2<<20+12345)
	rand.Read(big)
	ep := episode("rb", "rb-e1", "rb-g1", "task-big", "chrome", 0)
	ep.Recording = &pb.BlobRef{Data: big, MediaType: "video/mp4"}
	if _, err := appendAll(ctx, c, epMsg(ep)); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}
	data, msgs, err := blobBytes(t, ctx, c, sha(big))
	if err != nil {
		t.Fatalf("GetBlob: %v", err)
	}
	if !bytes.Equal(data, big) {
		t.Fatalf("GetBlob returned %d bytes differing from the %d sent", len(data), len(big))
	}
	if len(msgs) != 3 {
		t.Errorf("chunks = %d, want 3", len(msgs))
	}
	for i, m := range msgs {
		if len(m.GetData()) > 1<<20 {
			t.Errorf("chunk %d has %d bytes, more than 1 MiB", i, len(m.GetData()))
		}
	}
	if msgs[0].GetMediaType() != "video/mp4" || msgs[0].GetSize() != int64(len(big)) {
		t.Errorf("first chunk media %q size %d, want video/mp4 %d", msgs[0].GetMediaType(), msgs[0].GetSize(), len(big))
	}
	_, _, err = blobBytes(t, ctx, c, strings.Repeat("0", 64))
	wantCode(t, err, codes.NotFound, "")
}

// seedRollout stores episodes of rollout with the given (task, domain,
// status, score, version) rows, one step each.
type epSpec struct {
	id, task, domain string
	status           pb.EpisodeStatus
	score            float64
	version          int64
	reason           string
}

func seedRollout(t *testing.T, c pb.StorageClient, rollout string, specs []epSpec) {
	t.Helper()
	ctx := testCtx(t)
	var msgs []*pb.AppendStepsRequest
	for i, s := range specs {
		e := episode(rollout, s.id, rollout+"-g-"+s.task, s.task, s.domain, i)
		msgs = append(msgs, epMsg(e), stepMsg(step(s.id, 0, pngBytes(t, 1000+i), s.version)),
			epMsg(finished(e, s.status, s.score, s.reason)))
	}
	if _, err := appendAll(ctx, c, msgs...); err != nil {
		t.Fatalf("seed %s: %v", rollout, err)
	}
}

const (
	done   = pb.EpisodeStatus_EPISODE_STATUS_DONE
	failed = pb.EpisodeStatus_EPISODE_STATUS_FAILED
)

func testListEpisodes(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	seedRollout(t, c, "rl", []epSpec{
		{"rl-1", "t1", "os", done, 1, 1, ""},
		{"rl-2", "t1", "os", done, 0, 2, ""},
		{"rl-3", "t2", "chrome", failed, 0, 2, "env_setup"},
		{"rl-4", "t3", "chrome", done, 0.5, 3, ""},
		{"rl-5", "t3", "chrome", done, 1, 3, ""},
	})
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name string
		req  *pb.ListEpisodesRequest
		want []string
	}{
		{"rollout", &pb.ListEpisodesRequest{RolloutId: "rl"}, []string{"rl-1", "rl-2", "rl-3", "rl-4", "rl-5"}},
		{"task", &pb.ListEpisodesRequest{RolloutId: "rl", TaskId: "t3"}, []string{"rl-4", "rl-5"}},
		{"group", &pb.ListEpisodesRequest{GroupId: "rl-g-t1"}, []string{"rl-1", "rl-2"}},
		{"status", &pb.ListEpisodesRequest{RolloutId: "rl", Status: failed}, []string{"rl-3"}},
		{"domain", &pb.ListEpisodesRequest{RolloutId: "rl", Domain: "os"}, []string{"rl-1", "rl-2"}},
		{"score range", &pb.ListEpisodesRequest{RolloutId: "rl", MinScore: f(0.5), MaxScore: f(1)}, []string{"rl-1", "rl-4", "rl-5"}},
		{"model version", &pb.ListEpisodesRequest{RolloutId: "rl", ModelVersion: i(2)}, []string{"rl-2", "rl-3"}},
		{"no match", &pb.ListEpisodesRequest{RolloutId: "rl", TaskId: "nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.ListEpisodes(ctx, tc.req)
			if err != nil {
				t.Fatalf("ListEpisodes: %v", err)
			}
			var got []string
			for _, e := range resp.GetEpisodes() {
				got = append(got, e.GetEpisodeId())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	var got []string
	req := &pb.ListEpisodesRequest{RolloutId: "rl", PageSize: 2}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		resp, err := c.ListEpisodes(ctx, req)
		if err != nil {
			t.Fatalf("ListEpisodes page: %v", err)
		}
		for _, e := range resp.GetEpisodes() {
			got = append(got, e.GetEpisodeId())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if want := []string{"rl-1", "rl-2", "rl-3", "rl-4", "rl-5"}; !slices.Equal(got, want) {
		t.Errorf("paged = %v, want %v", got, want)
	}
	_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{PageToken: "!!"})
	wantCode(t, err, codes.InvalidArgument, "page_token")
}

func testStatsAndCompare(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	seedRollout(t, c, "rs1", []epSpec{
		{"rs1-1", "t1", "os", done, 1, 1, ""},
		{"rs1-2", "t2", "os", done, 0, 1, ""},
		{"rs1-3", "t3", "chrome", failed, 0, 1, "model_error"},
		{"rs1-4", "t4", "chrome", done, 1, 2, ""},
	})
	seedRollout(t, c, "rs2", []epSpec{
		{"rs2-1", "t1", "os", done, 1, 3, ""},
		{"rs2-2", "t2", "os", done, 1, 3, ""},
		{"rs2-3", "t3", "chrome", done, 1, 3, ""},
		{"rs2-4", "t4", "chrome", done, 0, 3, ""},
	})
	resp, err := c.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{"rs1", "rs2"}})
	if err != nil {
		t.Fatalf("GetStats: %v", err)
	}
	r1 := resp.GetRollouts()[0]
	wantOverall := &pb.StatsRow{Key: "all", Episodes: 4, Done: 3, MeanScore: 2.0 / 3, SuccessRate: 0.5, MeanSteps: 1}
	if !proto.Equal(r1.GetOverall(), wantOverall) {
		t.Errorf("rs1 overall = %v, want %v", r1.GetOverall(), wantOverall)
	}
	if got := r1.GetFailureReasons()["model_error"]; got != 1 {
		t.Errorf("rs1 failure_reasons[model_error] = %d, want 1", got)
	}
	if got := r1.GetByStatus()["EPISODE_STATUS_DONE"]; got != 3 {
		t.Errorf("rs1 by_status DONE = %d, want 3", got)
	}
	if len(r1.GetByDomain()) != 2 || r1.GetByDomain()[0].GetKey() != "chrome" || r1.GetByDomain()[0].GetSuccessRate() != 0.5 {
		t.Errorf("rs1 by_domain = %v", r1.GetByDomain())
	}
	if len(r1.GetByModelVersion()) != 2 || r1.GetByModelVersion()[1].GetKey() != "2" || r1.GetByModelVersion()[1].GetEpisodes() != 1 {
		t.Errorf("rs1 by_model_version = %v", r1.GetByModelVersion())
	}
	if r1.GetSteps() != 4 {
		t.Errorf("rs1 steps = %d, want 4", r1.GetSteps())
	}
	if got, want := resp.GetMeanSuccessRate(), 0.625; got != want {
		t.Errorf("mean_success_rate = %v, want %v", got, want)
	}
	if got, want := resp.GetStddevSuccessRate(), 0.125; got != want {
		t.Errorf("stddev_success_rate = %v, want %v", got, want)
	}

	cmp, err := c.CompareRollouts(ctx, &pb.CompareRolloutsRequest{BaseRolloutId: "rs1", OtherRolloutId: "rs2"})
	if err != nil {
		t.Fatalf("CompareRollouts: %v", err)
	}
	type diff struct {
		task        string
		base, other string
	}
	show := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	var got []diff
	for _, d := range cmp.GetDiffs() {
		got = append(got, diff{d.GetTaskId(), show(d.BaseReward), show(d.OtherReward)})
	}
	want := []diff{{"t3", "-", "1"}, {"t4", "1", "0"}, {"t2", "0", "1"}}
	if !slices.Equal(got, want) {
		t.Errorf("diffs = %v, want %v", got, want)
	}
	if cmp.GetCommonTasks() != 3 || cmp.GetImproved() != 1 || cmp.GetRegressed() != 1 {
		t.Errorf("common %d improved %d regressed %d, want 3 1 1", cmp.GetCommonTasks(), cmp.GetImproved(), cmp.GetRegressed())
	}
	_, err = c.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{"missing"}})
	wantCode(t, err, codes.NotFound, "")
}

// testExportAdvantages: the training JSONL gives every DONE episode its
// reward and its GRPO advantage within its group, a failed episode
// neither (a failure is never a score of 0, nor part of its group's mean),
// and an episode without a group no advantage.
func testExportAdvantages(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	var msgs []*pb.AppendStepsRequest
	for _, e := range []struct {
		id     string
		status pb.EpisodeStatus
		score  float64
	}{{"ra-e1", done, 1}, {"ra-e2", done, 0}, {"ra-e3", failed, 0}, {"ra-e4", done, 0.5}, {"ra-e5", done, 1}, {"ra-e6", done, 0}} {
		group := "ra-g1"
		switch e.id {
		case "ra-e4":
			group = "ra-g2"
		case "ra-e5", "ra-e6":
			group = "" // no group: no group-relative advantage
		}
		ep := episode("ra", e.id, group, "task-"+e.id, "math", 0)
		msgs = append(msgs, epMsg(ep), epMsg(finished(ep, e.status, e.score, map[bool]string{true: "env_error"}[e.status == failed])))
	}
	if _, err := appendAll(ctx, c, msgs...); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}
	stream, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "ra", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := storage.WriteExport(ctx, stream, dir); err != nil {
		t.Fatal(err)
	}
	type got struct {
		reward, advantage *float64
	}
	lines := map[string]got{}
	for _, l := range readLines(t, filepath.Join(dir, "rollout.jsonl")) {
		var line struct {
			EpisodeID string   `json:"episode_id"`
			Reward    *float64 `json:"reward"`
			Advantage *float64 `json:"advantage"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatal(err)
		}
		lines[line.EpisodeID] = got{line.Reward, line.Advantage}
	}
	show := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	tests := []struct{ id, reward, advantage string }{
		{"ra-e1", "1", "0.5"},
		{"ra-e2", "0", "-0.5"},
		{"ra-e3", "none", "none"},
		{"ra-e4", "0.5", "0"},
		// Episodes without a group were taken for one group (key "") and
		// got advantages against each other, unrelated tasks as they are.
		{"ra-e5", "1", "none"},
		{"ra-e6", "0", "none"},
	}
	for _, tt := range tests {
		g := lines[tt.id]
		if show(g.reward) != tt.reward || show(g.advantage) != tt.advantage {
			t.Errorf("%s: reward %s advantage %s, want %s and %s", tt.id, show(g.reward), show(g.advantage), tt.reward, tt.advantage)
		}
	}
}

func testExports(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	a, b := pngBytes(t, 11), pngBytes(t, 12)
	rec := []byte("not really an mp4")
	ep := episode("rx", "rx-e1", "rx-g1", "b6781586", "os", 0)
	ep.SystemPrompt = "you are an agent"
	ep.Recording = &pb.BlobRef{Data: rec, MediaType: "video/mp4"}
	s0 := step("rx-e1", 0, a, 4)
	s0.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
		{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: a, MediaType: "image/png"}}}}}}
	s1 := step("rx-e1", 1, b, 5)
	s1.ModelCall.PromptTokenIds = []int32{1, 2, 3, 4, 5, 6}
	s1.ModelCall.CompletionTokenIds = []int32{7}
	s1.ModelCall.Logprobs = []*pb.TokenLogprob{{TokenId: 7, Logprob: -1}}
	s1.Actions = []*pb.Action{{ActionType: "DONE"}}
	s1.Done = true
	failedEp := episode("rx", "rx-e2", "rx-g2", "t-fail", "chrome", 1)
	if _, err := appendAll(ctx, c, epMsg(ep), stepMsg(s0), stepMsg(s1), epMsg(finished(ep, done, 1, "")),
		epMsg(finished(failedEp, failed, 0, "env_setup"))); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}

	dir := t.TempDir()
	stream, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "rx", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := storage.WriteExport(ctx, stream, dir)
	if err != nil {
		t.Fatalf("WriteExport jsonl: %v", err)
	}
	if sum.Files != 1 {
		t.Errorf("jsonl files = %d, want 1", sum.Files)
	}
	lines := readLines(t, filepath.Join(dir, "rollout.jsonl"))
	if len(lines) != 2 {
		t.Fatalf("jsonl lines = %d, want 2", len(lines))
	}
	var line struct {
		EpisodeID     string    `json:"episode_id"`
		GroupID       string    `json:"group_id"`
		Reward        float64   `json:"reward"`
		ModelVersions []int64   `json:"model_versions"`
		InputIDs      []int32   `json:"input_ids"`
		ResponseMask  []int8    `json:"response_mask"`
		Logprobs      []float64 `json:"logprobs"`
		Versions      []int64   `json:"versions"`
		Messages      []struct {
			Role    string `json:"role"`
			Content []struct {
				Type     string `json:"type"`
				ImageURL *struct {
					URL string `json:"url"`
				} `json:"image_url"`
			} `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.EpisodeID != "rx-e1" || line.GroupID != "rx-g1" || line.Reward != 1 || !slices.Equal(line.ModelVersions, []int64{4, 5}) {
		t.Errorf("jsonl line header = %+v", line)
	}
	if want := []int32{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(line.InputIDs, want) {
		t.Errorf("input_ids = %v, want %v", line.InputIDs, want)
	}
	if want := []int8{0, 0, 0, 1, 1, 0, 1}; !slices.Equal(line.ResponseMask, want) {
		t.Errorf("response_mask = %v, want %v", line.ResponseMask, want)
	}
	if want := []float64{0, 0, 0, -0.5, -0.25, 0, -1}; !slices.Equal(line.Logprobs, want) {
		t.Errorf("logprobs = %v, want %v", line.Logprobs, want)
	}
	if want := []int64{-1, -1, -1, 4, 4, -1, 5}; !slices.Equal(line.Versions, want) {
		t.Errorf("versions = %v, want %v", line.Versions, want)
	}
	roles := []string{}
	for _, m := range line.Messages {
		roles = append(roles, m.Role)
	}
	if want := []string{"system", "user", "assistant", "assistant"}; !slices.Equal(roles, want) {
		t.Errorf("roles = %v, want %v", roles, want)
	}
	if u := line.Messages[1].Content[0].ImageURL.URL; u != "sha256:"+sha(a) {
		t.Errorf("image url = %q, want a sha256 ref", u)
	}

	inlineDir := t.TempDir()
	stream, err = c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "rx", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL, InlineImages: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.WriteExport(ctx, stream, inlineDir); err != nil {
		t.Fatalf("WriteExport inline: %v", err)
	}
	if l := readLines(t, filepath.Join(inlineDir, "rollout.jsonl"))[0]; !strings.Contains(l, `"url":"data:image/png;base64,`) {
		t.Errorf("inline export has no data URL")
	}

	osw := t.TempDir()
	stream, err = c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "rx", Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storage.WriteExport(ctx, stream, osw); err != nil {
		t.Fatalf("WriteExport osworld: %v", err)
	}
	task := filepath.Join(osw, "os", "b6781586")
	if got, _ := os.ReadFile(filepath.Join(task, "result.txt")); string(got) != "1.0\n" {
		t.Errorf("result.txt = %q, want %q", got, "1.0\n")
	}
	if got, _ := os.ReadFile(filepath.Join(task, "recording.mp4")); !bytes.Equal(got, rec) {
		t.Errorf("recording.mp4 differs")
	}
	traj := readLines(t, filepath.Join(task, "traj.jsonl"))
	if len(traj) != 2 {
		t.Fatalf("traj.jsonl lines = %d, want 2", len(traj))
	}
	var tl struct {
		StepNum         int             `json:"step_num"`
		ActionTimestamp string          `json:"action_timestamp"`
		Action          json.RawMessage `json:"action"`
		Response        string          `json:"response"`
		Done            bool            `json:"done"`
		ScreenshotFile  string          `json:"screenshot_file"`
	}
	if err := json.Unmarshal([]byte(traj[1]), &tl); err != nil {
		t.Fatal(err)
	}
	if tl.StepNum != 2 || string(tl.Action) != `"DONE"` || !tl.Done || tl.ActionTimestamp != "20260101@120001" || tl.ScreenshotFile != "step_2_20260101@120001.png" {
		t.Errorf("traj line = %+v", tl)
	}
	if got, _ := os.ReadFile(filepath.Join(task, tl.ScreenshotFile)); !bytes.Equal(got, b) {
		t.Errorf("%s differs from the step's screenshot", tl.ScreenshotFile)
	}
	failTask := filepath.Join(osw, "chrome", "t-fail")
	if _, err := os.Stat(filepath.Join(failTask, "result.txt")); !os.IsNotExist(err) {
		t.Errorf("failed episode has a result.txt (err %v)", err)
	}
	if l := readLines(t, filepath.Join(failTask, "traj.jsonl")); len(l) != 1 || !strings.Contains(l[0], `"Error"`) {
		t.Errorf("failed episode traj = %v, want one Error line", l)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func testRejects(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	fresh := pngBytes(t, 4242)
	good := func(id string) *pb.Episode { return episode("rbad", id, "g", "task", "os", 0) }
	bad := func(mut func(*pb.Step)) *pb.Step {
		s := step("rbad-x", 1, pngBytes(t, 4343), 1)
		mut(s)
		return s
	}
	for _, tc := range []struct {
		name  string
		msgs  []*pb.AppendStepsRequest
		field string
	}{
		{"step before its episode", []*pb.AppendStepsRequest{stepMsg(step("rbad-none", 0, fresh, 1))}, "step.episode_id"},
		{"empty message", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), {}}, "item"},
		{"episode id escapes", []*pb.AppendStepsRequest{epMsg(good("../../etc"))}, "episode.episode_id"},
		{"episode id with slash", []*pb.AppendStepsRequest{epMsg(good("a/b"))}, "episode.episode_id"},
		{"task id dot-dot", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.TaskId = ".."; return e }())}, "episode.task_id"},
		{"missing rollout", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.RolloutId = ""; return e }())}, "episode.rollout_id"},
		{"negative index", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), stepMsg(step("rbad-x", 0, fresh, 1)),
			stepMsg(bad(func(s *pb.Step) { s.Index = -1 }))}, "step.index"},
		{"sha mismatch", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), stepMsg(step("rbad-x", 0, fresh, 1)),
			stepMsg(bad(func(s *pb.Step) { s.Observation.Screenshot.Sha256 = strings.Repeat("a", 64) }))}, "step.observation.screenshot.sha256"},
		{"bad sha", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.Observation.Screenshot = &pb.BlobRef{Sha256: "../../../etc/passwd"} }))}, "step.observation.screenshot.sha256"},
		{"unknown blob ref", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.Observation.Screenshot = &pb.BlobRef{Sha256: strings.Repeat("b", 64)} }))}, "step.observation.screenshot.sha256"},
		{"oversized blob", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), stepMsg(step("rbad-x", 0, fresh, 1)),
			stepMsg(bad(func(s *pb.Step) { s.Observation.Screenshot.Data = make([]byte, 3<<20+1) }))}, "step.observation.screenshot.data"},
		{"image with data and url", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) {
				s.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
					{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: fresh, Url: "http://x"}}}}}}
			}))}, "step.model_call.new_messages[0].content[0].image"},
		{"NaN reward", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), stepMsg(bad(func(s *pb.Step) { s.Reward = nan() }))}, "step.reward"},
		// Two DONE episodes of 1e308 summed to +Inf: GetStats answered an
		// infinite mean and every JSONL export of the rollout failed
		// (json: unsupported value: -Inf in the advantage).
		{"huge score", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.Score = 1e308; return e }())}, "episode.score"},
		{"unknown status", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.Status = 99; return e }())}, "episode.status"},
		{"huge attempt", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.Attempt = math.MaxInt32; return e }())}, "episode.attempt"},
		{"negative retry", []*pb.AppendStepsRequest{epMsg(good("rbad-x")), stepMsg(bad(func(s *pb.Step) { s.Retry = -1 }))}, "step.retry"},
		{"huge model version", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.ModelCall.ModelVersion = math.MaxInt64 }))}, "step.model_call.model_version"},
		{"negative model version", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.ModelCall.ModelVersion = -5 }))}, "step.model_call.model_version"},
		{"negative token id", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.ModelCall.PromptTokenIds = []int32{1, -7} }))}, "step.model_call.prompt_token_ids[1]"},
		{"NaN logprob", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.ModelCall.Logprobs[1].Logprob = nan() }))}, "step.model_call.logprobs[1].logprob"},
		{"negative usage", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.ModelCall.Usage = &pb.Usage{CompletionTokens: -1} }))}, "step.model_call.usage.completion_tokens"},
		// failure_reason is an indexed text column: PostgreSQL refuses an
		// index row past ~2.7 KB and any NUL byte, which failed the whole
		// group commit (other streams' steps too) with Internal.
		{"long failure reason", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode {
			e := good("rbad-x")
			// A stack trace: random hex, which PostgreSQL cannot compress
			// into its index.
			for i := 0; len(e.FailureReason) < 4000; i++ {
				e.FailureReason += sha([]byte{byte(i), byte(i >> 8)})
			}
			return e
		}())}, "episode.failure_reason"},
		{"NUL in failure reason", []*pb.AppendStepsRequest{epMsg(func() *pb.Episode { e := good("rbad-x"); e.FailureReason = "env\x00error"; return e }())},
			"episode.failure_reason"},
		{"NUL in media type", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) { s.Observation.Screenshot.MediaType = "image/png\x00" }))}, "step.observation.screenshot.media_type"},
		{"newline in image media type", []*pb.AppendStepsRequest{epMsg(good("rbad-x")),
			stepMsg(bad(func(s *pb.Step) {
				s.ModelCall.NewMessages = []*pb.ChatMessage{{Role: "user", Content: []*pb.ContentPart{
					{Part: &pb.ContentPart_Image{Image: &pb.Image{Data: fresh, MediaType: "image/png\r\nX-Evil: 1"}}}}}}
			}))}, "step.model_call.new_messages[0].content[0].image.media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := appendAll(ctx, c, tc.msgs...)
			wantCode(t, err, codes.InvalidArgument, tc.field)
			if _, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "rbad-x"}); status.Code(err) != codes.NotFound {
				t.Errorf("episode of the rejected stream is stored (err %v)", err)
			}
			if _, _, err := blobBytes(t, ctx, c, sha(fresh)); status.Code(err) != codes.NotFound {
				t.Errorf("blob of the rejected stream is readable (err %v)", err)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"GetEpisode escape", func() error {
			_, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "../index.db"})
			return err
		}, "episode_id"},
		{"GetBlob escape", func() error {
			_, _, err := blobBytes(t, ctx, c, "../../index.db")
			return err
		}, "sha256"},
		{"GetBlob uppercase", func() error {
			_, _, err := blobBytes(t, ctx, c, strings.Repeat("A", 64))
			return err
		}, "sha256"},
		{"Export escape", func() error {
			s, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "..", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "rollout_id"},
		{"Export format", func() error {
			s, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "r"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "format"},
		{"ListEpisodes page size", func() error {
			_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{PageSize: 5000})
			return err
		}, "page_size"},
		{"ListEpisodes negative page size", func() error {
			_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{PageSize: -1})
			return err
		}, "page_size"},
		{"ListEpisodes model version", func() error {
			v := int64(math.MaxInt64)
			_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{ModelVersion: &v})
			return err
		}, "model_version"},
		// Without a rollout or group, a filter that selects little walked
		// every episode of the index (0.7 s per 100,000 episodes, each call
		// holding one of the index's few read connections).
		{"ListEpisodes task without a rollout", func() error {
			_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{TaskId: "nope"})
			return err
		}, "rollout_id"},
		{"ListEpisodes score without a rollout", func() error {
			_, err := c.ListEpisodes(ctx, &pb.ListEpisodesRequest{MinScore: proto.Float64(5)})
			return err
		}, "rollout_id"},
		{"GetStats empty", func() error {
			_, err := c.GetStats(ctx, &pb.GetStatsRequest{})
			return err
		}, "rollout_ids"},
		// A rollout named twice was counted twice in the mean and the
		// deviation of the success rates, and aggregated twice.
		{"GetStats duplicate", func() error {
			_, err := c.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{"ra", "rx", "ra"}})
			return err
		}, "rollout_ids[2]"},
		{"Delete escape", func() error {
			_, err := c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "a/../../b"})
			return err
		}, "rollout_id"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), codes.InvalidArgument, tc.field) })
	}
}

// testUnknownIDs: every RPC that names a rollout, episode or blob the
// store does not have answers NotFound, never an empty success.
func testUnknownIDs(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	seedRollout(t, c, "rknown", []epSpec{{"rknown-1", "t1", "os", done, 1, 1, ""}})
	export := func(format pb.ExportFormat) func() error {
		return func() error {
			s, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "nope", Format: format})
			if err != nil {
				return err
			}
			for {
				if _, err := s.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		call func() error
		id   string // the unknown id the error names
	}{
		{"ExportRollout JSONL", export(pb.ExportFormat_EXPORT_FORMAT_JSONL), "nope"},
		{"ExportRollout OSWorld", export(pb.ExportFormat_EXPORT_FORMAT_OSWORLD), "nope"},
		{"DeleteRollout", func() error {
			_, err := c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "nope"})
			return err
		}, "nope"},
		{"GetEpisode", func() error {
			_, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "nope", IncludeSteps: true, InlineBlobs: true})
			return err
		}, "nope"},
		{"GetBlob", func() error {
			_, _, err := blobBytes(t, ctx, c, strings.Repeat("0", 64))
			return err
		}, strings.Repeat("0", 64)},
		{"GetStats one unknown of two", func() error {
			_, err := c.GetStats(ctx, &pb.GetStatsRequest{RolloutIds: []string{"rknown", "nope"}})
			return err
		}, "nope"},
		{"CompareRollouts base", func() error {
			_, err := c.CompareRollouts(ctx, &pb.CompareRolloutsRequest{BaseRolloutId: "nope", OtherRolloutId: "rknown"})
			return err
		}, "nope"},
		{"CompareRollouts other", func() error {
			_, err := c.CompareRollouts(ctx, &pb.CompareRolloutsRequest{BaseRolloutId: "rknown", OtherRolloutId: "nope"})
			return err
		}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), codes.NotFound, tc.id) })
	}
	// A known rollout whose filter selects nothing still exports (an
	// empty file), and a deleted rollout is then unknown.
	s, err := c.ExportRollout(ctx, &pb.ExportRolloutRequest{RolloutId: "rknown", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL,
		Status: pb.EpisodeStatus_EPISODE_STATUS_FAILED})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetPath() != "rollout.jsonl" || len(m.GetData()) != 0 {
		t.Errorf("export of a known rollout, no episode selected = %v, %v; want an empty rollout.jsonl", m, err)
	}
	if _, err := c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "rknown"}); err != nil {
		t.Fatalf("DeleteRollout rknown: %v", err)
	}
	_, err = c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "rknown"})
	wantCode(t, err, codes.NotFound, "rknown")
}

func testDelete(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	shared, only := pngBytes(t, 501), pngBytes(t, 502)
	e3, e4 := episode("rd3", "rd3-e", "g", "t", "os", 0), episode("rd4", "rd4-e", "g", "t", "os", 0)
	if _, err := appendAll(ctx, c, epMsg(e3), stepMsg(step("rd3-e", 0, shared, 1)), stepMsg(step("rd3-e", 1, only, 1)),
		epMsg(e4), stepMsg(step("rd4-e", 0, shared, 1))); err != nil {
		t.Fatalf("AppendSteps: %v", err)
	}
	resp, err := c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "rd3"})
	if err != nil {
		t.Fatalf("DeleteRollout: %v", err)
	}
	want := &pb.DeleteRolloutResponse{Episodes: 1, Steps: 2, Blobs: 1, BytesFreed: int64(len(only))}
	if !proto.Equal(resp, want) {
		t.Errorf("DeleteRollout = %v, want %v", resp, want)
	}
	if _, _, err := blobBytes(t, ctx, c, sha(only)); status.Code(err) != codes.NotFound {
		t.Errorf("unshared blob still readable (err %v)", err)
	}
	if got, _, err := blobBytes(t, ctx, c, sha(shared)); err != nil || !bytes.Equal(got, shared) {
		t.Errorf("shared blob lost: %v", err)
	}
	if _, err := c.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: "rd3-e"}); status.Code(err) != codes.NotFound {
		t.Errorf("deleted episode still there (err %v)", err)
	}
	ids, _ := listRollouts(t, ctx, c, 0)
	if slices.Contains(ids, "rd3") || !slices.Contains(ids, "rd4") {
		t.Errorf("stored rollouts = %v, want rd4 and not rd3", ids)
	}
	// The shared blob is freed once its last user goes; the content can
	// then be stored again.
	if resp, err := c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "rd4"}); err != nil || resp.GetBlobs() != 1 {
		t.Errorf("DeleteRollout rd4 = %v, %v; want 1 blob freed", resp, err)
	}
	if resp, err := appendAll(ctx, c, epMsg(e4), stepMsg(step("rd4-e", 0, shared, 1))); err != nil || resp.GetBlobBytesWritten() != int64(len(shared)) {
		t.Errorf("re-append after delete = %v, %v; want the blob written again", resp, err)
	}
}

// testDeleteWhileWriting races DeleteRollout of a rollout against a stream
// of another rollout that stores the same screenshot: the writer finds the
// content stored and skips writing it, then the deletion would remove it
// before the writer's commit references it. Every acknowledged step must
// keep a readable screenshot.
func testDeleteWhileWriting(t *testing.T, c pb.StorageClient) {
	ctx := testCtx(t)
	for round := 0; round < 12; round++ {
		shared := make([]byte, 8<<10)
		rand.Read(shared)
		delID, keepID := fmt.Sprintf("rdel-e%d", round), fmt.Sprintf("rkeep-e%d", round)
		if _, err := appendAll(ctx, c, epMsg(episode("rdel", delID, "g", "t", "os", 0)), stepMsg(step(delID, 0, shared, 1))); err != nil {
			t.Fatalf("AppendSteps rdel: %v", err)
		}
		// The kept stream pins the shared screenshot first, then spends a
		// while on more screenshots before it commits.
		msgs := []*pb.AppendStepsRequest{epMsg(episode("rkeep", keepID, "g", "t", "os", 0)), stepMsg(step(keepID, 0, shared, 1))}
		for i := int32(1); i < 8; i++ {
			other := make([]byte, 256<<10)
			rand.Read(other)
			msgs = append(msgs, stepMsg(step(keepID, i, other, 1)))
		}
		var wg sync.WaitGroup
		var delErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(round%4) * time.Millisecond)
			_, delErr = c.DeleteRollout(ctx, &pb.DeleteRolloutRequest{RolloutId: "rdel"})
		}()
		resp, err := appendAll(ctx, c, msgs...)
		wg.Wait()
		if err != nil || delErr != nil {
			t.Fatalf("round %d: append %v, delete %v", round, err, delErr)
		}
		if len(resp.GetAcked()) != 8 {
			t.Fatalf("round %d: %d steps acked, want 8", round, len(resp.GetAcked()))
		}
		got, _, err := blobBytes(t, ctx, c, sha(shared))
		if err != nil || !bytes.Equal(got, shared) {
			t.Fatalf("round %d: acknowledged step lost its screenshot: %v", round, err)
		}
	}
}
