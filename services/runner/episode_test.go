package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/episode"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/taskfile"
)

// stepLog is a step sink that keeps what it saw and can run a hook.
type stepLog struct {
	mu     sync.Mutex
	steps  []*rmv1.Step
	onStep func(n int)
}

func (s *stepLog) Record(_ context.Context, r agent.StepRecord) {
	s.mu.Lock()
	s.steps = append(s.steps, r.Step)
	n := len(s.steps)
	hook := s.onStep
	s.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

func (s *stepLog) all() []*rmv1.Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*rmv1.Step(nil), s.steps...)
}

type run struct {
	task       string
	index      int
	mode       string
	space      string
	guest      string
	maxTurns   int32
	maxRetries int32
	output     string
	metric     string
	record     bool
	sinks      []agent.StepSink
	opts       episode.Options
}

func runEpisode(t *testing.T, ctx context.Context, gw *gateway, st rmv1.StorageClient, r run) episode.Result {
	t.Helper()
	tasks, err := taskfile.Load(examplePath(r.task))
	if err != nil {
		t.Fatal(err)
	}
	task := tasks[r.index]
	if r.mode != "" {
		task.Mode = r.mode
	}
	if r.metric != "" {
		task.Metric = r.metric
	}
	if r.maxTurns == 0 {
		r.maxTurns = 6
	}
	deps := episode.Deps{Chat: gw.Client, Log: zaptest.NewLogger(t)}
	if st != nil {
		deps.Storage = st
	}
	if r.opts.CacheDir == "" {
		r.opts.CacheDir = t.TempDir()
	}
	if r.opts.PyLimits.Timeout == 0 {
		r.opts.PyLimits = py.DefaultLimits
	}
	r.opts.GuestRetryWait = 100 * time.Millisecond
	return episode.Run(ctx, deps, r.opts, episode.Spec{
		Episode: &rmv1.Episode{EpisodeId: "ep-" + strings.ReplaceAll(t.Name(), "/", "-"), RolloutId: "r-test", Attempt: 1},
		Task:    task,
		Agent: &rmv1.AgentConfig{ActionSpace: r.space, MaxTurns: r.maxTurns, MaxRetries: r.maxRetries,
			SleepAfterExecution: durationpb.New(300 * time.Millisecond), ObservationType: "screenshot", EnableRecording: r.record},
		Guest:     r.guest,
		OutputDir: r.output,
		Sinks:     r.sinks,
	})
}

// TestDesktopEpisodes runs the bundled desktop tasks on a real desktopd on
// Xvfb, with the real gateway in front of fakellm playing the bundled
// script, and the real storage service keeping the steps.
func TestDesktopEpisodes(t *testing.T) {
	guest := startDesktopd(t)
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	_, st := startStorage(t)
	tests := []struct {
		name, task, space string
		wantSteps         int
		record            bool
	}{
		{name: "pyautogui", task: "tasks/desktop-xterm-file.json", space: "pyautogui", wantSteps: 2, record: true},
		{name: "computer_13", task: "tasks/computer13/desktop-xterm-file-c13.json", space: "computer_13", wantSteps: 2},
		{name: "infeasible", task: "tasks/desktop-infeasible.json", space: "pyautogui", wantSteps: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results")
			res := runEpisode(t, ctxT(t, 2*time.Minute), gw, st, run{task: tt.task, space: tt.space, guest: guest.URL, output: out, record: tt.record})
			ep := res.Episode
			if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 {
				t.Fatalf("episode %s score %v (%s %s), want DONE with score 1", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError())
			}
			if res.StorageErr != nil {
				t.Fatalf("storage: %v", res.StorageErr)
			}
			if int(ep.GetNumSteps()) != tt.wantSteps {
				t.Errorf("steps = %d, want %d", ep.GetNumSteps(), tt.wantSteps)
			}
			// OSWorld's layout.
			result, err := os.ReadFile(filepath.Join(out, "result.txt"))
			if err != nil || strings.TrimSpace(string(result)) != "1" {
				t.Errorf("result.txt = %q, %v; want 1", result, err)
			}
			if tt.record && haveFFmpeg(t) {
				if st, err := os.Stat(filepath.Join(out, "recording.mp4")); err != nil || st.Size() == 0 {
					t.Errorf("recording.mp4: %v", err)
				}
				if ep.GetRecording().GetSize() == 0 {
					t.Error("episode has no recording")
				}
			}
			if conv, err := os.ReadFile(filepath.Join(out, "conversation.json")); err != nil || !strings.Contains(string(conv), `"role": "assistant"`) {
				t.Errorf("conversation.json: %v\n%s", err, conv)
			}
			traj, err := os.ReadFile(filepath.Join(out, "traj.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(traj)), "\n")
			var last map[string]any
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["done"] != true {
				t.Errorf("last traj.jsonl line %q: want done=true (%v)", lines[len(lines)-1], err)
			}
			if tt.wantSteps > 1 {
				pngs, _ := filepath.Glob(filepath.Join(out, "step_1_*.png"))
				if len(pngs) != 1 {
					t.Errorf("step PNGs = %v, want one step_1_*.png", pngs)
				}
			}
			// Storage has the episode and every step with its screenshot.
			got, err := st.GetEpisode(ctxT(t, 10*time.Second), &rmv1.GetEpisodeRequest{EpisodeId: ep.GetEpisodeId(), IncludeSteps: true})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetEpisode().GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || got.GetEpisode().GetScore() != 1 || len(got.GetSteps()) != tt.wantSteps {
				t.Errorf("stored episode %s score %v with %d steps", got.GetEpisode().GetStatus(), got.GetEpisode().GetScore(), len(got.GetSteps()))
			}
			for _, s := range got.GetSteps() {
				shot := s.GetObservation().GetScreenshot().GetSha256()
				if shot == "" {
					t.Errorf("stored step %d has no screenshot", s.GetIndex())
				}
				// The turn's image went as a reference to the screenshot
				// the step carries; storage resolved it.
				for _, m := range s.GetModelCall().GetNewMessages() {
					for _, p := range m.GetContent() {
						if img := p.GetImage(); img != nil && img.GetBlob().GetSha256() != shot {
							t.Errorf("stored step %d: message image %q, want the step's screenshot %s", s.GetIndex(), img.GetBlob().GetSha256(), shot)
						}
					}
				}
			}
		})
	}
}

// TestToolEpisodes runs the first task of each bundled JSONL file.
func TestToolEpisodes(t *testing.T) {
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	_, st := startStorage(t)
	for _, tt := range []struct{ task, mode string }{{"tasks/math.jsonl", "math"}, {"tasks/py.jsonl", "py"}} {
		t.Run(tt.mode, func(t *testing.T) {
			if tt.mode == "py" {
				sandboxtest.Need(t)
			}
			res := runEpisode(t, ctxT(t, time.Minute), gw, st, run{task: tt.task, mode: tt.mode})
			ep := res.Episode
			if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 || ep.GetNumSteps() != 2 || res.StorageErr != nil {
				t.Errorf("episode %s score %v steps %d (%s %s, storage %v), want DONE, 1, 2 steps", ep.GetStatus(), ep.GetScore(), ep.GetNumSteps(), ep.GetFailureReason(), ep.GetError(), res.StorageErr)
			}
		})
	}
}

// TestPyEpisodeWithoutSandboxFails: a runner without prlimit on its PATH
// (the FROM-scratch image) fails py episodes with env_error, saying what
// is missing, before any model call; it used to score them 0 as DONE.
func TestPyEpisodeWithoutSandboxFails(t *testing.T) {
	sandboxtest.Need(t)
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	t.Setenv("PATH", t.TempDir())
	lim := py.DefaultLimits
	lim.Timeout = 29 * time.Second // limits no other test probes with
	res := runEpisode(t, ctxT(t, time.Minute), gw, nil, run{task: "tasks/py.jsonl", mode: "py", opts: episode.Options{PyLimits: lim}})
	ep := res.Episode
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "env_error" || !strings.Contains(ep.GetError(), `"prlimit": executable file not found`) {
		t.Errorf("episode %s score %v reason %q error %q, want FAILED env_error naming prlimit", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError())
	}
	if got := gw.Fake.Stats().Requests; got != 0 {
		t.Errorf("the model was asked %d times, want 0", got)
	}
}

// TestModelErrorsAreRetriedThenFail: a backend that only fails costs the
// episode max_retries+1 calls, then it fails with model_error.
func TestModelErrorsAreRetriedThenFail(t *testing.T) {
	gw := startGateway(t, fakellm.Config{Faults: fakellm.Faults{ErrorRate: 1}})
	res := runEpisode(t, ctxT(t, time.Minute), gw, nil, run{task: "tasks/math.jsonl", mode: "math", maxRetries: 2})
	ep := res.Episode
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "model_error" {
		t.Fatalf("episode %s %s, want FAILED model_error", ep.GetStatus(), ep.GetFailureReason())
	}
	if got := gw.Fake.Stats().Requests; got != 3 {
		t.Errorf("backend saw %d requests, want 3 (1 + 2 retries)", got)
	}
}

// TestUnparsableAnswerIsFedBack: the parse error is recorded as a step and
// shown to the model, whose next answer is used.
func TestUnparsableAnswerIsFedBack(t *testing.T) {
	rules := []fakellm.Rule{
		{Match: "could not be parsed", ToolCalls: []fakellm.ScriptToolCall{{Name: "final_answer", Arguments: json.RawMessage(`{"answer":"252"}`)}}},
		{Match: "A crate holds", ToolCalls: []fakellm.ScriptToolCall{{Name: "abacus", Arguments: json.RawMessage(`{"beads":252}`)}}},
	}
	gw := startGateway(t, fakellm.Config{Script: rules})
	log := &stepLog{}
	res := runEpisode(t, ctxT(t, time.Minute), gw, nil, run{task: "tasks/math.jsonl", mode: "math", maxRetries: 2, sinks: []agent.StepSink{log}})
	ep := res.Episode
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 {
		t.Fatalf("episode %s score %v (%s)", ep.GetStatus(), ep.GetScore(), ep.GetError())
	}
	steps := log.all()
	if len(steps) != 2 || !strings.Contains(steps[0].GetError(), `unknown tool "abacus"`) || steps[0].GetRetry() != 0 || steps[1].GetRetry() != 1 || !steps[1].GetDone() {
		t.Fatalf("steps = %v, want a parse-error step then a done step on retry 1", steps)
	}

	// An answer that never parses ends the episode, scored as it stands.
	gw2 := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: ".", ToolCalls: []fakellm.ScriptToolCall{{Name: "abacus"}}}}})
	res = runEpisode(t, ctxT(t, time.Minute), gw2, nil, run{task: "tasks/math.jsonl", mode: "math", maxRetries: 1})
	if ep := res.Episode; ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 0 || ep.GetNumSteps() != 2 || !strings.HasPrefix(ep.GetError(), "parse_error") {
		t.Errorf("episode %s score %v steps %d error %q, want DONE 0 after 2 parse errors", ep.GetStatus(), ep.GetScore(), ep.GetNumSteps(), ep.GetError())
	}
}

// TestGuestDiesMidEpisode: the guest is killed after the first step; the
// episode fails as guest_unreachable quickly and nothing hangs.
func TestGuestDiesMidEpisode(t *testing.T) {
	guest := startDesktopd(t)
	rules := []fakellm.Rule{{Match: "Step", Reply: "```python pyautogui.moveTo(10, 10) ```"}}
	gw := startGateway(t, fakellm.Config{Script: rules})
	log := &stepLog{}
	log.onStep = func(n int) {
		if n == 1 {
			guest.Kill()
		}
	}
	start := time.Now()
	res := runEpisode(t, ctxT(t, 2*time.Minute), gw, nil, run{task: "tasks/desktop-xterm-file.json", space: "pyautogui", guest: guest.URL, maxTurns: 10, sinks: []agent.StepSink{log}})
	ep := res.Episode
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "guest_unreachable" {
		t.Fatalf("episode %s %s (%s), want FAILED guest_unreachable", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %s to notice the dead guest", d)
	}
}

// TestCallUserWaitsThenFails: UI-TARS's call_user() is answered with WAIT
// three times, as OSWorld's UI-TARS agent does, and the fourth ends the
// episode as FAIL (which the infeasible task scores 1).
func TestCallUserWaitsThenFails(t *testing.T) {
	guest := startDesktopd(t)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step", Reply: "Thought: I need the user.\nAction: call_user()"}}})
	log := &stepLog{}
	res := runEpisode(t, ctxT(t, 2*time.Minute), gw, nil, run{task: "tasks/desktop-infeasible.json", space: "uitars", guest: guest.URL, maxTurns: 10, sinks: []agent.StepSink{log}})
	ep := res.Episode
	var got []string
	for _, st := range log.all() {
		for _, a := range st.GetActions() {
			got = append(got, a.GetActionType())
		}
	}
	want := []string{"WAIT", "WAIT", "WAIT", "FAIL"}
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 || !slices.Equal(got, want) {
		t.Errorf("episode %s score %v (%s %s), actions %v; want DONE, 1, %v", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError(), got, want)
	}
}

// stockGuest puts a real desktopd behind a proxy that hides desktopd's
// /v1/actions, so the runner talks to it as to a stock OSWorld server, and
// records the commands sent to /execute.
func stockGuest(t *testing.T, target string) (string, func() []string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	var commands []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/actions":
			http.NotFound(w, r)
			return
		case "/execute":
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var req struct {
				Command []string `json:"command"`
			}
			_ = json.Unmarshal(body, &req)
			mu.Lock()
			commands = append(commands, strings.Join(req.Command, " "))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(commands)
	}
}

// TestStockGuestPastesNonASCII: against a guest without desktopd's
// /v1/actions, UI-TARS text with characters outside ASCII is typed through
// the clipboard (pyperclip.copy, ctrl+v) as OSWorld's agents type it,
// because the stock guest's pyautogui.typewrite drops them; ASCII text is
// still typed.
func TestStockGuestPastesNonASCII(t *testing.T) {
	guest := startDesktopd(t)
	addr, commands := stockGuest(t, guest.URL)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{
		{Match: "Step 1 of", Reply: "Action: type(content='héllo wörld ✓')"},
		{Match: "Step 2 of", Reply: "Action: type(content='plain')"},
		{Match: "Step", Reply: "Action: finished()"},
	}})
	log := &stepLog{}
	res := runEpisode(t, ctxT(t, 2*time.Minute), gw, nil, run{task: "tasks/desktop-infeasible.json", space: "uitars", guest: addr, maxTurns: 5, sinks: []agent.StepSink{log}})
	if ep := res.Episode; ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE {
		t.Fatalf("episode %s (%s %s), want DONE", ep.GetStatus(), ep.GetFailureReason(), ep.GetError())
	}
	for _, st := range log.all() {
		for _, r := range st.GetResults() {
			if !r.GetOk() {
				t.Errorf("step %d: action failed: %s", st.GetIndex(), r.GetError())
			}
		}
	}
	var typed []string
	for _, c := range commands() {
		if strings.Contains(c, "typewrite") || strings.Contains(c, "pyperclip") {
			typed = append(typed, c[strings.Index(c, "pyautogui.FAILSAFE = False; ")+len("pyautogui.FAILSAFE = False; "):])
		}
	}
	want := []string{
		`import pyperclip; pyperclip.copy('h\u00e9llo w\u00f6rld \u2713'); pyautogui.hotkey('ctrl', 'v'); time.sleep(0.5)`,
		`pyautogui.typewrite('plain')`,
	}
	if !slices.Equal(typed, want) {
		t.Errorf("typing commands sent to the stock guest:\n%q\nwant\n%q", typed, want)
	}
}

// TestPyInGuestFailureIsEnvError: a py episode with a VM runs code through
// the guest's /run_python; when the guest cannot run it (here a proxy in
// front of a real desktopd answers 500, as a guest without an interpreter
// does) the episode fails with env_error. It used to go on and be scored
// on the model's answer alone.
func TestPyInGuestFailureIsEnvError(t *testing.T) {
	guest := startDesktopd(t)
	u, err := url.Parse(guest.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/run_python" {
			http.Error(w, `{"status":"error","message":"python3: not found"}`, http.StatusInternalServerError)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, fakellm.Config{Script: demoScript(t)})
	res := runEpisode(t, ctxT(t, time.Minute), gw, nil, run{task: "tasks/py.jsonl", mode: "py", guest: srv.URL})
	ep := res.Episode
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "env_error" || !strings.Contains(ep.GetError(), "python3: not found") {
		t.Errorf("episode %s score %v reason %q error %q, want FAILED env_error with the guest's answer", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError())
	}
}

// TestDesktopEnvFailuresAreEnvErrors runs desktop tasks on a real desktopd
// whose setup step or evaluator input cannot be had from the guest: the
// episode fails with env_error and says why. The evaluator case used to be
// scored 0 as DONE (OSWorld's None for a non-200 answer).
func TestDesktopEnvFailuresAreEnvErrors(t *testing.T) {
	guest := startDesktopd(t)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step", Reply: "DONE"}}})
	const noProgram = `["/nonexistent/rolloutmesh-missing"]`
	tests := []struct {
		name      string
		config    string
		evaluator string
		wantError string
	}{
		{name: "setup step", config: `[{"type":"execute","parameters":{"command":` + noProgram + `,"shell":false}}]`,
			evaluator: `{"func":"infeasible"}`, wantError: "rolloutmesh-missing"},
		{name: "evaluator input", config: `[]`,
			evaluator: `{"func":"exact_match","result":{"type":"vm_command_line","command":` + noProgram + `,"shell":false},"expected":{"type":"rule","rules":{"expected":"x"}}}`,
			wantError: "getter vm_command_line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			task := `{"id":"envfail","instruction":"nothing","config":` + tt.config + `,"evaluator":` + tt.evaluator + `}`
			p := filepath.Join(dir, "task.json")
			if err := os.WriteFile(p, []byte(task), 0o644); err != nil {
				t.Fatal(err)
			}
			tasks, err := taskfile.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			res := episode.Run(ctxT(t, time.Minute), episode.Deps{Chat: gw.Client, Log: zaptest.NewLogger(t)}, episode.Options{CacheDir: dir}, episode.Spec{
				Episode: &rmv1.Episode{EpisodeId: "envfail"}, Task: tasks[0], Agent: &rmv1.AgentConfig{MaxTurns: 2}, Guest: guest.URL,
			})
			ep := res.Episode
			if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_FAILED || ep.GetFailureReason() != "env_error" || !strings.Contains(ep.GetError(), tt.wantError) {
				t.Errorf("episode %s score %v reason %q error %q, want FAILED env_error containing %q", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError(), tt.wantError)
			}
		})
	}
}

// TestUnsupportedTask: a task needing a getter this runner lacks is
// reported UNSUPPORTED with its name before any model call.
func TestUnsupportedTask(t *testing.T) {
	dir := t.TempDir()
	task := `{"id":"u","instruction":"open a file","config":[{"type":"googledrive","parameters":{"settings_file":"x"}}],"evaluator":{"func":"infeasible"}}`
	p := filepath.Join(dir, "u.json")
	if err := os.WriteFile(p, []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, fakellm.Config{})
	tasks, err := taskfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	res := episode.Run(ctxT(t, time.Minute), episode.Deps{Chat: gw.Client}, episode.Options{CacheDir: dir}, episode.Spec{
		Episode: &rmv1.Episode{EpisodeId: "u1"}, Task: tasks[0], Agent: &rmv1.AgentConfig{}, Guest: "http://127.0.0.1:1",
	})
	if ep := res.Episode; ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED || ep.GetFailureReason() != "unsupported_step:googledrive" {
		t.Errorf("episode %s %q, want UNSUPPORTED unsupported_step:googledrive", ep.GetStatus(), ep.GetFailureReason())
	}
	if n := gw.Fake.Stats().Requests; n != 0 {
		t.Errorf("%d model calls for an unsupported task", n)
	}
}

// TestLLMJudgement scores a final answer by asking the judge model through
// the gateway.
func TestLLMJudgement(t *testing.T) {
	rules := append([]fakellm.Rule{
		{Match: `(?s)grading an answer.*Predicted answer: 252`, Reply: "yes"},
		{Match: `grading an answer`, Reply: "no"},
	}, demoScript(t)...)
	gw := startGateway(t, fakellm.Config{Script: rules})
	res := runEpisode(t, ctxT(t, time.Minute), gw, nil, run{task: "tasks/math.jsonl", mode: "math", metric: "llm_judgement"})
	if ep := res.Episode; ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 1 || !strings.Contains(ep.GetEvaluatorDetailsJson(), "llm_judgement") {
		t.Errorf("episode %s score %v details %s, want DONE 1 by llm_judgement", ep.GetStatus(), ep.GetScore(), ep.GetEvaluatorDetailsJson())
	}
}

// TestEpisodeDeadline: a model slower than the episode's deadline ends the
// episode as TIMEOUT.
func TestEpisodeDeadline(t *testing.T) {
	gw := startGateway(t, fakellm.Config{Script: demoScript(t), TTFT: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	res := runEpisode(t, ctx, gw, nil, run{task: "tasks/math.jsonl", mode: "math"})
	if ep := res.Episode; ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_TIMEOUT || ep.GetFailureReason() != "deadline" {
		t.Errorf("episode %s %s, want TIMEOUT deadline", ep.GetStatus(), ep.GetFailureReason())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s past a 1s deadline", d)
	}
}

// TestEpisodeNotesWhyZero: an episode whose document does not open scores
// 0, as in OSWorld, and its stored evaluator details say why, so the
// viewer tells it apart from a wrong document. A file the agent never
// wrote is a result of None, said the same way.
func TestEpisodeNotesWhyZero(t *testing.T) {
	guest := startDesktopd(t)
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step 1 of", Reply: "Nothing to do.\n```DONE```"}}})
	dir := filepath.Join(t.TempDir(), "guestfiles")
	vmFile := func(name string) map[string]any {
		return map[string]any{"type": "vm_file", "path": dir + "/" + name, "dest": name}
	}
	task := map[string]any{
		"id": "notes", "instruction": "save the report",
		"config": []any{map[string]any{"type": "execute", "parameters": map[string]any{
			"command": "mkdir -p " + dir + " && printf 'not a zip' > " + dir + "/report.docx && cp " + dir + "/report.docx " + dir + "/gold.docx", "shell": true}}},
		"evaluator": map[string]any{
			"func":     []any{"compare_docx_files", "compare_docx_files"},
			"conj":     "or",
			"result":   []any{vmFile("report.docx"), vmFile("never-saved.docx")},
			"expected": []any{vmFile("gold.docx"), vmFile("gold.docx")},
		},
	}
	ep := runTaskOnGuest(t, gw, guest.URL, "notes", task)
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != 0 {
		t.Fatalf("episode %s score %v (%s %s); want DONE 0", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError())
	}
	var details struct {
		Notes [][]string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(ep.GetEvaluatorDetailsJson()), &details); err != nil {
		t.Fatalf("evaluator details %q: %v", ep.GetEvaluatorDetailsJson(), err)
	}
	want := [][]string{
		{"report.docx does not open as a .docx: open zip: zip: not a valid zip file"},
		{`the result getter "vm_file" gave None: the guest has no file ` + dir + `/never-saved.docx`},
	}
	if !slices.EqualFunc(details.Notes, want, slices.Equal) {
		t.Errorf("notes = %q; want %q\ndetails: %s", details.Notes, want, ep.GetEvaluatorDetailsJson())
	}
}

// runTaskOnGuest runs an episode of task (an OSWorld task file's JSON) on
// the guest at guestURL with the model behind gw, at most 2 turns.
func runTaskOnGuest(t *testing.T, gw *gateway, guestURL, id string, task map[string]any) *rmv1.Episode {
	t.Helper()
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, err := taskfile.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	res := episode.Run(ctxT(t, time.Minute), episode.Deps{Chat: gw.Client, Log: zaptest.NewLogger(t)}, episode.Options{CacheDir: t.TempDir()}, episode.Spec{
		Episode: &rmv1.Episode{EpisodeId: id}, Task: tasks[0], Agent: &rmv1.AgentConfig{MaxTurns: 2}, Guest: guestURL,
	})
	return res.Episode
}

// TestDesktopTaskFiles runs OSWorld's file machinery against a real
// desktopd: download (through the host cache) and upload_file config
// steps, execute with until, and an evaluator comparing a vm_file with a
// cloud_file and a command's output. A wrong expectation scores 0.
func TestDesktopTaskFiles(t *testing.T) {
	guest := startDesktopd(t)
	files := http.NewServeMux()
	files.HandleFunc("/input.txt", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("line one\nline two\n")) })
	files.HandleFunc("/gold.txt", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("line one\nline two\n")) })
	srv := httptest.NewServer(files)
	defer srv.Close()
	local := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(local, []byte("uploaded from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, fakellm.Config{Script: []fakellm.Rule{{Match: "Step 1 of", Reply: "Nothing to do.\n```DONE```"}}})
	dir := filepath.Join(t.TempDir(), "guestfiles")
	for _, tt := range []struct {
		name    string
		include string
		want    float64
	}{{"right", "uploaded from the host", 1}, {"wrong", "something else", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			task := map[string]any{
				"id": "files-" + tt.name, "instruction": "check the files",
				"config": []any{
					map[string]any{"type": "download", "parameters": map[string]any{"files": []any{map[string]any{"url": srv.URL + "/input.txt", "path": dir + "/input.txt"}}}},
					map[string]any{"type": "upload_file", "parameters": map[string]any{"files": []any{map[string]any{"local_path": local, "path": dir + "/up.txt"}}}},
					map[string]any{"type": "execute", "parameters": map[string]any{"command": "test -s " + dir + "/up.txt && echo ready", "shell": true, "until": map[string]any{"stdout": "ready"}}},
				},
				"evaluator": map[string]any{
					"func": []any{"compare_text_file", "check_include_exclude"},
					"result": []any{
						map[string]any{"type": "vm_file", "path": dir + "/input.txt", "dest": "input.txt"},
						map[string]any{"type": "vm_command_line", "command": []any{"cat", dir + "/up.txt"}},
					},
					"expected": []any{
						map[string]any{"type": "cloud_file", "path": srv.URL + "/gold.txt", "dest": "gold.txt"},
						map[string]any{"type": "rule", "rules": map[string]any{"include": []any{tt.include}}},
					},
				},
			}
			if ep := runTaskOnGuest(t, gw, guest.URL, "files-"+tt.name, task); ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE || ep.GetScore() != tt.want {
				t.Errorf("episode %s score %v (%s %s; %s), want DONE %v", ep.GetStatus(), ep.GetScore(), ep.GetFailureReason(), ep.GetError(), ep.GetEvaluatorDetailsJson(), tt.want)
			}
		})
	}
}
