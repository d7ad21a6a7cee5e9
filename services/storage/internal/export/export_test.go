package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

func TestPythonFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{1, "1.0"}, {0, "0.0"}, {0.5, "0.5"}, {0.125, "0.125"}} {
		if got := pythonFloat(tc.in); got != tc.want {
			t.Errorf("pythonFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOSWorldAction(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   *pb.Action
		want string
	}{
		{"code", &pb.Action{ActionType: "CODE", Code: "pyautogui.click(1, 2)"}, `"pyautogui.click(1, 2)"`},
		{"done", &pb.Action{ActionType: "DONE"}, `"DONE"`},
		{"computer_13", &pb.Action{ActionType: "CLICK", ParametersJson: `{"x":1}`}, `{"action_type":"CLICK","parameters":{"x":1}}`},
		{"bad params kept as string", &pb.Action{ActionType: "CLICK", ParametersJson: `{x`}, `{"action_type":"CLICK","parameters":"{x"}`},
		{"none", nil, `""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(osworldAction(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOSWorldDir(t *testing.T) {
	ep := &pb.Episode{EpisodeId: "e1", TaskId: "t1", Domain: "os"}
	for _, tc := range []struct {
		name   string
		ep     *pb.Episode
		shared bool
		want   string
	}{
		{"one episode per task", ep, false, "os/t1"},
		{"group", ep, true, "os/t1-e1"},
		{"no domain", &pb.Episode{EpisodeId: "e1", TaskId: "t1"}, false, "unknown/t1"},
		{"no task", &pb.Episode{EpisodeId: "e1", Domain: "os"}, false, "os/e1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := osworldDir(tc.ep, tc.shared); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFlatTokensStopWhenPromptDoesNotExtend(t *testing.T) {
	l := &trainingLine{}
	if !l.extend(turn{PromptTokenIDs: []int32{1, 2}, CompletionTokenIDs: []int32{3}, Logprobs: []float64{-1}}) {
		t.Fatal("first turn refused")
	}
	if l.extend(turn{PromptTokenIDs: []int32{9, 9, 9, 9}, CompletionTokenIDs: []int32{5}}) {
		t.Error("a prompt that rewrites history was accepted as an extension")
	}
}

// TestSystemPromptOnce: the episode's system prompt heads the training
// conversation once, whether or not the first model call sent it too.
func TestSystemPromptOnce(t *testing.T) {
	text := func(role, s string) *pb.ChatMessage {
		return &pb.ChatMessage{Role: role, Content: []*pb.ContentPart{{Part: &pb.ContentPart_Text{Text: s}}}}
	}
	call := func(msgs ...*pb.ChatMessage) []*pb.Step {
		return []*pb.Step{{Index: 0, ModelCall: &pb.ModelCall{NewMessages: msgs, ResponseText: "ok"}}}
	}
	tests := []struct {
		name  string
		steps []*pb.Step
		want  []string
	}{
		{"sent by the first call", call(text("system", "be careful"), text("user", "q")), []string{"system", "user", "assistant"}},
		{"not sent by the first call", call(text("user", "q")), []string{"system", "user", "assistant"}},
		{"no model call", nil, []string{"system"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := (&Exporter{}).trainingLine(context.Background(), &pb.Episode{SystemPrompt: "be careful"}, tt.steps, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range l.Messages {
				got = append(got, m.Role)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("roles = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestEvaluationExported: the evaluator's report rides with the reward in
// the training line, so a trainer (or a person) sees which metric gave it;
// a report that is not JSON is left out rather than breaking the line.
func TestEvaluationExported(t *testing.T) {
	tests := []struct {
		details, want string
	}{
		{`{"func":["compare_table"],"scores":[1]}`, `{"func":["compare_table"],"scores":[1]}`},
		{`not json`, ``},
		{``, ``},
	}
	for _, tt := range tests {
		ep := &pb.Episode{Status: pb.EpisodeStatus_EPISODE_STATUS_DONE, Score: 1, EvaluatorDetailsJson: tt.details}
		l, err := (&Exporter{}).trainingLine(context.Background(), ep, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(l.Evaluation); got != tt.want {
			t.Errorf("evaluation of %q = %q, want %q", tt.details, got, tt.want)
		}
	}
}

// episodesOnly is a Source of episodes without steps.
type episodesOnly []*pb.Episode

func (e episodesOnly) ListEpisodes(context.Context, index.Filter, *index.Cursor, int) ([]*pb.Episode, *index.Cursor, error) {
	return e, nil, nil
}

func (episodesOnly) Steps(context.Context, string, int64) ([]*pb.Step, error) { return nil, nil }

// filesSink keeps the exported files by path, and every path in the order
// created.
type filesSink struct {
	files map[string]*bytes.Buffer
	paths []string
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (s *filesSink) Create(path string) (io.WriteCloser, error) {
	b := &bytes.Buffer{}
	s.files[path] = b
	s.paths = append(s.paths, path)
	return nopCloser{b}, nil
}

// TestOSWorldDirsNeverCollide: a task's directory gets the episode id
// appended when the task has several episodes, and an episode without a
// task is named by its id: neither may land in another episode's
// directory, where its traj.jsonl and result.txt would overwrite the
// other's (or mix with them).
func TestOSWorldDirsNeverCollide(t *testing.T) {
	done := pb.EpisodeStatus_EPISODE_STATUS_DONE
	tests := []struct {
		name string
		eps  []*pb.Episode
	}{
		{"task named like a group member's directory", []*pb.Episode{
			{EpisodeId: "e1", TaskId: "t-e3", Domain: "os", Status: done, Score: 1},
			{EpisodeId: "e2", TaskId: "t", Domain: "os", Status: done},
			{EpisodeId: "e3", TaskId: "t", Domain: "os", Status: pb.EpisodeStatus_EPISODE_STATUS_FAILED},
		}},
		{"task named like an episode without a task", []*pb.Episode{
			{EpisodeId: "x", Domain: "os", Status: done, Score: 1},
			{EpisodeId: "y", TaskId: "x", Domain: "os", Status: done},
		}},
		{"suffixed names that meet", []*pb.Episode{
			{EpisodeId: "b-c", TaskId: "a", Domain: "os", Status: done},
			{EpisodeId: "z", TaskId: "a", Domain: "os", Status: done},
			{EpisodeId: "c", TaskId: "a-b", Domain: "os", Status: done},
			{EpisodeId: "w", TaskId: "a-b", Domain: "os", Status: done},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &filesSink{files: map[string]*bytes.Buffer{}}
			x := New(episodesOnly(tt.eps), nil)
			if err := x.Write(context.Background(), Request{RolloutID: "r", Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD}, sink); err != nil {
				t.Fatal(err)
			}
			if got, want := len(sink.files), len(sink.paths); got != want {
				t.Errorf("%d files written under %d distinct paths: %v", want, got, sink.paths)
			}
			trajs := 0
			for p := range sink.files {
				if bytes.HasSuffix([]byte(p), []byte("/traj.jsonl")) {
					trajs++
				}
			}
			if trajs != len(tt.eps) {
				t.Errorf("%d traj.jsonl for %d episodes: %v", trajs, len(tt.eps), sink.paths)
			}
		})
	}
}

// oneEpisode is a Source of one episode and its steps.
type oneEpisode struct {
	ep    *pb.Episode
	steps []*pb.Step
}

func (o oneEpisode) ListEpisodes(context.Context, index.Filter, *index.Cursor, int) ([]*pb.Episode, *index.Cursor, error) {
	return []*pb.Episode{o.ep}, nil, nil
}

func (o oneEpisode) Steps(context.Context, string, int64) ([]*pb.Step, error) { return o.steps, nil }

// sameBlob answers every blob read with the same bytes.
type sameBlob []byte

func (b sameBlob) Read(context.Context, string) ([]byte, error) { return b, nil }

// TestInlineImagesBounded: with inline_images each image of an episode's
// conversation is read and held, base64, in its one JSONL line. The step
// bodies were bounded (maxEpisodeBytes) and the images were not: an
// episode of a thousand 3 MB screenshots made a 4 GB line in memory. They
// count against the same bound now, and past it the export fails naming
// the limit instead of the process running out of memory.
func TestInlineImagesBounded(t *testing.T) {
	image := func(i int) *pb.Step {
		ref := &pb.BlobRef{Sha256: fmt.Sprintf("%064x", i), MediaType: "image/png", Size: 100}
		return &pb.Step{Index: int32(i), ModelCall: &pb.ModelCall{NewMessages: []*pb.ChatMessage{{Role: "user",
			Content: []*pb.ContentPart{{Part: &pb.ContentPart_Image{Image: &pb.Image{Blob: ref}}}}}}}}
	}
	src := oneEpisode{ep: &pb.Episode{EpisodeId: "e"}, steps: []*pb.Step{image(0), image(1), image(2)}}
	tests := []struct {
		name    string
		inline  bool
		limit   int64
		tooLong bool
	}{
		{"within the bound", true, 300, false},
		{"past the bound", true, 299, true},
		{"references only", false, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := New(src, sameBlob(make([]byte, 100)))
			x.maxEpisodeBytes = tt.limit
			sink := &filesSink{files: map[string]*bytes.Buffer{}}
			err := x.Write(context.Background(), Request{RolloutID: "r", Format: pb.ExportFormat_EXPORT_FORMAT_JSONL, InlineImages: tt.inline}, sink)
			if got := errors.Is(err, index.ErrTooLarge); got != tt.tooLong {
				t.Errorf("export error %v, want too large %v", err, tt.tooLong)
			}
		})
	}
}
