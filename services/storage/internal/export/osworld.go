package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"time"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// osworldTimeFormat is OSWorld's action_timestamp, strftime
// "%Y%m%d@%H%M%S".
const osworldTimeFormat = "20060102@150405"

// trajLine is one traj.jsonl line as OSWorld's lib_run_single writes it.
type trajLine struct {
	StepNum         int32          `json:"step_num"`
	ActionTimestamp string         `json:"action_timestamp"`
	Action          any            `json:"action"`
	Response        string         `json:"response"`
	Reward          float64        `json:"reward"`
	Done            bool           `json:"done"`
	Info            map[string]any `json:"info"`
	ScreenshotFile  string         `json:"screenshot_file"`
}

func (x *Exporter) writeOSWorld(ctx context.Context, req Request, sink Sink) error {
	perTask := map[string]int{}
	if err := x.episodes(ctx, req, func(ep *pb.Episode) error {
		perTask[osworldDir(ep, false)]++
		return nil
	}); err != nil {
		return err
	}
	// A task's only episode keeps <domain>/<task_id>. The others' names
	// (<task_id>-<episode_id>, or the episode id when there is no task) may
	// meet such a directory or each other (task "t-e3" and episode e3 of
	// task "t"), and a second episode in a directory would overwrite the
	// first's traj.jsonl and leave its result.txt: a name already taken
	// gets -2, -3... appended. An episode stored since the count (a
	// running rollout) is named as a group member.
	only := map[string]bool{}
	for dir, n := range perTask {
		if n == 1 {
			only[dir] = true
		}
	}
	used := map[string]bool{}
	return x.episodes(ctx, req, func(ep *pb.Episode) error {
		dir := osworldDir(ep, false)
		if perTask[dir] != 1 || used[dir] {
			dir = osworldDir(ep, true)
			for n, base := 2, dir; only[dir] || used[dir]; n++ {
				dir = fmt.Sprintf("%s-%d", base, n)
			}
		}
		used[dir] = true
		steps, err := x.src.Steps(ctx, ep.GetEpisodeId(), x.maxEpisodeBytes)
		if err != nil {
			return err
		}
		return x.writeOSWorldEpisode(ctx, sink, dir, ep, steps)
	})
}

func (x *Exporter) writeOSWorldEpisode(ctx context.Context, sink Sink, dir string, ep *pb.Episode, steps []*pb.Step) error {
	var traj bytes.Buffer
	enc := json.NewEncoder(&traj)
	enc.SetEscapeHTML(false)
	type shot struct{ name, sha string }
	var shots []shot
	for _, st := range steps {
		ts := stepTime(st, ep)
		name := ""
		if ss := st.GetObservation().GetScreenshot(); ss.GetSha256() != "" {
			// The screenshot the step's model call saw.
			name = fmt.Sprintf("step_%d_%s.png", st.GetIndex()+1, ts)
			shots = append(shots, shot{name: name, sha: ss.GetSha256()})
		}
		actions := st.GetActions()
		if len(actions) == 0 {
			actions = []*pb.Action{nil}
		}
		for i, a := range actions {
			info := map[string]any{}
			if i < len(st.GetResults()) {
				r := st.GetResults()[i]
				info["ok"] = r.GetOk()
				if r.GetError() != "" {
					info["error"] = r.GetError()
				}
				if r.GetOutput() != "" {
					info["output"] = r.GetOutput()
				}
			}
			if st.GetError() != "" {
				info["step_error"] = st.GetError()
			}
			if err := enc.Encode(trajLine{
				StepNum: st.GetIndex() + 1, ActionTimestamp: ts, Action: osworldAction(a),
				Response: st.GetModelCall().GetResponseText(), Reward: st.GetReward(), Done: st.GetDone(),
				Info: info, ScreenshotFile: name,
			}); err != nil {
				return fmt.Errorf("encode traj line: %w", err)
			}
		}
	}
	if ep.GetStatus() != pb.EpisodeStatus_EPISODE_STATUS_DONE {
		// OSWorld records a failed run as an Error line and no result.txt,
		// so its scripts treat the task as unfinished.
		msg := ep.GetFailureReason()
		if ep.GetError() != "" {
			msg += ": " + ep.GetError()
		}
		if err := enc.Encode(map[string]string{"Error": fmt.Sprintf("%s %s", ep.GetStatus(), msg)}); err != nil {
			return fmt.Errorf("encode traj line: %w", err)
		}
	}
	if err := writeFile(sink, path.Join(dir, "traj.jsonl"), traj.Bytes()); err != nil {
		return err
	}
	for _, s := range shots {
		if err := x.copyBlob(ctx, sink, path.Join(dir, s.name), s.sha); err != nil {
			return err
		}
	}
	if rec := ep.GetRecording(); rec.GetSha256() != "" {
		if err := x.copyBlob(ctx, sink, path.Join(dir, "recording.mp4"), rec.GetSha256()); err != nil {
			return err
		}
	}
	if ep.GetStatus() == pb.EpisodeStatus_EPISODE_STATUS_DONE {
		if err := writeFile(sink, path.Join(dir, "result.txt"), []byte(pythonFloat(ep.GetScore())+"\n")); err != nil {
			return err
		}
	}
	return nil
}

func stepTime(st *pb.Step, ep *pb.Episode) string {
	var t time.Time
	switch {
	case st.GetEndTime() != nil:
		t = st.GetEndTime().AsTime()
	case st.GetStartTime() != nil:
		t = st.GetStartTime().AsTime()
	case ep.GetStartTime() != nil:
		t = ep.GetStartTime().AsTime()
	default:
		t = time.Unix(0, 0)
	}
	return t.UTC().Format(osworldTimeFormat)
}

// osworldAction renders an action as OSWorld logs it: pyautogui code as a
// string, WAIT/FAIL/DONE as bare strings, computer_13 actions as a dict.
func osworldAction(a *pb.Action) any {
	if a == nil {
		return ""
	}
	switch a.GetActionType() {
	case "CODE":
		return a.GetCode()
	case "WAIT", "FAIL", "DONE":
		return a.GetActionType()
	case "TOOL":
		tc := a.GetToolCall()
		return map[string]any{"action_type": "TOOL", "name": tc.GetName(), "arguments": json.RawMessage(orEmptyObject(tc.GetArgumentsJson()))}
	}
	d := map[string]any{"action_type": a.GetActionType()}
	if p := a.GetParametersJson(); p != "" {
		d["parameters"] = json.RawMessage(orEmptyObject(p))
	}
	return d
}

func orEmptyObject(s string) string {
	if s == "" || !json.Valid([]byte(s)) {
		b, _ := json.Marshal(s)
		return string(b)
	}
	return s
}
