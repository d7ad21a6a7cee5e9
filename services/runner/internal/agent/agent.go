// Package agent is the agent loop of one episode (seeds 002 and 004):
// environment setup, the first observation, prompt building per action
// space and observation type with a window of recent screenshots, the model
// call through the gateway with the episode id as routing key, parsing into
// actions, acting, observing, until DONE, FAIL, max_turns or the deadline;
// then evaluation. Every step goes to the step sinks as it happens.
package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// chatClient is the part of the gateway client the loop uses;
// rolloutmeshv1.ModelGatewayClient implements it.
type chatClient interface {
	Chat(ctx context.Context, in *rmv1.ChatRequest, opts ...grpc.CallOption) (*rmv1.ChatResponse, error)
}

// Environment is what the loop needs of an environment.
type Environment interface {
	Reset(ctx context.Context, t env.Task) (env.Observation, error)
	Step(ctx context.Context, acts []action.Action) ([]env.Result, env.Observation, error)
	Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error)
	Tools() []env.Tool
	Close(ctx context.Context) error
}

// screener is implemented by environments with a screen.
type screener interface{ Screen() action.Screen }

// recorder is implemented by environments that can record the screen.
type recorder interface {
	StartRecording(ctx context.Context) error
	EndRecording(ctx context.Context) ([]byte, error)
}

// prompter is implemented by environments with their own system prompt
// (tool environments).
type prompter interface{ SystemPrompt() string }

// StepRecord is one step as the sinks get it.
type StepRecord struct {
	// Step is the step as stored: the observation before it, the model
	// call, the actions and their results.
	Step *rmv1.Step
	// Actions are the parsed actions (nil on a parse error).
	Actions []action.Action
	// After is the screenshot taken after the actions, when there is one.
	After []byte
	// Time is when the actions were executed.
	Time time.Time
}

// StepSink takes steps as they happen. Record must not block the agent
// beyond a bounded buffer.
type StepSink interface {
	Record(ctx context.Context, r StepRecord)
}

// Config is the per-episode agent configuration.
type Config struct {
	EpisodeID       string
	Model           string
	Space           actionspace.Space
	ObservationType string
	MaxTurns        int
	MaxRetries      int
	// HistoryImages is how many of the most recent screenshots are sent as
	// images; older ones are replaced by a text note.
	HistoryImages  int
	Sampling       *rmv1.SamplingParams
	Logprobs       bool
	TopLogprobs    int32
	ReturnTokenIDs bool
	// SystemPrompt replaces the action space's prompt when set.
	SystemPrompt    string
	EnableRecording bool
	// ChatTimeout bounds one model call.
	ChatTimeout time.Duration
	// MaxA11yChars truncates accessibility trees in prompts.
	MaxA11yChars int
}

// Deps are the loop's collaborators.
type Deps struct {
	Chat  chatClient
	Clock clock.Clock
	Log   *zap.Logger
	Sinks []StepSink
	// Progress is told the phase ("setup", "acting", "evaluating") and the
	// number of steps so far; may be nil.
	Progress func(phase string, steps int)
}

// Outcome is how an episode ended.
type Outcome struct {
	Status        rmv1.EpisodeStatus
	Score         float64
	FinalAnswer   string
	FailureReason string
	Error         string
	Steps         int
	ModelVersions []int64
	Details       map[string]any
	Recording     []byte
	SystemPrompt  string
	// Conversation is the whole conversation (seed 002's conversation log).
	Conversation []*rmv1.ChatMessage
}

// Run runs one episode to its end. It never panics on model output and
// always closes the environment.
func Run(ctx context.Context, d Deps, cfg Config, task env.Task, e Environment) Outcome {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	if d.Progress == nil {
		d.Progress = func(string, int) {}
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 15
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.HistoryImages <= 0 {
		cfg.HistoryImages = 3
	}
	if cfg.ChatTimeout <= 0 {
		cfg.ChatTimeout = 5 * time.Minute
	}
	if cfg.MaxA11yChars <= 0 {
		cfg.MaxA11yChars = 40000
	}
	l := &loop{d: d, cfg: cfg, task: task, e: e, log: d.Log}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := e.Close(cctx); err != nil {
			l.log.Warn("close environment", zap.Error(err))
		}
	}()
	out := l.run(ctx)
	out.Conversation = l.conv
	out.Steps = l.stepIdx
	out.ModelVersions = l.versions
	return out
}

type loop struct {
	d    Deps
	cfg  Config
	task env.Task
	e    Environment
	log  *zap.Logger

	scr      action.Screen
	conv     []*rmv1.ChatMessage
	mark     int // conv index where the current turn's new messages start
	stepIdx  int
	versions []int64
	tools    []*rmv1.Tool
	// pendingCall is the model call of the step being built and
	// retryOfCall its retry number.
	pendingCall *rmv1.ModelCall
	retryOfCall int
	// callUsers counts the call_user answers turned into WAIT.
	callUsers int
	// refs are the images the gateway holds (imagerefs.go).
	refs imageRefs
}

// callUserTolerance is how many call_user answers an episode turns into
// WAIT before one ends it as FAIL: OSWorld's UI-TARS agent's
// callusr_tolerance, so scores compare with its published runs.
const callUserTolerance = 3

// ctxOutcome classifies an error caused by the episode's context.
func ctxOutcome(ctx context.Context, err error) (Outcome, bool) {
	// A call can fail on its own copy of the deadline a moment before ctx
	// itself reports it, so a passed deadline counts as well.
	dl, hasDL := ctx.Deadline()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || hasDL && !time.Now().Before(dl):
		return Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_TIMEOUT, FailureReason: "deadline", Error: errString(err)}, true
	case ctx.Err() != nil:
		return Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_ABORTED, FailureReason: "cancelled", Error: errString(err)}, true
	}
	return Outcome{}, false
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return validText(err.Error())
}

// validText makes s valid UTF-8. Text from the environment (a guest's
// answer or error body, a program's output) may hold any bytes, and
// protobuf refuses to marshal a string that is not UTF-8: the model call,
// the step and the episode's result carrying it would all fail.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// validObservation is o with its text made valid UTF-8.
func validObservation(o env.Observation) env.Observation {
	o.A11yTree, o.Terminal, o.Text = validText(o.A11yTree), validText(o.Terminal), validText(o.Text)
	return o
}

// validResults makes the results' text valid UTF-8, in place.
func validResults(rs []env.Result) {
	for i := range rs {
		rs[i].Error, rs[i].Output = validText(rs[i].Error), validText(rs[i].Output)
	}
}

// clipUTF8 cuts s to at most n bytes, at a character's boundary: a cut
// inside one leaves a string that is not UTF-8.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func failed(reason string, err error) Outcome {
	if u, ok := env.AsUnsupported(err); ok {
		return Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED, FailureReason: u.Reason(), Error: errString(err)}
	}
	if errors.Is(err, env.ErrGuestUnreachable) {
		reason = "guest_unreachable"
	}
	return Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_FAILED, FailureReason: reason, Error: errString(err)}
}

func (l *loop) run(ctx context.Context) Outcome {
	l.d.Progress("setup", 0)
	obs, err := l.e.Reset(ctx, l.task)
	if err != nil {
		if o, ok := ctxOutcome(ctx, err); ok {
			return o
		}
		return failed("env_error", err)
	}
	obs = validObservation(obs)
	if s, ok := l.e.(screener); ok {
		l.scr = s.Screen()
	}
	sys := l.systemPrompt()
	for _, t := range l.cfg.Space.Tools(l.e.Tools()) {
		l.tools = append(l.tools, &rmv1.Tool{Name: t.Name, Description: t.Description, ParametersJson: string(t.Parameters)})
	}
	if sys != "" {
		l.conv = append(l.conv, textMsg("system", sys))
	}
	if l.cfg.Space.Desktop {
		l.conv = append(l.conv, l.observationMsg(obs, nil, 1))
	} else {
		first := l.task.Instruction
		if obs.Text != "" {
			first += "\n\n" + obs.Text
		}
		l.conv = append(l.conv, textMsg("user", first))
	}

	var rec recorder
	if r, ok := l.e.(recorder); ok && l.cfg.EnableRecording {
		if err := r.StartRecording(ctx); err != nil {
			l.log.Warn("start recording", zap.Error(err))
		} else {
			rec = r
			// However the episode ends, the guest's recorder is stopped, or
			// the next episode on this guest could not record.
			defer func() {
				if rec == nil {
					return
				}
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if _, err := rec.EndRecording(cctx); err != nil {
					l.log.Warn("end recording", zap.Error(err))
				}
			}()
		}
	}

	l.d.Progress("acting", 0)
	var (
		lastFailed  bool
		finalAnswer string
		endErr      string
	)
	pending := obs
turns:
	for turn := 0; turn < l.cfg.MaxTurns; turn++ {
		resp, acts, err := l.ask(ctx, pending)
		if err != nil {
			if o, ok := ctxOutcome(ctx, err); ok {
				return o
			}
			var pe *parseError
			if errors.As(err, &pe) {
				// The model kept answering in a form we cannot parse: the
				// episode ends here and is scored like any other.
				endErr = "parse_error: " + validText(pe.err.Error())
				break turns
			}
			return failed("model_error", err)
		}
		if last := &acts[len(acts)-1]; last.CallUser && l.callUsers < callUserTolerance {
			// No user answers in a rollout; waiting lets the screen change
			// (a dialog closes, a page loads) before the agent gives up.
			l.callUsers++
			*last = action.Action{Type: action.TypeWait}
		}
		l.conv = append(l.conv, resp)
		if t := msgText(resp); t != "" {
			finalAnswer = t
		}
		var results []env.Result
		var next env.Observation
		start := l.d.Clock.Now()
		if onlyControl(acts) {
			results = make([]env.Result, len(acts))
			for i := range results {
				results[i].OK = true
			}
		} else {
			results, next, err = l.e.Step(ctx, acts)
			if err != nil {
				if o, ok := ctxOutcome(ctx, err); ok {
					return o
				}
				validResults(results)
				l.record(ctx, pending, resp, acts, results, false, errString(err), 0, start, nil)
				return failed("env_error", err)
			}
			validResults(results)
			next = validObservation(next)
		}
		last := acts[len(acts)-1]
		done := last.Terminal()
		l.record(ctx, pending, resp, acts, results, done, "", 0, start, next.Screenshot)
		if done {
			lastFailed = last.Type == action.TypeFail
			if last.Answer != "" {
				finalAnswer = validText(last.Answer)
			}
			break
		}
		l.appendFeedback(resp, acts, results, next, turn+2)
		pending = next
	}

	l.d.Progress("evaluating", l.stepIdx)
	ev, err := l.e.Evaluate(ctx, env.EvalInput{FinalAnswer: finalAnswer, LastActionFailed: lastFailed})
	var recording []byte
	if rec != nil {
		var rerr error
		if recording, rerr = rec.EndRecording(ctx); rerr != nil {
			l.log.Warn("end recording", zap.Error(rerr))
		}
		rec = nil
	}
	if err != nil {
		if o, ok := ctxOutcome(ctx, err); ok {
			return o
		}
		reason := "evaluation"
		if errors.Is(err, env.ErrEnvironment) {
			reason = "env_error"
		}
		o := failed(reason, err)
		o.FinalAnswer = finalAnswer
		return o
	}
	return Outcome{
		Status:       rmv1.EpisodeStatus_EPISODE_STATUS_DONE,
		Score:        ev.Score,
		FinalAnswer:  finalAnswer,
		Details:      ev.Details,
		Error:        endErr,
		Recording:    recording,
		SystemPrompt: sys,
	}
}

func onlyControl(acts []action.Action) bool {
	for _, a := range acts {
		if !a.Terminal() {
			return false
		}
	}
	return true
}

func (l *loop) systemPrompt() string {
	if l.cfg.SystemPrompt != "" {
		return l.cfg.SystemPrompt
	}
	if p, ok := l.e.(prompter); ok && !l.cfg.Space.Desktop {
		return p.SystemPrompt()
	}
	scr := l.scr
	if l.cfg.Space.ModelScreen.Width > 0 {
		scr = l.cfg.Space.ModelScreen
	}
	p := l.cfg.Space.Prompt(scr)
	if l.cfg.Space.Desktop {
		if strings.HasSuffix(p, "\n") {
			return p + l.task.Instruction
		}
		return p + "\nYou are asked to complete the following task: " + l.task.Instruction
	}
	return p
}

// parseError is an answer that stayed unparsable after the retries.
type parseError struct{ err error }

func (p *parseError) Error() string { return "parse: " + p.err.Error() }

// ask calls the model and parses its answer, retrying model errors with
// backoff and feeding parse errors back, up to MaxRetries extra tries.
func (l *loop) ask(ctx context.Context, obs env.Observation) (*rmv1.ChatMessage, []action.Action, error) {
	var lastErr error
	for retry := 0; retry <= l.cfg.MaxRetries; retry++ {
		if retry > 0 {
			backoff := min(time.Duration(1<<min(retry-1, 4))*time.Second, 10*time.Second)
			if _, ok := lastErr.(*parseError); ok {
				backoff = 0 // the model gets the error as feedback; no need to wait
			}
			if err := clock.Sleep(ctx, l.d.Clock, backoff); err != nil {
				return nil, nil, err
			}
		}
		start := l.d.Clock.Now()
		req, resp, err := l.chat(ctx)
		if err == nil && (len(resp.GetChoices()) == 0 || resp.GetChoices()[0].GetMessage() == nil) {
			err = fmt.Errorf("model answered with no choices")
		}
		if err != nil {
			if _, done := ctxOutcome(ctx, err); done {
				return nil, nil, err
			}
			l.log.Warn("model call failed", zap.Int("retry", retry), zap.Error(err))
			lastErr = fmt.Errorf("model call: %w", err)
			continue
		}
		l.noteVersion(resp.GetModelVersion())
		choice := resp.GetChoices()[0]
		msg := choice.GetMessage()
		msg.Role = "assistant"
		ans := actionspace.Answer{Text: msgText(msg)}
		for _, t := range l.tools {
			ans.Tools = append(ans.Tools, t.GetName())
		}
		for _, c := range msg.GetToolCalls() {
			ans.Calls = append(ans.Calls, action.ToolCall{ID: c.GetId(), Name: c.GetName(), Arguments: c.GetArgumentsJson()})
		}
		acts, perr := l.cfg.Space.Parse(ans, l.scr)
		if perr == nil && len(acts) == 0 {
			perr = fmt.Errorf("no action in the answer")
		}
		l.pendingCall = modelCall(req, resp, choice)
		if perr != nil {
			l.log.Info("unparsable model answer", zap.Int("retry", retry), zap.Error(perr))
			l.conv = append(l.conv, msg)
			l.record(ctx, obs, msg, nil, nil, false, "parse error: "+validText(perr.Error()), retry, start, nil)
			l.appendParseFeedback(msg, perr)
			lastErr = &parseError{err: perr}
			continue
		}
		l.retryOfCall = retry
		return msg, acts, nil
	}
	return nil, nil, lastErr
}

func (l *loop) noteVersion(v int64) {
	for _, x := range l.versions {
		if x == v {
			return
		}
	}
	l.versions = append(l.versions, v)
}

// request builds the chat request from the conversation, keeping only the
// last HistoryImages screenshots as images.
func (l *loop) request() *rmv1.ChatRequest {
	msgs := make([]*rmv1.ChatMessage, len(l.conv))
	images := 0
	for i := len(l.conv) - 1; i >= 0; i-- {
		m := l.conv[i]
		has := false
		for _, p := range m.GetContent() {
			if p.GetImage() != nil {
				has = true
			}
		}
		if has {
			images++
			if images > l.cfg.HistoryImages {
				m = withoutImages(m)
			}
		}
		msgs[i] = m
	}
	return &rmv1.ChatRequest{
		Model:          l.cfg.Model,
		Messages:       msgs,
		Tools:          l.tools,
		Sampling:       l.cfg.Sampling,
		RoutingKey:     l.cfg.EpisodeID,
		Logprobs:       l.cfg.Logprobs,
		TopLogprobs:    l.cfg.TopLogprobs,
		ReturnTokenIds: l.cfg.ReturnTokenIDs,
	}
}

// shedImages drops the bytes of the recorded images that have left the
// HistoryImages window. No request carries them again (request puts a note
// in their place) and the steps that carried them are with the sinks
// already; kept, every screenshot of an episode stayed in memory until the
// episode ended, about 100 MB for 50 steps of 1080p screenshots, per
// episode in flight. The conversation keeps each image's media type and
// size, which conversation.json reports. Messages are replaced, not
// changed: the sinks may still be sending the originals.
func (l *loop) shedImages() {
	images := 0
	for i := len(l.conv) - 1; i >= 0; i-- {
		m := l.conv[i]
		if !slices.ContainsFunc(m.GetContent(), func(p *rmv1.ContentPart) bool { return p.GetImage() != nil }) {
			continue
		}
		images++
		if images <= l.cfg.HistoryImages || i >= l.mark {
			continue
		}
		if shed, ok := withoutImageBytes(m); ok {
			l.conv[i] = shed
		}
	}
}

// withoutImageBytes is a copy of m whose images keep their media type and
// size (in blob) but not their bytes; false when no image had bytes.
func withoutImageBytes(m *rmv1.ChatMessage) (*rmv1.ChatMessage, bool) {
	var content []*rmv1.ContentPart
	for i, p := range m.GetContent() {
		img := p.GetImage()
		if img == nil || len(img.GetData()) == 0 {
			continue
		}
		if content == nil {
			content = slices.Clone(m.GetContent())
		}
		content[i] = &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{
			MediaType: img.GetMediaType(), Url: img.GetUrl(), Detail: img.GetDetail(),
			Blob: &rmv1.BlobRef{MediaType: img.GetMediaType(), Size: int64(len(img.GetData()))},
		}}}
	}
	if content == nil {
		return m, false
	}
	c := copyMessage(m)
	c.Content = content
	return c, true
}

func withoutImages(m *rmv1.ChatMessage) *rmv1.ChatMessage {
	c := copyMessage(m)
	c.Content = nil
	for _, p := range m.GetContent() {
		if p.GetImage() != nil {
			c.Content = append(c.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: "(an earlier screenshot, omitted)"}})
			continue
		}
		c.Content = append(c.Content, p)
	}
	return c
}

func textMsg(role, text string) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: role, Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: text}}}}
}

func msgText(m *rmv1.ChatMessage) string {
	var b strings.Builder
	for _, p := range m.GetContent() {
		b.WriteString(p.GetText())
	}
	return b.String()
}

// observationMsg is the user message showing a desktop observation, with
// notes about failed actions first.
func (l *loop) observationMsg(obs env.Observation, notes []string, step int) *rmv1.ChatMessage {
	m := &rmv1.ChatMessage{Role: "user"}
	add := func(s string) {
		m.Content = append(m.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Text{Text: s}})
	}
	// The task and the step number in every observation keep the model (and
	// a scripted stand-in) oriented after older turns lose their images.
	add(fmt.Sprintf("Task: %s\nStep %d of at most %d.", l.task.Instruction, step, l.cfg.MaxTurns))
	for _, n := range notes {
		add(n)
	}
	ot := l.cfg.ObservationType
	withShot := ot == "" || strings.Contains(ot, "screenshot") || ot == "som"
	withTree := strings.Contains(ot, "a11y_tree")
	if withTree {
		tree := obs.A11yTree
		if len(tree) > l.cfg.MaxA11yChars {
			tree = clipUTF8(tree, l.cfg.MaxA11yChars) + "\n...(truncated)"
		}
		add("Given the info from accessibility tree as below:\n" + tree + "\n")
	}
	if obs.Terminal != "" {
		add("Terminal output:\n" + obs.Terminal + "\n")
	}
	if withShot && len(obs.Screenshot) > 0 {
		add("Given the screenshot as below. What's the next step that you will do to help with the task?")
		img := obs.Screenshot
		if ms := l.cfg.Space.ModelScreen; ms.Width > 0 && (ms != l.scr) {
			if scaled, err := scalePNG(img, ms); err == nil {
				img = scaled
			}
		}
		m.Content = append(m.Content, &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: img, MediaType: mediaType(img)}}})
	} else {
		add("What's the next step that you will do to help with the task?")
	}
	return m
}

func mediaType(b []byte) string {
	if len(b) > 2 && b[0] == 0xff && b[1] == 0xd8 {
		return "image/jpeg"
	}
	return "image/png"
}

// appendFeedback adds what the model sees after its actions: tool
// results for its tool calls, then (desktop) the new observation.
func (l *loop) appendFeedback(resp *rmv1.ChatMessage, acts []action.Action, results []env.Result, next env.Observation, step int) {
	var notes []string
	for _, c := range resp.GetToolCalls() {
		var parts []string
		for i, a := range acts {
			if a.Tool == nil || a.Tool.ID != c.GetId() || i >= len(results) {
				continue
			}
			parts = append(parts, resultText(results[i]))
		}
		l.conv = append(l.conv, &rmv1.ChatMessage{Role: "tool", ToolCallId: c.GetId(), Name: c.GetName(),
			Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: strings.Join(parts, "\n")}}}})
	}
	if !l.cfg.Space.Desktop {
		// A short user turn after the tool messages says what came back
		// (seed 002's formatted tool response), so the next answer is
		// conditioned on it even by servers that match the last user turn.
		var lines []string
		for i, a := range acts {
			if a.Tool == nil || i >= len(results) {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s(%s) returned: %s", a.Tool.Name, clipText(a.Tool.Arguments, 300), clipText(resultText(results[i]), 500)))
		}
		if next.Text != "" {
			lines = append(lines, next.Text)
		}
		if len(lines) > 0 {
			lines = append(lines, "Continue, or give the final answer.")
			l.conv = append(l.conv, textMsg("user", strings.Join(lines, "\n")))
		}
		return
	}
	if len(resp.GetToolCalls()) == 0 {
		for i, r := range results {
			if !r.OK && i < len(acts) {
				notes = append(notes, fmt.Sprintf("The action %s failed: %s", acts[i].Type, r.Error))
			}
		}
	}
	l.conv = append(l.conv, l.observationMsg(next, notes, step))
}

func clipText(s string, n int) string {
	if len(s) > n {
		return clipUTF8(s, n) + "..."
	}
	return s
}

// maxToolOutput bounds a tool result fed back to the model.
const maxToolOutput = 16 << 10

func resultText(r env.Result) string {
	s := r.Output
	if !r.OK {
		s = "Error: " + r.Error
		if r.Output != "" {
			s += "\n" + r.Output
		}
	}
	if s == "" {
		s = "ok"
	}
	if len(s) > maxToolOutput {
		s = clipUTF8(s, maxToolOutput) + "\n...(truncated)"
	}
	return s
}

// appendParseFeedback tells the model why its answer was refused.
func (l *loop) appendParseFeedback(msg *rmv1.ChatMessage, perr error) {
	text := validText(fmt.Sprintf("Your answer could not be parsed: %v. Answer again, in the required format.", perr))
	// Every tool call needs its answer before the next user turn.
	for _, c := range msg.GetToolCalls() {
		l.conv = append(l.conv, &rmv1.ChatMessage{Role: "tool", ToolCallId: c.GetId(), Name: c.GetName(),
			Content: []*rmv1.ContentPart{{Part: &rmv1.ContentPart_Text{Text: "Error: the answer was refused."}}}})
	}
	l.conv = append(l.conv, textMsg("user", text))
}

func modelCall(req *rmv1.ChatRequest, resp *rmv1.ChatResponse, ch *rmv1.ChatChoice) *rmv1.ModelCall {
	images := 0
	for _, m := range req.GetMessages() {
		for _, p := range m.GetContent() {
			if p.GetImage() != nil {
				images++
			}
		}
	}
	return &rmv1.ModelCall{
		RequestSummary:     fmt.Sprintf("model=%s messages=%d images=%d tools=%d", req.GetModel(), len(req.GetMessages()), images, len(req.GetTools())),
		ResponseText:       msgText(ch.GetMessage()),
		ToolCalls:          ch.GetMessage().GetToolCalls(),
		PromptTokenIds:     resp.GetPromptTokenIds(),
		CompletionTokenIds: ch.GetTokenIds(),
		Logprobs:           ch.GetLogprobs(),
		ModelVersion:       resp.GetModelVersion(),
		Backend:            resp.GetBackend(),
		Latency:            resp.GetLatency(),
		TimeToFirstToken:   resp.GetTimeToFirstToken(),
		FinishReason:       ch.GetFinishReason(),
		Usage:              resp.GetUsage(),
		Model:              resp.GetModel(),
		VersionChanged:     resp.GetVersionChanged(),
	}
}

// record builds the step and hands it to the sinks.
func (l *loop) record(ctx context.Context, obs env.Observation, resp *rmv1.ChatMessage, acts []action.Action, results []env.Result, done bool, stepErr string, retry int, start time.Time, after []byte) {
	mc := l.pendingCall
	if mc == nil {
		mc = &rmv1.ModelCall{ResponseText: msgText(resp)}
	}
	// The messages this turn added. Images keep their bytes: storage stores
	// content once, and it does not resolve references to blobs of the
	// step that carries them.
	mc.NewMessages = append(mc.NewMessages, l.conv[l.mark:]...)
	l.mark = len(l.conv)
	l.shedImages()
	if retry == 0 {
		retry = l.retryOfCall
	}
	st := &rmv1.Step{
		EpisodeId:   l.cfg.EpisodeID,
		Index:       int32(l.stepIdx),
		Observation: observationProto(obs, l.refs.digestOf(obs.Screenshot)),
		ModelCall:   mc,
		Done:        done,
		Error:       stepErr,
		StartTime:   timestamppb.New(start),
		EndTime:     timestamppb.New(l.d.Clock.Now()),
		Retry:       int32(retry),
	}
	for _, a := range acts {
		st.Actions = append(st.Actions, action.ToProto(a))
	}
	for _, r := range results {
		st.Results = append(st.Results, &rmv1.ActionResult{Ok: r.OK, Error: r.Error, Output: r.Output})
	}
	l.stepIdx++
	l.pendingCall = nil
	l.retryOfCall = 0
	rec := StepRecord{Step: st, Actions: acts, After: after, Time: start}
	for _, s := range l.d.Sinks {
		s.Record(ctx, rec)
	}
	l.d.Progress("acting", l.stepIdx)
}

// observationProto is the step's observation; shotSHA, when known, is the
// screenshot's digest (storage checks it against the bytes).
func observationProto(o env.Observation, shotSHA string) *rmv1.Observation {
	p := &rmv1.Observation{Terminal: o.Terminal, Text: o.Text}
	if len(o.Screenshot) > 0 {
		p.Screenshot = &rmv1.BlobRef{MediaType: mediaType(o.Screenshot), Size: int64(len(o.Screenshot)), Data: o.Screenshot, Sha256: shotSHA}
	}
	if o.A11yTree != "" {
		p.AccessibilityTree = &rmv1.BlobRef{MediaType: "application/xml", Size: int64(len(o.A11yTree)), Data: []byte(o.A11yTree)}
	}
	return p
}
