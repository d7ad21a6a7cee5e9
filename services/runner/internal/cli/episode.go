// Package cli holds the runner binary's subcommands: `runner episode`
// runs one task without a coordinator (for debugging an environment or a
// prompt, the way people use OSWorld's single-task scripts) and
// `runner parse` shows what an action space makes of one model answer.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/secretflag"
	"github.com/rolloutmesh/rolloutmesh/serverkit/tlscreds"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/agent"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/dial"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/rag"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/episode"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/taskfile"
)

// ErrEpisodeNotDone is returned when the episode ended in a state other
// than DONE, so scripts see a non-zero exit.
var ErrEpisodeNotDone = errors.New("episode did not finish")

// Episode runs `runner episode`.
func Episode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("runner episode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		taskPath   = fs.String("task", "", "task file: an OSWorld task JSON, or a JSONL benchmark file (required)")
		index      = fs.Int("index", 0, "which task of a multi-task file to run (0-based)")
		guestURL   = fs.String("guest", "", "guest server URL (desktopd or OSWorld's server), e.g. http://127.0.0.1:5000")
		guestToken = fs.String("guest-token", os.Getenv("DESKTOPD_TOKEN"), "bearer token of the guest server (default $DESKTOPD_TOKEN); prefer --guest-token-file or the environment, which ps does not show")
		mode       = fs.String("env", "", "environment mode: desktop (alias osworld), math, py, rag, web; default from the task")
		gateway    = fs.String("gateway", "127.0.0.1:50054", "modelgateway gRPC address")
		storage    = fs.String("storage", "", "storage gRPC address; empty keeps the trajectory local only")
		authToken  = fs.String("auth-token", os.Getenv("ROLLOUTMESH_AUTH_TOKEN"), "bearer token for the mesh's gRPC services (default $ROLLOUTMESH_AUTH_TOKEN)")
		output     = fs.String("output", "", "directory for OSWorld's results layout (traj.jsonl, step PNGs, result.txt, recording.mp4)")
		model      = fs.String("model", "", "model name as the gateway knows it; empty is the gateway's default")
		space      = fs.String("action-space", "", "computer_13, pyautogui, uitars, uitars15, claude_computer_use or tool_calls; default pyautogui (desktop) or tool_calls")
		obsType    = fs.String("observation-type", "screenshot", "screenshot, a11y_tree or screenshot_a11y_tree")
		maxTurns   = fs.Int("max-turns", 15, "maximum agent turns")
		maxRetries = fs.Int("max-retries", 3, "retries per turn for model errors and unparsable answers")
		history    = fs.Int("history-images", 3, "how many recent screenshots are sent as images")
		sleepAfter = fs.Duration("sleep-after", 2*time.Second, "pause after executing actions")
		record     = fs.Bool("record", false, "record the screen (desktop)")
		metric     = fs.String("metric", "", "benchmark metric for tasks without an evaluator (exact_match, f1_score, similarity, contains_answer, numeric_match, llm_judgement)")
		timeout    = fs.Duration("timeout", time.Hour, "episode deadline")
		cacheDir   = fs.String("cache-dir", "cache", "host cache for task files (OSWorld's cache/<task_id>)")
		password   = fs.String("client-password", "password", "guest password for {CLIENT_PASSWORD}")
		windowWait = fs.Duration("setup-window-timeout", osworld.DefaultWindowWait, "bound of an OSWorld setup step that waits for a window to appear (open, and activate_window while the program launched for it starts)")
		evalTime   = fs.Duration("eval-timeout", osworld.DefaultEvalTimeout, "bound of an OSWorld task's evaluation (postconfig, getters and metrics)")
		googleDir  = fs.String("google-settings", "", "folder of OSWorld's Google settings (googledrive/settings.yml with its credentials, google/settings.json); empty refuses the tasks that need a Google account")
		ragCorpus  = fs.String("rag-corpus", "", "rag corpus: a directory of .txt/.md files or a JSONL of {id,title,text}")
		webDocs    = fs.String("web-docs", "", "web environment's local collection: JSONL of {url,title,text}")
		webSearch  = fs.String("web-search-url", "", "web environment's HTTP search endpoint")
		asJSON     = fs.Bool("json", false, "print the finished episode as JSON instead of the summary")
		logLevel   = fs.String("log-level", "warn", "log level: debug, info, warn, error")
	)
	var peerTLS tlscreds.Client
	peerTLS.RegisterFlags(fs, "")
	secretFiles := secretflag.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := secretFiles.Resolve(); err != nil {
		return err
	}
	creds, err := peerTLS.Credentials()
	if err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	if *taskPath == "" {
		return fmt.Errorf("--task is required")
	}
	tasks, err := taskfile.Load(*taskPath)
	if err != nil {
		return err
	}
	if *index < 0 || *index >= len(tasks) {
		return fmt.Errorf("--index %d: the file has %d tasks", *index, len(tasks))
	}
	task := tasks[*index]
	if *mode != "" {
		task.Mode = *mode
	}
	if task.Mode == "" {
		task.Mode = env.ModeDesktop
	}
	if *metric != "" && task.Metric == "" {
		task.Metric = *metric
	}
	lvl, err := zap.ParseAtomicLevel(*logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	zc := zap.NewDevelopmentConfig()
	zc.Level = lvl
	zc.DisableStacktrace = true
	zc.OutputPaths, zc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	log, err := zc.Build()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // stderr

	opts := episode.Options{CacheDir: *cacheDir, ClientPassword: *password, PyLimits: py.DefaultLimits, HistoryImages: *history, WebSearchURL: *webSearch, WindowWait: *windowWait, EvalTimeout: *evalTime}
	if *googleDir != "" {
		if opts.Google, err = osworld.LoadGoogleSettings(*googleDir); err != nil {
			return fmt.Errorf("--google-settings: %w", err)
		}
	}
	if *ragCorpus != "" {
		if opts.RAG, err = rag.Load(*ragCorpus); err != nil {
			return err
		}
	}
	if *webDocs != "" {
		if opts.WebDocs, err = rag.Load(*webDocs); err != nil {
			return err
		}
	}
	gw, err := dial.ConnWith(*gateway, *authToken, creds)
	if err != nil {
		return err
	}
	defer gw.Close()
	deps := episode.Deps{Chat: rmv1.NewModelGatewayClient(gw), Log: log}
	if *storage != "" {
		st, err := dial.ConnWith(*storage, *authToken, creds)
		if err != nil {
			return err
		}
		defer st.Close()
		deps.Storage = rmv1.NewStorageClient(st)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	summary := &summarySink{w: stdout, quiet: *asJSON}
	res := episode.Run(ctx, deps, opts, episode.Spec{
		Episode: &rmv1.Episode{
			EpisodeId: fmt.Sprintf("local-%s-%d", safeID(task.ID), time.Now().UnixNano()),
			RolloutId: "local", TaskId: task.ID, Domain: task.Domain, Attempt: 1, RunnerId: "runner-episode",
		},
		Task: task,
		Agent: &rmv1.AgentConfig{
			Model: *model, ActionSpace: *space, ObservationType: *obsType, MaxTurns: int32(*maxTurns),
			MaxRetries: int32(*maxRetries), HistoryImages: int32(*history), EvaluationMetric: *metric,
			SleepAfterExecution: durationpb.New(*sleepAfter), EnableRecording: *record,
		},
		Guest:      *guestURL,
		GuestToken: *guestToken,
		OutputDir:  *output,
		Sinks:      []agent.StepSink{summary},
	})
	ep := res.Episode
	if *asJSON {
		ep.Recording = nil // bytes do not belong on a terminal
		b, err := json.MarshalIndent(episodeJSON(ep), "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "episode %s task %s env %s: %s score=%g steps=%d\n", ep.GetEpisodeId(), ep.GetTaskId(), ep.GetEnvMode(),
			strings.TrimPrefix(ep.GetStatus().String(), "EPISODE_STATUS_"), ep.GetScore(), ep.GetNumSteps())
		if ep.GetFinalAnswer() != "" {
			fmt.Fprintf(stdout, "final answer: %s\n", clip(ep.GetFinalAnswer(), 500))
		}
		if ep.GetFailureReason() != "" || ep.GetError() != "" {
			fmt.Fprintf(stdout, "reason: %s %s\n", ep.GetFailureReason(), ep.GetError())
		}
		if *output != "" {
			fmt.Fprintf(stdout, "results: %s\n", *output)
		}
	}
	if res.StorageErr != nil {
		return res.StorageErr
	}
	if ep.GetStatus() != rmv1.EpisodeStatus_EPISODE_STATUS_DONE {
		return ErrEpisodeNotDone
	}
	return nil
}

func safeID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, clip(s, 64))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func episodeJSON(ep *rmv1.Episode) map[string]any {
	m := map[string]any{
		"episode_id": ep.GetEpisodeId(), "task_id": ep.GetTaskId(), "domain": ep.GetDomain(), "env_mode": ep.GetEnvMode(),
		"status": strings.TrimPrefix(ep.GetStatus().String(), "EPISODE_STATUS_"), "score": ep.GetScore(),
		"num_steps": ep.GetNumSteps(), "final_answer": ep.GetFinalAnswer(), "failure_reason": ep.GetFailureReason(),
		"error": ep.GetError(), "model_versions": ep.GetModelVersions(),
	}
	if d := ep.GetEvaluatorDetailsJson(); d != "" {
		m["evaluator_details"] = json.RawMessage(d)
	}
	return m
}

// summarySink prints one line per step as it happens.
type summarySink struct {
	mu    sync.Mutex
	w     io.Writer
	quiet bool
}

func (s *summarySink) Record(_ context.Context, r agent.StepRecord) {
	if s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := r.Step
	if st.GetError() != "" {
		fmt.Fprintf(s.w, "step %d (retry %d): %s\n", st.GetIndex(), st.GetRetry(), clip(st.GetError(), 300))
		return
	}
	var parts []string
	for i, a := range r.Actions {
		desc := describe(a)
		if i < len(st.GetResults()) && !st.GetResults()[i].GetOk() {
			desc += " [error: " + clip(st.GetResults()[i].GetError(), 200) + "]"
		}
		parts = append(parts, desc)
	}
	fmt.Fprintf(s.w, "step %d: %s\n", st.GetIndex(), strings.Join(parts, "; "))
}

func describe(a action.Action) string {
	switch a.Type {
	case action.TypeCode:
		return "CODE " + clip(strings.ReplaceAll(a.Code, "\n", "\\n"), 160)
	case action.TypeTool:
		return "TOOL " + a.Tool.Name + " " + clip(a.Tool.Arguments, 160)
	case action.TypeDone:
		if a.Answer != "" {
			return "DONE " + clip(a.Answer, 160)
		}
	}
	if len(a.Params) == 0 {
		return a.Type
	}
	b, _ := json.Marshal(a.Params)
	return a.Type + " " + clip(string(b), 160)
}
