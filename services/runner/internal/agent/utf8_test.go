package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// marshalChat answers each request with the next reply, after marshalling
// the request as gRPC does: a string field that is not UTF-8 fails the
// call.
type marshalChat struct {
	replies []string
	calls   int
}

func (c *marshalChat) Chat(_ context.Context, in *rmv1.ChatRequest, _ ...grpc.CallOption) (*rmv1.ChatResponse, error) {
	if _, err := proto.Marshal(in); err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
	}
	text := "DONE"
	if c.calls < len(c.replies) {
		text = c.replies[c.calls]
	}
	c.calls++
	return &rmv1.ChatResponse{Choices: []*rmv1.ChatChoice{{Message: textMsg("assistant", text)}}}, nil
}

// hostileEnv is a desktop whose observations, results and errors carry
// what a guest or a program may send: text cut anywhere, bytes that are
// not UTF-8.
type hostileEnv struct {
	obs     env.Observation
	result  env.Result
	stepErr error
}

func (e *hostileEnv) Reset(context.Context, env.Task) (env.Observation, error) { return e.obs, nil }
func (e *hostileEnv) Step(_ context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	if e.stepErr != nil {
		return nil, env.Observation{}, e.stepErr
	}
	res := make([]env.Result, len(acts))
	for i := range res {
		res[i] = e.result
	}
	return res, e.obs, nil
}
func (e *hostileEnv) Evaluate(context.Context, env.EvalInput) (env.Evaluation, error) {
	return env.Evaluation{Score: 1}, nil
}
func (e *hostileEnv) Tools() []env.Tool           { return nil }
func (e *hostileEnv) Close(context.Context) error { return nil }
func (e *hostileEnv) Screen() action.Screen       { return action.Screen{Width: 100, Height: 100} }

// marshalSink marshals every step as the storage streamer does.
type marshalSink struct {
	mu   sync.Mutex
	errs []error
}

func (s *marshalSink) Record(_ context.Context, r StepRecord) {
	if _, err := proto.Marshal(r.Step); err != nil {
		s.mu.Lock()
		s.errs = append(s.errs, err)
		s.mu.Unlock()
	}
}

// TestTextFromTheEnvironmentStaysUTF8: protobuf refuses strings that are
// not UTF-8, so an accessibility tree cut inside a character, a program's
// raw bytes or a guest's error body failed every later model call (the
// episode ended model_error) and every step sent to storage, and an
// episode error like that made the result undeliverable. They reach the
// gateway, the steps and the outcome as valid UTF-8.
func TestTextFromTheEnvironmentStaysUTF8(t *testing.T) {
	space, err := actionspace.Get("pyautogui")
	if err != nil {
		t.Fatal(err)
	}
	click := "```python\npyautogui.click(1, 1)\n```"
	tests := []struct {
		name       string
		env        *hostileEnv
		wantStatus rmv1.EpisodeStatus
	}{
		{name: "a11y tree cut inside a character",
			env:        &hostileEnv{obs: env.Observation{A11yTree: strings.Repeat("€", 20000)}, result: env.Result{OK: true}},
			wantStatus: rmv1.EpisodeStatus_EPISODE_STATUS_DONE},
		{name: "program output and error not UTF-8",
			env:        &hostileEnv{result: env.Result{Error: "bad \xff\xfe", Output: "out \xc3"}},
			wantStatus: rmv1.EpisodeStatus_EPISODE_STATUS_DONE},
		{name: "guest error not UTF-8",
			env:        &hostileEnv{stepErr: errors.New("guest /execute: HTTP 500: \xff\xfe")},
			wantStatus: rmv1.EpisodeStatus_EPISODE_STATUS_FAILED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chat := &marshalChat{replies: []string{click, click}}
			sink := &marshalSink{}
			out := Run(context.Background(), Deps{Chat: chat, Sinks: []StepSink{sink}},
				Config{EpisodeID: "ep", Space: space, ObservationType: "screenshot_a11y_tree", MaxTurns: 3}, env.Task{Instruction: "do"}, tt.env)
			if out.Status != tt.wantStatus {
				t.Errorf("status %s (%s: %s), want %s", out.Status, out.FailureReason, out.Error, tt.wantStatus)
			}
			if !utf8.ValidString(out.Error) {
				t.Errorf("outcome error %q is not UTF-8", out.Error)
			}
			if len(sink.errs) > 0 {
				t.Errorf("steps do not marshal: %v", sink.errs)
			}
		})
	}
}

// TestClipsKeepUTF8: tool results and arguments fed back to the model are
// cut at a character's boundary, not inside one.
func TestClipsKeepUTF8(t *testing.T) {
	long := strings.Repeat("€", maxToolOutput)
	tests := []struct {
		name string
		got  string
	}{
		{"resultText", resultText(env.Result{OK: true, Output: long})},
		{"resultText of an error", resultText(env.Result{Error: long})},
		{"clipText", clipText(long, 500)},
	}
	for _, tt := range tests {
		if !utf8.ValidString(tt.got) {
			t.Errorf("%s: %q... is not UTF-8", tt.name, tt.got[len(tt.got)-20:])
		}
	}
}
