package export

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
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
