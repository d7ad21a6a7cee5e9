// Package export writes a stored rollout as files: JSONL for training (one
// line per episode with messages, token ids, logprobs and response mask) and
// OSWorld's per-task results layout (<domain>/<task_id>/traj.jsonl,
// step_N_<timestamp>.png, recording.mp4, result.txt), so OSWorld's result
// scripts read our runs.
package export

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
)

// Source reads stored episodes.
type Source interface {
	ListEpisodes(ctx context.Context, f index.Filter, after *index.Cursor, limit int) ([]*pb.Episode, *index.Cursor, error)
	Steps(ctx context.Context, episodeID string, maxBytes int64) ([]*pb.Step, error)
}

// Blobs reads stored blobs whole, verified against their hash.
type Blobs interface {
	Read(ctx context.Context, key string) ([]byte, error)
}

// Sink receives the exported files one after the other.
type Sink interface {
	// Create starts the file at a relative slash-separated path; the
	// previous file is closed first.
	Create(path string) (io.WriteCloser, error)
}

// Request selects what to export.
type Request struct {
	RolloutID    string
	Format       pb.ExportFormat
	InlineImages bool
	Status       pb.EpisodeStatus
}

// maxEpisodeBytes bounds the step bodies of one episode an export holds in
// memory (one JSONL line, one traj.jsonl); an episode past it fails the
// export rather than the process.
const maxEpisodeBytes = 256 << 20

// JSONLName is the file name of a JSONL export.
const JSONLName = "rollout.jsonl"

// Exporter writes exports.
type Exporter struct {
	src   Source
	blobs Blobs
	// maxEpisodeBytes is maxEpisodeBytes; tests lower it.
	maxEpisodeBytes int64
}

// New returns an Exporter.
func New(src Source, blobs Blobs) *Exporter {
	return &Exporter{src: src, blobs: blobs, maxEpisodeBytes: maxEpisodeBytes}
}

// Write exports the rollout into sink.
func (x *Exporter) Write(ctx context.Context, req Request, sink Sink) error {
	switch req.Format {
	case pb.ExportFormat_EXPORT_FORMAT_JSONL:
		return x.writeJSONL(ctx, req, sink)
	case pb.ExportFormat_EXPORT_FORMAT_OSWORLD:
		return x.writeOSWorld(ctx, req, sink)
	default:
		return fmt.Errorf("export format %v: %w", req.Format, errUnknownFormat)
	}
}

var errUnknownFormat = fmt.Errorf("unknown export format")

// episodes calls fn for each selected episode in start order.
func (x *Exporter) episodes(ctx context.Context, req Request, fn func(*pb.Episode) error) error {
	f := index.Filter{RolloutID: req.RolloutID, Status: req.Status}
	var cur *index.Cursor
	for {
		eps, next, err := x.src.ListEpisodes(ctx, f, cur, 500)
		if err != nil {
			return err
		}
		for _, ep := range eps {
			if err := fn(ep); err != nil {
				return err
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
}

func (x *Exporter) writeJSONL(ctx context.Context, req Request, sink Sink) error {
	w, err := sink.Create(JSONLName)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	// A first pass over the episode headers (no steps) gives each group's
	// mean reward, so that every line can carry its advantage.
	groups := map[string]*groupMean{}
	err = x.episodes(ctx, req, func(ep *pb.Episode) error {
		// An episode without a group has no group-relative advantage.
		if ep.GetStatus() == pb.EpisodeStatus_EPISODE_STATUS_DONE && ep.GetGroupId() != "" {
			g := groups[ep.GetGroupId()]
			if g == nil {
				g = &groupMean{}
				groups[ep.GetGroupId()] = g
			}
			g.sum += ep.GetScore()
			g.n++
		}
		return nil
	})
	if err == nil {
		err = x.episodes(ctx, req, func(ep *pb.Episode) error {
			steps, err := x.src.Steps(ctx, ep.GetEpisodeId(), x.maxEpisodeBytes)
			if err != nil {
				return err
			}
			line, err := x.trainingLine(ctx, ep, steps, req.InlineImages)
			if err != nil {
				return err
			}
			if g := groups[ep.GetGroupId()]; g != nil && line.Reward != nil {
				adv := *line.Reward - g.sum/float64(g.n)
				line.Advantage = &adv
			}
			return enc.Encode(line)
		})
	}
	if err != nil {
		w.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// startsWithSystem reports whether the first model call's first new
// message is a system message.
func startsWithSystem(steps []*pb.Step) bool {
	for _, st := range steps {
		if mc := st.GetModelCall(); mc != nil {
			msgs := mc.GetNewMessages()
			return len(msgs) > 0 && msgs[0].GetRole() == "system"
		}
	}
	return false
}

// groupMean sums the rewards of a group's DONE episodes.
type groupMean struct {
	sum float64
	n   int
}

type trainingLine struct {
	EpisodeID string `json:"episode_id"`
	RolloutID string `json:"rollout_id"`
	GroupID   string `json:"group_id"`
	TaskID    string `json:"task_id"`
	Domain    string `json:"domain"`
	Seed      int64  `json:"seed"`
	Attempt   int32  `json:"attempt"`
	Status    string `json:"status"`
	// Reward and Advantage are set for DONE episodes only: a failed
	// episode has no reward (a failure is never a score of 0), and it is
	// left out of its group's mean. Advantage is GRPO's group-relative
	// one: the reward minus the mean reward of the group's DONE episodes
	// in this export, none for an episode without a group.
	Reward        *float64 `json:"reward,omitempty"`
	Advantage     *float64 `json:"advantage,omitempty"`
	FailureReason string   `json:"failure_reason,omitempty"`
	// Evaluation is what the evaluator reported with the reward (the
	// metrics, their scores, the getters' results), as the runner gave it.
	Evaluation    json.RawMessage `json:"evaluation,omitempty"`
	ModelVersions []int64         `json:"model_versions"`
	NumSteps      int             `json:"num_steps"`
	Messages      []message       `json:"messages"`
	Turns         []turn          `json:"turns"`
	// The flat token-in/token-out sequence, present when every turn has
	// token ids and each prompt extends the previous prompt+completion.
	InputIDs      []int32   `json:"input_ids,omitempty"`
	ResponseMask  []int8    `json:"response_mask,omitempty"`
	TokenLogprobs []float64 `json:"logprobs,omitempty"`
	TokenVersions []int64   `json:"versions,omitempty"`
}

type turn struct {
	StepIndex          int32     `json:"step_index"`
	ModelVersion       int64     `json:"model_version"`
	PromptTokenIDs     []int32   `json:"prompt_token_ids"`
	CompletionTokenIDs []int32   `json:"completion_token_ids"`
	Logprobs           []float64 `json:"logprobs"`
	Reward             float64   `json:"reward"`
	FinishReason       string    `json:"finish_reason,omitempty"`
}

type message struct {
	Role       string     `json:"role"`
	Content    []part     `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

type part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	// URL is a data URL when images are inline, else "sha256:<hex>", a
	// reference GetBlob resolves.
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (x *Exporter) trainingLine(ctx context.Context, ep *pb.Episode, steps []*pb.Step, inline bool) (*trainingLine, error) {
	l := &trainingLine{
		EpisodeID: ep.GetEpisodeId(), RolloutID: ep.GetRolloutId(), GroupID: ep.GetGroupId(), TaskID: ep.GetTaskId(),
		Domain: ep.GetDomain(), Seed: ep.GetSeed(), Attempt: ep.GetAttempt(), Status: ep.GetStatus().String(),
		FailureReason: ep.GetFailureReason(), ModelVersions: ep.GetModelVersions(),
		NumSteps: len(steps), Messages: []message{}, Turns: []turn{},
	}
	if ep.GetStatus() == pb.EpisodeStatus_EPISODE_STATUS_DONE {
		r := ep.GetScore()
		l.Reward = &r
	}
	if d := ep.GetEvaluatorDetailsJson(); d != "" && json.Valid([]byte(d)) {
		l.Evaluation = json.RawMessage(d)
	}
	if l.ModelVersions == nil {
		l.ModelVersions = []int64{}
	}
	// The episode's system prompt heads the conversation, unless the first
	// model call already sent it as its first message (the runner does).
	if sp := ep.GetSystemPrompt(); sp != "" && !startsWithSystem(steps) {
		l.Messages = append(l.Messages, message{Role: "system", Content: []part{{Type: "text", Text: sp}}})
	}
	flat := true
	// Inline images are held in the line with the steps: they are bounded
	// as the step bodies are.
	var in *inlined
	if inline {
		in = &inlined{episodeID: ep.GetEpisodeId(), left: x.maxEpisodeBytes}
	}
	for _, st := range steps {
		mc := st.GetModelCall()
		if mc == nil {
			continue
		}
		endsWithAssistant := false
		for _, m := range mc.GetNewMessages() {
			msg, err := x.message(ctx, m, in)
			if err != nil {
				return nil, err
			}
			l.Messages = append(l.Messages, msg)
			endsWithAssistant = m.GetRole() == "assistant"
		}
		if !endsWithAssistant {
			l.Messages = append(l.Messages, message{Role: "assistant", Content: []part{{Type: "text", Text: mc.GetResponseText()}},
				ToolCalls: toolCalls(mc.GetToolCalls())})
		}
		t := turn{StepIndex: st.GetIndex(), ModelVersion: mc.GetModelVersion(), PromptTokenIDs: mc.GetPromptTokenIds(),
			CompletionTokenIDs: mc.GetCompletionTokenIds(), Reward: st.GetReward(), FinishReason: mc.GetFinishReason(),
			Logprobs: make([]float64, 0, len(mc.GetLogprobs()))}
		for _, lp := range mc.GetLogprobs() {
			t.Logprobs = append(t.Logprobs, lp.GetLogprob())
		}
		if t.PromptTokenIDs == nil {
			t.PromptTokenIDs = []int32{}
		}
		if t.CompletionTokenIDs == nil {
			t.CompletionTokenIDs = []int32{}
		}
		l.Turns = append(l.Turns, t)
		flat = flat && l.extend(t)
	}
	if !flat || len(l.Turns) == 0 {
		l.InputIDs, l.ResponseMask, l.TokenLogprobs, l.TokenVersions = nil, nil, nil, nil
	}
	return l, nil
}

// extend appends a turn to the flat sequence and reports whether the turn's
// prompt continued it.
func (l *trainingLine) extend(t turn) bool {
	if len(t.PromptTokenIDs) == 0 || len(t.CompletionTokenIDs) == 0 || len(t.PromptTokenIDs) < len(l.InputIDs) {
		return false
	}
	for i, id := range l.InputIDs {
		if t.PromptTokenIDs[i] != id {
			return false
		}
	}
	for _, id := range t.PromptTokenIDs[len(l.InputIDs):] {
		l.InputIDs = append(l.InputIDs, id)
		l.ResponseMask = append(l.ResponseMask, 0)
		l.TokenLogprobs = append(l.TokenLogprobs, 0)
		l.TokenVersions = append(l.TokenVersions, -1)
	}
	for i, id := range t.CompletionTokenIDs {
		lp := 0.0
		if i < len(t.Logprobs) {
			lp = t.Logprobs[i]
		}
		l.InputIDs = append(l.InputIDs, id)
		l.ResponseMask = append(l.ResponseMask, 1)
		l.TokenLogprobs = append(l.TokenLogprobs, lp)
		l.TokenVersions = append(l.TokenVersions, t.ModelVersion)
	}
	return true
}

func toolCalls(tcs []*pb.ToolCall) []toolCall {
	var out []toolCall
	for _, tc := range tcs {
		out = append(out, toolCall{ID: tc.GetId(), Type: "function", Function: function{Name: tc.GetName(), Arguments: tc.GetArgumentsJson()}})
	}
	return out
}

// inlined is what is left of an episode's bound for inline image data.
type inlined struct {
	episodeID string
	left      int64
}

// message converts a chat message; in, when set, puts images inline
// within its bound.
func (x *Exporter) message(ctx context.Context, m *pb.ChatMessage, in *inlined) (message, error) {
	out := message{Role: m.GetRole(), Content: []part{}, ToolCalls: toolCalls(m.GetToolCalls()), ToolCallID: m.GetToolCallId(), Name: m.GetName()}
	for _, p := range m.GetContent() {
		switch {
		case p.GetImage() != nil:
			img := p.GetImage()
			u := img.GetUrl()
			if ref := img.GetBlob(); ref != nil {
				u = "sha256:" + ref.GetSha256()
				if in != nil {
					if in.left -= ref.GetSize(); in.left < 0 {
						return out, fmt.Errorf("episode %s: inline images pass %d bytes, export it without inline_images: %w",
							in.episodeID, x.maxEpisodeBytes, index.ErrTooLarge)
					}
					data, err := x.readBlob(ctx, ref.GetSha256())
					if err != nil {
						return out, err
					}
					media := ref.GetMediaType()
					if media == "" {
						media = "image/png"
					}
					u = "data:" + media + ";base64," + base64.StdEncoding.EncodeToString(data)
				}
			}
			out.Content = append(out.Content, part{Type: "image_url", ImageURL: &imageURL{URL: u, Detail: img.GetDetail()}})
		default:
			out.Content = append(out.Content, part{Type: "text", Text: p.GetText()})
		}
	}
	return out, nil
}

func (x *Exporter) readBlob(ctx context.Context, sha string) ([]byte, error) {
	return x.blobs.Read(ctx, sha)
}

// copyBlob writes a blob as a file. The blob is read and verified whole
// before the file starts, so an export never carries part of a damaged one.
func (x *Exporter) copyBlob(ctx context.Context, sink Sink, name, sha string) error {
	data, err := x.blobs.Read(ctx, sha)
	if err != nil {
		return err
	}
	return writeFile(sink, name, data)
}

func writeFile(sink Sink, name string, data []byte) error {
	w, err := sink.Create(name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// osworldDir names an episode's directory: <domain>/<task_id>, with the
// episode id appended when a task has several episodes (GRPO groups), since
// OSWorld's layout has room for one run per task.
func osworldDir(ep *pb.Episode, shared bool) string {
	domain := ep.GetDomain()
	if domain == "" {
		domain = "unknown"
	}
	task := ep.GetTaskId()
	if task == "" {
		task = ep.GetEpisodeId()
	} else if shared {
		task += "-" + ep.GetEpisodeId()
	}
	return path.Join(domain, task)
}

// pythonFloat formats like Python's str(float), which result.txt holds.
func pythonFloat(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	for _, c := range s {
		if c == '.' {
			return s
		}
	}
	return s + ".0"
}
