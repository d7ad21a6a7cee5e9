package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/coordinator/internal/tasksource"
)

// Model versions stay below 2^53 so that JSON clients (grpc-gateway,
// grpcurl, Python's json) read them exactly, and a normal update moves at
// most MaxVersionStep ahead, so that one mistyped version cannot exhaust the
// range and block every later update; an operator undoes one with reset.
const (
	MaxModelVersion = 1<<53 - 1
	MaxVersionStep  = 1_000_000
)

// maxQuoted bounds how much of a caller's value an error message quotes.
const maxQuoted = 64

// quote quotes at most maxQuoted bytes of s, so that an error about a
// value stays short however long the value is.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(truncate(s, maxQuoted)) + "..."
}

// storableText makes text the coordinator derived from outside input (a
// file name in a task source error) fit a protobuf string and a PostgreSQL
// text column: valid UTF-8 without NUL bytes.
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// checkVersion checks a model version update against the current version.
func checkVersion(v, cur int64, reset bool) error {
	switch {
	case v < 0 || v > MaxModelVersion:
		return fieldErr("version", fmt.Sprintf("must be between 0 and %d (2^53-1)", int64(MaxModelVersion)))
	case reset:
		return nil
	case v <= cur:
		return fieldErr("version", fmt.Sprintf("must be greater than the current version %d (reset: true sets a lower one)", cur))
	case v-cur > MaxVersionStep:
		return fieldErr("version", fmt.Sprintf("must be at most %d above the current version %d (reset: true sets any version)", MaxVersionStep, cur))
	}
	return nil
}

// The runner's supported launch-wide settings (services/runner's
// actionspace and agent packages): an unknown one would be refused by every
// episode, so StartRollout refuses it first.
var (
	actionSpaces     = map[string]bool{"": true, "computer_13": true, "pyautogui": true, "uitars": true, "uitars15": true, "claude_computer_use": true, "tool_calls": true}
	observationTypes = map[string]bool{"": true, "screenshot": true, "a11y_tree": true, "screenshot_a11y_tree": true}
)

// checkAgent bounds every field of the launch-wide agent configuration.
// desktop says whether some task runs on a desktop.
func checkAgent(a *pb.AgentConfig, desktop bool) error {
	if a == nil {
		return nil
	}
	const p = "spec.agent."
	switch {
	case !actionSpaces[a.ActionSpace]:
		return fieldErr(p+"action_space", fmt.Sprintf("unknown action space %s (have computer_13, pyautogui, uitars, uitars15, claude_computer_use, tool_calls)", quote(a.ActionSpace)))
	case desktop && a.ActionSpace == "tool_calls":
		return fieldErr(p+"action_space", "tool_calls cannot drive a desktop; desktop tasks need a desktop action space")
	case a.ObservationType == "som":
		return fieldErr(p+"observation_type", `"som" is not supported by the runner (have screenshot, a11y_tree, screenshot_a11y_tree)`)
	case !observationTypes[a.ObservationType]:
		return fieldErr(p+"observation_type", fmt.Sprintf("unknown observation type %s (have screenshot, a11y_tree, screenshot_a11y_tree)", quote(a.ObservationType)))
	case a.MaxTurns < 0 || a.MaxTurns > 1000:
		return fieldErr(p+"max_turns", "must be between 0 and 1000")
	case a.MaxRetries < 0 || a.MaxRetries > 100:
		return fieldErr(p+"max_retries", "must be between 0 and 100")
	case len(a.Model) > 256:
		return fieldErr(p+"model", "must be at most 256 bytes")
	case len(a.JudgeModel) > 256:
		return fieldErr(p+"judge_model", "must be at most 256 bytes")
	case len(a.EvaluationMetric) > 64:
		return fieldErr(p+"evaluation_metric", "must be at most 64 bytes")
	case len(a.SystemPrompt) > 1<<20:
		return fieldErr(p+"system_prompt", "must be at most 1 MiB")
	case a.HistoryImages < 0 || a.HistoryImages > 100:
		return fieldErr(p+"history_images", "must be between 0 and 100")
	case a.TopLogprobs < 0 || a.TopLogprobs > 20:
		return fieldErr(p+"top_logprobs", "must be between 0 and 20")
	case a.ScreenWidth < 0 || a.ScreenWidth > 16384:
		return fieldErr(p+"screen_width", "must be between 0 and 16384")
	case a.ScreenHeight < 0 || a.ScreenHeight > 16384:
		return fieldErr(p+"screen_height", "must be between 0 and 16384")
	}
	if d := a.SleepAfterExecution; d != nil && (d.CheckValid() != nil || d.AsDuration() < 0 || d.AsDuration() > time.Minute) {
		return fieldErr(p+"sleep_after_execution", "must be between 0 and 1m")
	}
	return checkSampling(a.Sampling)
}

// checkSampling bounds the sampling parameters to what OpenAI-compatible
// servers accept.
func checkSampling(s *pb.SamplingParams) error {
	if s == nil {
		return nil
	}
	const p = "spec.agent.sampling."
	between := func(v *float64, lo, hi float64) bool {
		return v == nil || (!math.IsNaN(*v) && *v >= lo && *v <= hi)
	}
	switch {
	case !between(s.Temperature, 0, 2):
		return fieldErr(p+"temperature", "must be between 0 and 2")
	case !between(s.TopP, 0, 1) || (s.TopP != nil && *s.TopP == 0):
		return fieldErr(p+"top_p", "must be in (0, 1]")
	case s.TopK != nil && (*s.TopK < -1 || *s.TopK == 0 || *s.TopK > 100_000):
		return fieldErr(p+"top_k", "must be -1 (off) or between 1 and 100000")
	case s.MaxTokens != nil && (*s.MaxTokens < 1 || *s.MaxTokens > 1<<20):
		return fieldErr(p+"max_tokens", "must be between 1 and 1048576")
	case len(s.Stop) > 8:
		return fieldErr(p+"stop", "at most 8 stop sequences")
	case s.N < 0 || s.N > 16:
		return fieldErr(p+"n", "must be between 0 (default 1) and 16")
	case !between(s.PresencePenalty, -2, 2):
		return fieldErr(p+"presence_penalty", "must be between -2 and 2")
	case !between(s.FrequencyPenalty, -2, 2):
		return fieldErr(p+"frequency_penalty", "must be between -2 and 2")
	}
	for i, st := range s.Stop {
		if len(st) == 0 || len(st) > 256 {
			return fieldErr(fmt.Sprintf("%sstop[%d]", p, i), "must be 1-256 bytes")
		}
	}
	return nil
}

// checkResult bounds what a runner reports about an episode: the result is
// stored, counted (score) and handed to the trainer as it is, so a runner
// bug must not put a NaN reward or a huge string into a batch.
func checkResult(res *pb.Episode) (field, msg string) {
	const maxText = 1 << 20
	switch {
	case math.IsNaN(res.Score) || math.IsInf(res.Score, 0):
		return "score", "must be a finite number"
	case res.NumSteps < 0 || res.NumSteps > 1_000_000:
		return "num_steps", "must be between 0 and 1000000"
	case len(res.ModelVersions) > 10_000:
		return "model_versions", "at most 10000"
	case len(res.FinalAnswer) > maxText:
		return "final_answer", "must be at most 1 MiB"
	case len(res.EvaluatorDetailsJson) > maxText:
		return "evaluator_details_json", "must be at most 1 MiB"
	case len(res.SystemPrompt) > maxText:
		return "system_prompt", "must be at most 1 MiB"
	case len(res.Error) > 64<<10:
		return "error", "must be at most 64 KiB"
	case len(res.FailureReason) > 256:
		return "failure_reason", "must be at most 256 bytes"
	case res.StartTime != nil && res.StartTime.CheckValid() != nil:
		return "start_time", "is not a valid timestamp"
	case res.EndTime != nil && res.EndTime.CheckValid() != nil:
		return "end_time", "is not a valid timestamp"
	case len(res.Instruction) > tasksource.MaxTaskBytes:
		return "instruction", "must be at most 1 MiB"
	case res.Recording != nil && (len(res.Recording.Data) > 0 || len(res.Recording.Sha256) > 64 || len(res.Recording.MediaType) > 256):
		return "recording", "must be a reference (sha256, media_type, size) without data"
	case len(res.Labels) > 64:
		return "labels", "at most 64 labels"
	case proto.Size(res) > maxResultBytes:
		// Fields this coordinator does not know are stored and handed
		// out too.
		return "episode", fmt.Sprintf("must be at most %d MiB in all", maxResultBytes>>20)
	}
	short := []struct{ name, v string }{{"rollout_id", res.RolloutId}, {"group_id", res.GroupId}, {"task_id", res.TaskId},
		{"domain", res.Domain}, {"env_mode", res.EnvMode}, {"vm_id", res.VmId}}
	for _, f := range short {
		if len(f.v) > 256 {
			return f.name, "must be at most 256 bytes"
		}
	}
	for k, v := range res.Labels {
		if len(k) == 0 || len(k) > 128 || len(v) > 1024 {
			return "labels", "keys 1-128 bytes, values at most 1024 bytes"
		}
	}
	return "", ""
}

// maxResultBytes bounds a result in all: above the sum of its bounded
// fields.
const maxResultBytes = 5 << 20
