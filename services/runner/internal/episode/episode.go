// Package episode assembles and runs one episode: it picks the
// environment for the task's mode, the action space, the step sinks
// (storage stream, OSWorld results layout) and runs the agent loop, then
// turns the outcome into the Episode message that storage and the
// coordinator get. Both the Work loop and `runner episode` use it.
package episode

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/desktop"
	mathenv "github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/math"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/rag"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/web"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/dlcache"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/trajectory"
)

// maxRecordingBlob bounds the recording sent to storage (storage's default
// blob limit is 32 MiB).
const maxRecordingBlob = 24 << 20

// Options are the runner-wide settings environments need.
type Options struct {
	// CacheDir is the host cache of OSWorld task files.
	CacheDir string
	// Downloads is the download store of OSWorld tasks' files, shared by
	// every episode; nil keeps one in CacheDir/downloads per episode.
	Downloads *dlcache.Cache
	// Google are the Google account settings of OSWorld's googledrive and
	// login steps and googledrive_file getter (osworld.LoadGoogleSettings);
	// nil refuses the tasks that need them, by name, before they start.
	Google *osworld.GoogleSettings
	// WindowWait bounds an OSWorld setup step that waits for a window
	// (osworld.Session.WindowWait); zero is the default.
	WindowWait time.Duration
	// EvalTimeout bounds an OSWorld task's evaluation
	// (osworld.Session.EvalTimeout); zero is the default.
	EvalTimeout time.Duration
	// ClientPassword is the guest password for {CLIENT_PASSWORD} when the
	// lease carries none.
	ClientPassword string
	// PyLimits bound local Python runs.
	PyLimits py.Limits
	// RAG is the rag environment's corpus index (loaded once per runner).
	RAG *rag.Index
	// WebDocs is the web environment's local document collection.
	WebDocs *rag.Index
	// WebSearchURL is an HTTP search endpoint for the web environment.
	WebSearchURL string
	// HistoryImages is the default screenshot window.
	HistoryImages int
	// StorageBuffer bounds the steps waiting for storage.
	StorageBuffer int
	// GuestRetryWait is the pause between guest read retries.
	GuestRetryWait time.Duration
	// GuestWaitTries bounds the wait for the guest at reset.
	GuestWaitTries int
}

// Deps are the clients an episode uses. Storage may be nil.
type Deps struct {
	Chat    chatClient
	Storage appendClient
	Clock   clock.Clock
	Log     *zap.Logger
	Judge   judgeFactory
}

// Spec is one episode to run.
type Spec struct {
	Episode *rmv1.Episode
	Task    env.Task
	Agent   *rmv1.AgentConfig
	// Guest is the guest server URL (from the lease or --guest); empty for
	// episodes without a VM.
	Guest      string
	GuestToken string
	// GuestPorts are the VM's other services by name ("chrome" for
	// Chrome's DevTools), as the lease gives them.
	GuestPorts map[string]string
	// ClientPassword from the lease.
	ClientPassword string
	Screen         action.Screen
	// OutputDir, when set, receives OSWorld's results layout.
	OutputDir string
	// Progress is told the phase and step count.
	Progress func(phase string, steps int)
	// Sinks are extra step sinks (tests, summaries).
	Sinks []agent.StepSink
}

// Result is a finished episode.
type Result struct {
	// Episode is the episode in its terminal state, recording included.
	Episode *rmv1.Episode
	// StorageErr is set when storage did not acknowledge everything.
	StorageErr error
}

// Run runs one episode to its end within ctx (whose deadline is the
// episode's).
func Run(ctx context.Context, d Deps, o Options, s Spec) Result {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Log == nil {
		d.Log = zap.NewNop()
	}
	ep := proto.Clone(s.Episode).(*rmv1.Episode)
	ep.Status = rmv1.EpisodeStatus_EPISODE_STATUS_RUNNING
	ep.StartTime = timestamppb.New(d.Clock.Now())
	ep.Instruction = s.Task.Instruction
	ep.EnvMode = env.CanonicalMode(s.Task.Mode)
	if ep.TaskId == "" {
		ep.TaskId = s.Task.ID
	}
	if ep.Domain == "" {
		ep.Domain = s.Task.Domain
	}
	log := d.Log.With(zap.String("episode_id", ep.GetEpisodeId()), zap.String("rollout_id", ep.GetRolloutId()))

	finish := func(out agent.Outcome, streamer *trajectory.Streamer, writer *trajectory.OSWorldWriter) Result {
		ep.Status = out.Status
		ep.Score = out.Score
		ep.FinalAnswer = out.FinalAnswer
		ep.FailureReason = out.FailureReason
		ep.Error = out.Error
		ep.NumSteps = int32(out.Steps)
		ep.ModelVersions = out.ModelVersions
		ep.SystemPrompt = out.SystemPrompt
		ep.EndTime = timestamppb.New(d.Clock.Now())
		if out.Details != nil {
			if b, err := json.Marshal(out.Details); err == nil {
				ep.EvaluatorDetailsJson = string(b)
			}
		}
		if n := len(out.Recording); n > 0 && n <= maxRecordingBlob {
			ep.Recording = &rmv1.BlobRef{MediaType: "video/mp4", Size: int64(n), Data: out.Recording}
		} else if n > maxRecordingBlob {
			// Storage refuses blobs this large and would refuse the whole
			// final header with it; the recording stays in the results dir.
			log.Warn("recording too large for storage, not stored", zap.Int("bytes", n))
		}
		res := Result{Episode: ep}
		if writer != nil {
			if err := writer.WriteConversation(out.Conversation); err != nil {
				log.Warn("write conversation log", zap.Error(err))
			}
			done := out.Status == rmv1.EpisodeStatus_EPISODE_STATUS_DONE
			if err := writer.Finish(out.Score, done, out.FailureReason+": "+out.Error, out.Recording); err != nil {
				log.Warn("write results layout", zap.Error(err))
			}
		}
		if streamer != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			_, err := streamer.Close(cctx, ep)
			cancel()
			res.StorageErr = err
			if err != nil {
				log.Warn("storage did not acknowledge the episode", zap.Error(err))
			}
		}
		return res
	}

	cfg, err := agentConfig(s, o)
	if err != nil {
		return finish(agent.Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_FAILED, FailureReason: "bad_config", Error: err.Error()}, nil, nil)
	}
	// The environment's log lines (a setup step passed over, a screen
	// that never settled) name the episode too.
	envDeps := d
	envDeps.Log = log
	e, err := newEnvironment(s, o, envDeps)
	if err != nil {
		out := agent.Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_FAILED, FailureReason: "bad_config", Error: err.Error()}
		if u, ok := env.AsUnsupported(err); ok {
			out = agent.Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_UNSUPPORTED, FailureReason: u.Reason(), Error: err.Error()}
		}
		return finish(out, nil, nil)
	}

	sinks := append([]agent.StepSink{}, s.Sinks...)
	var writer *trajectory.OSWorldWriter
	if s.OutputDir != "" {
		if writer, err = trajectory.NewOSWorldWriter(s.OutputDir); err != nil {
			return finish(agent.Outcome{Status: rmv1.EpisodeStatus_EPISODE_STATUS_FAILED, FailureReason: "output", Error: err.Error()}, nil, nil)
		}
		sinks = append(sinks, writer)
	}
	var streamer *trajectory.Streamer
	if d.Storage != nil {
		header := proto.Clone(ep).(*rmv1.Episode)
		streamer = trajectory.NewStreamer(ctx, d.Storage, trajectory.StreamerConfig{Buffer: o.StorageBuffer}, d.Clock, log, header)
		sinks = append(sinks, streamer)
	}
	out := agent.Run(ctx, agent.Deps{Chat: d.Chat, Clock: d.Clock, Log: log, Sinks: sinks, Progress: s.Progress}, cfg, s.Task, e)
	log.Info("episode finished", zap.String("status", out.Status.String()), zap.Float64("score", out.Score), zap.Int("steps", out.Steps), zap.String("failure_reason", out.FailureReason))
	return finish(out, streamer, writer)
}

func agentConfig(s Spec, o Options) (agent.Config, error) {
	a := s.Agent
	if a == nil {
		a = &rmv1.AgentConfig{}
	}
	mode := env.CanonicalMode(s.Task.Mode)
	spaceName := a.GetActionSpace()
	if spaceName == "" || (mode != env.ModeDesktop && spaceName != "tool_calls") {
		// Tool environments always speak tool calls; desktop defaults to
		// pyautogui as OSWorld does.
		spaceName = "pyautogui"
		if mode != env.ModeDesktop {
			spaceName = "tool_calls"
		}
	}
	space, err := actionspace.Get(spaceName)
	if err != nil {
		return agent.Config{}, err
	}
	if mode == env.ModeDesktop && !space.Desktop {
		return agent.Config{}, fmt.Errorf("action space %s cannot drive a desktop", space.Name)
	}
	hist := int(a.GetHistoryImages())
	if hist <= 0 {
		hist = o.HistoryImages
	}
	obsType := a.GetObservationType()
	if obsType == "" {
		obsType = "screenshot"
	}
	if obsType == "som" {
		return agent.Config{}, &env.UnsupportedError{Kind: "observation_type", Name: "som"}
	}
	return agent.Config{
		EpisodeID:       s.Episode.GetEpisodeId(),
		Model:           a.GetModel(),
		Space:           space,
		ObservationType: obsType,
		MaxTurns:        int(a.GetMaxTurns()),
		MaxRetries:      int(a.GetMaxRetries()),
		HistoryImages:   hist,
		Sampling:        a.GetSampling(),
		Logprobs:        a.GetLogprobs(),
		TopLogprobs:     a.GetTopLogprobs(),
		ReturnTokenIDs:  a.GetReturnTokenIds(),
		SystemPrompt:    a.GetSystemPrompt(),
		EnableRecording: a.GetEnableRecording(),
	}, nil
}

// newEnvironment builds the environment for the task's mode. New modes are
// added here; the loop does not change.
func newEnvironment(s Spec, o Options, d Deps) (agent.Environment, error) {
	var g *guest.Client
	if s.Guest != "" {
		var err error
		if g, err = guest.New(s.Guest, s.GuestToken); err != nil {
			return nil, err
		}
		g.Ports = s.GuestPorts
		if o.GuestRetryWait > 0 {
			g.RetryWait = o.GuestRetryWait
		}
	}
	judge := d.judge(s.Agent)
	metric := s.Agent.GetEvaluationMetric()
	switch mode := env.CanonicalMode(s.Task.Mode); mode {
	case env.ModeDesktop:
		if g == nil {
			return nil, fmt.Errorf("desktop episodes need a guest (a lease endpoint or --guest)")
		}
		pw := s.ClientPassword
		if pw == "" {
			pw = o.ClientPassword
		}
		scr := s.Screen
		if scr.Width == 0 && s.Agent.GetScreenWidth() > 0 {
			scr = action.Screen{Width: int(s.Agent.GetScreenWidth()), Height: int(s.Agent.GetScreenHeight())}
		}
		return desktop.New(g, desktop.Config{
			ObservationType: s.Agent.GetObservationType(),
			CacheDir:        o.CacheDir,
			ClientPassword:  pw,
			Screen:          scr,
			GuestWaitTries:  o.GuestWaitTries,
			Settle:          s.Agent.GetSleepAfterExecution().AsDuration(),
			Downloads:       o.Downloads,
			Google:          o.Google,
			WindowWait:      o.WindowWait,
			EvalTimeout:     o.EvalTimeout,
			Log:             d.Log,
		}), nil
	case env.ModeMath:
		return mathenv.New(metric, judge), nil
	case env.ModePy:
		return py.New(py.Config{Limits: o.PyLimits, Guest: g, Metric: metric, Judge: judge}), nil
	case env.ModeRAG:
		return rag.New(rag.Config{Index: o.RAG, Metric: metric, Judge: judge})
	case env.ModeWeb:
		return web.New(web.Config{Docs: o.WebDocs, SearchURL: o.WebSearchURL, Metric: metric, Judge: judge})
	default:
		return nil, &env.UnsupportedError{Kind: "env", Name: mode}
	}
}
