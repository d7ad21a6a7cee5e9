package ui

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/export"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// Page sizes.
const (
	rolloutsPerPage = 20
	episodesPerPage = 50
	stepsPerPage    = 50
	// maxPage bounds page numbers before they are clamped to the last
	// page, so arithmetic on them cannot overflow.
	maxPage = 1 << 30
)

var funcs = template.FuncMap{
	"pct": func(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" },
	"f2":  func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"f3":  func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"ts":  fmtTime,
	"dur": func(d *durationpb.Duration) string {
		if d == nil {
			return "-"
		}
		return d.AsDuration().Round(time.Millisecond).String()
	},
	"status": statusName,
	"join": func(v []int64) string {
		s := make([]string, len(v))
		for i, n := range v {
			s[i] = strconv.FormatInt(n, 10)
		}
		return strings.Join(s, ", ")
	},
	"add": func(a, b int) int { return a + b },
	"kb":  func(n int64) string { return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KB" },
}

func fmtTime(ts *timestamppb.Timestamp) string {
	if ts == nil || !ts.IsValid() || ts.AsTime().IsZero() {
		return "-"
	}
	return ts.AsTime().UTC().Format("2006-01-02 15:04:05")
}

func statusName(s pb.EpisodeStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "EPISODE_STATUS_"))
}

// parseStatus reads a status filter: "done", "failed"...
func parseStatus(s string) (pb.EpisodeStatus, bool) {
	if s == "" {
		return pb.EpisodeStatus_EPISODE_STATUS_UNSPECIFIED, true
	}
	v, ok := pb.EpisodeStatus_value["EPISODE_STATUS_"+strings.ToUpper(s)]
	return pb.EpisodeStatus(v), ok && v != 0
}

// pageNum reads ?page=, 1-based: missing or bad is 1, and a number past
// maxPage (even past an int) is maxPage, which the pager clamps to the last
// page.
func pageNum(r *http.Request) int {
	v := r.URL.Query().Get("page")
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > maxPage {
		return maxPage
	}
	return max(n, 1)
}

// pager is the page links of a numbered list.
type pager struct {
	Page, Pages int
	Total       int64
	Prev, Next  string
	First, Last string
}

func newPager(u *url.URL, page int, total int64, per int) pager {
	pages := int((total + int64(per) - 1) / int64(per))
	if pages < 1 {
		pages = 1
	}
	p := pager{Page: min(max(page, 1), pages), Pages: pages, Total: total}
	link := func(n int) string {
		q := u.Query()
		q.Set("page", strconv.Itoa(n))
		return u.Path + "?" + q.Encode()
	}
	if p.Page > 1 {
		p.Prev, p.First = link(p.Page-1), link(1)
	}
	if p.Page < pages {
		p.Next, p.Last = link(p.Page+1), link(pages)
	}
	return p
}

// ---- Rollouts ----

type rolloutRow struct {
	ID, Name, State     string
	Episodes, Finished  int64
	Progress            float64
	SuccessRate, Mean   float64
	Versions            []int64
	Start, End, Compare string
	Running             bool
}

type rolloutsPage struct {
	pageBase
	Rows  []rolloutRow
	All   []string
	Pager pager
}

func (h *Handler) rollouts(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	all, _, err := h.idx.Rollouts(ctx, nil, 0)
	if err != nil {
		h.fail(w, r, "rollout list", err)
		return
	}
	p := newPager(r.URL, pageNum(r), int64(len(all)), rolloutsPerPage)
	page := &rolloutsPage{pageBase: pageBase{Title: "Rollouts"}, Pager: p}
	for _, ro := range all {
		page.All = append(page.All, ro.ID)
	}
	lo := (p.Page - 1) * rolloutsPerPage
	shown := all[lo:min(lo+rolloutsPerPage, len(all))]
	var ids []string
	for _, ro := range shown {
		ids = append(ids, ro.ID)
	}
	byID := map[string]*pb.RolloutStats{}
	for _, id := range ids {
		st, err := h.rolloutStats(ctx, id)
		if err != nil {
			// Deleted since the list was read.
			continue
		}
		byID[id] = st.GetRollouts()[0]
	}
	for _, rec := range shown {
		ro := rec.ToProto()
		row := rolloutRow{ID: ro.GetRolloutId(), Name: ro.GetRolloutId(), Episodes: ro.GetEpisodes(),
			Start: fmtTime(ro.GetFirstStartTime()), End: fmtTime(ro.GetLastEndTime())}
		if s := byID[ro.GetRolloutId()]; s != nil {
			fillProgress(&row, s)
		}
		if row.Running {
			page.Live = 5
			row.End = "-"
		}
		page.Rows = append(page.Rows, row)
	}
	h.render(w, r, http.StatusOK, "rollouts", page)
}

// fillProgress derives state and progress from a rollout's statistics:
// storage knows the episodes stored so far, finished or not.
func fillProgress(row *rolloutRow, s *pb.RolloutStats) {
	o := s.GetOverall()
	row.SuccessRate, row.Mean = o.GetSuccessRate(), o.GetMeanScore()
	var open int64
	for st, n := range s.GetByStatus() {
		switch st {
		case "EPISODE_STATUS_RUNNING", "EPISODE_STATUS_QUEUED", "EPISODE_STATUS_UNSPECIFIED":
			open += n
		}
	}
	row.Finished = o.GetEpisodes() - open
	if o.GetEpisodes() > 0 {
		row.Progress = float64(row.Finished) / float64(o.GetEpisodes())
	}
	row.Running = open > 0
	row.State = "finished"
	if row.Running {
		row.State = "running"
	}
	for _, v := range s.GetByModelVersion() {
		if n, err := strconv.ParseInt(v.GetKey(), 10, 64); err == nil {
			row.Versions = append(row.Versions, n)
		}
	}
}

// ---- A rollout ----

type filterForm struct {
	Domain, Task, Status, Reason, Version, MinScore, MaxScore string
}

type episodeRow struct {
	ID, Task, Domain, Group, Status, Reason string
	Score                                   float64
	Steps                                   int32
	Versions                                []int64
	Start, Duration                         string
}

type groupMember struct {
	EpisodeID, Status string
	Score, Advantage  float64
	Scored            bool
}

type groupRow struct {
	ID, Task  string
	Mean, Std float64
	Members   []groupMember
}

type reasonRow struct {
	Reason, Href string
	Episodes     int64
}

type rolloutPage struct {
	pageBase
	ID        string
	Row       rolloutRow
	Stats     *pb.RolloutStats
	Reasons   []reasonRow
	Statuses  []string
	Filter    filterForm
	Filtered  bool
	Episodes  []episodeRow
	Groups    []groupRow
	Pager     pager
	Threshold float64
	Error     string
}

func (h *Handler) rollout(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if validate.ID("rollout_id", id) != nil {
		h.notFound(w, r, "No rollout with this id is stored.")
		return
	}
	st, err := h.rolloutStats(ctx, id)
	if err != nil {
		h.fail(w, r, "rollout", err)
		return
	}
	stats := st.GetRollouts()[0]
	page := &rolloutPage{pageBase: pageBase{Title: "Rollout " + id, Crumbs: []crumb{{"/ui/", "Rollouts"}}},
		ID: id, Stats: stats, Threshold: st.GetSuccessThreshold()}
	page.Row = rolloutRow{ID: id, Name: id, Episodes: stats.GetOverall().GetEpisodes()}
	fillProgress(&page.Row, stats)
	if page.Row.Running {
		page.Live = 5
	}
	for reason, n := range stats.GetFailureReasons() {
		q := url.Values{"reason": {reason}}
		page.Reasons = append(page.Reasons, reasonRow{Reason: reason, Episodes: n, Href: "/ui/rollouts/" + url.PathEscape(id) + "?" + q.Encode()})
	}
	sort.Slice(page.Reasons, func(i, j int) bool {
		if page.Reasons[i].Episodes != page.Reasons[j].Episodes {
			return page.Reasons[i].Episodes > page.Reasons[j].Episodes
		}
		return page.Reasons[i].Reason < page.Reasons[j].Reason
	})
	for s := range stats.GetByStatus() {
		page.Statuses = append(page.Statuses, statusName(pb.EpisodeStatus(pb.EpisodeStatus_value[s])))
	}
	slices.Sort(page.Statuses)

	f, form, msg := parseFilter(r.URL.Query())
	f.RolloutID = id
	page.Filter, page.Error = form, msg
	page.Filtered = form != (filterForm{})
	// Unfiltered, the statistics already counted the episodes.
	total := stats.GetOverall().GetEpisodes()
	if page.Filtered {
		if total, err = h.idx.CountEpisodes(ctx, f); err != nil {
			h.fail(w, r, "episode list", err)
			return
		}
	}
	page.Pager = newPager(r.URL, pageNum(r), total, episodesPerPage)
	cur, err := h.idx.CursorAt(ctx, f, int64(page.Pager.Page-1)*episodesPerPage)
	if err != nil {
		// Episodes deleted between the count and now: show the first page.
		cur = nil
	}
	eps, _, err := h.idx.ListEpisodes(ctx, f, cur, episodesPerPage)
	if err != nil {
		h.fail(w, r, "episode list", err)
		return
	}
	var groups []string
	seen := map[string]bool{}
	for _, ep := range eps {
		page.Episodes = append(page.Episodes, h.episodeRow(ep))
		if g := ep.GetGroupId(); g != "" && !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	members, err := h.idx.GroupMembers(ctx, id, groups)
	if err != nil {
		h.fail(w, r, "GRPO groups", err)
		return
	}
	page.Groups = grpoGroups(members)
	h.render(w, r, http.StatusOK, "rollout", page)
}

func (h *Handler) episodeRow(ep *pb.Episode) episodeRow {
	row := episodeRow{ID: ep.GetEpisodeId(), Task: ep.GetTaskId(), Domain: ep.GetDomain(), Group: ep.GetGroupId(),
		Status: statusName(ep.GetStatus()), Reason: ep.GetFailureReason(), Score: ep.GetScore(), Steps: ep.GetNumSteps(),
		Versions: ep.GetModelVersions(), Start: fmtTime(ep.GetStartTime()), Duration: "-"}
	if s := ep.GetStartTime(); s != nil && s.IsValid() {
		end := h.now()
		if e := ep.GetEndTime(); e != nil && e.IsValid() && !e.AsTime().IsZero() {
			end = e.AsTime()
		}
		if d := end.Sub(s.AsTime()); d >= 0 {
			row.Duration = d.Round(time.Second).String()
		}
	}
	return row
}

// parseFilter reads the episode filter of a rollout page. A value that
// does not parse is dropped and named in the message.
func parseFilter(q url.Values) (index.Filter, filterForm, string) {
	var f index.Filter
	var form filterForm
	var bad []string
	if v := q.Get("domain"); v != "" {
		if validate.ID("domain", v) == nil {
			f.Domain, form.Domain = v, v
		} else {
			bad = append(bad, "domain")
		}
	}
	if v := q.Get("task"); v != "" {
		if validate.ID("task", v) == nil {
			f.TaskID, form.Task = v, v
		} else {
			bad = append(bad, "task")
		}
	}
	if v := q.Get("status"); v != "" {
		if s, ok := parseStatus(v); ok {
			f.Status, form.Status = s, v
		} else {
			bad = append(bad, "status")
		}
	}
	if v := q.Get("reason"); v != "" {
		if len(v) <= 1024 {
			f.FailureReason, form.Reason = v, v
		} else {
			bad = append(bad, "reason")
		}
	}
	if v := q.Get("version"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			f.ModelVersion, form.Version = &n, v
		} else {
			bad = append(bad, "version")
		}
	}
	for _, s := range []struct {
		name string
		dst  **float64
		form *string
	}{{"min", &f.MinScore, &form.MinScore}, {"max", &f.MaxScore, &form.MaxScore}} {
		if v := q.Get(s.name); v != "" {
			if n, err := strconv.ParseFloat(v, 64); err == nil && !math.IsNaN(n) && !math.IsInf(n, 0) {
				*s.dst, *s.form = &n, v
			} else {
				bad = append(bad, s.name+" score")
			}
		}
	}
	msg := ""
	if len(bad) > 0 {
		msg = "Ignored filter values that do not parse: " + strings.Join(bad, ", ") + "."
	}
	return f, form, msg
}

// grpoGroups computes each group's mean and standard deviation over its
// DONE episodes and each member's advantage (r - mean) / (std + 1e-6),
// GRPO's normalisation; unfinished members have none.
func grpoGroups(members []index.GroupMember) []groupRow {
	var out []groupRow
	for i := 0; i < len(members); {
		j := i
		for j < len(members) && members[j].GroupID == members[i].GroupID {
			j++
		}
		g := groupRow{ID: members[i].GroupID, Task: members[i].TaskID}
		var sum, sq float64
		var n int
		for _, m := range members[i:j] {
			if m.Status == pb.EpisodeStatus_EPISODE_STATUS_DONE {
				sum += m.Score
				n++
			}
		}
		if n > 0 {
			g.Mean = sum / float64(n)
			for _, m := range members[i:j] {
				if m.Status == pb.EpisodeStatus_EPISODE_STATUS_DONE {
					sq += (m.Score - g.Mean) * (m.Score - g.Mean)
				}
			}
			g.Std = math.Sqrt(sq / float64(n))
		}
		for _, m := range members[i:j] {
			gm := groupMember{EpisodeID: m.EpisodeID, Status: statusName(m.Status), Score: m.Score}
			if m.Status == pb.EpisodeStatus_EPISODE_STATUS_DONE {
				gm.Scored = true
				gm.Advantage = (m.Score - g.Mean) / (g.Std + 1e-6)
			}
			g.Members = append(g.Members, gm)
		}
		out = append(out, g)
		i = j
	}
	return out
}

// ---- An episode ----

type actionView struct {
	Type, Params, Code, Tool string
}

type resultView struct {
	OK            bool
	Error, Output string
}

type stepView struct {
	Index                     int32
	Shot                      string // screenshot sha256
	Scale                     int
	Markers                   []Marker
	Response, Thought         string
	Actions                   []actionView
	Results                   []resultView
	Error                     string
	Reward                    float64
	Done                      bool
	Latency, TTFT             string
	PromptTokens, Completion  int32
	ModelVersion              int64
	Model, Backend, Finish    string
	Tree                      string // accessibility tree sha256
	TreeBytes                 int64
	Terminal, TextObservation string
	Start                     string
	Retry                     int32
}

type episodePage struct {
	pageBase
	Ep         *pb.Episode
	Row        episodeRow
	Steps      []stepView
	Pager      pager
	FirstIndex int
	Evaluator  string
	// Notes are the evaluator's notes on its scores, each after its
	// metric's name: why a score is 0 when the file did not open.
	Notes      []string
	Labels     [][2]string
	Recording  string
	RolloutURL string
}

func (h *Handler) episode(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if validate.ID("episode_id", id) != nil {
		h.notFound(w, r, "No episode with this id is stored.")
		return
	}
	resp, err := h.reads.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: id})
	if err != nil {
		h.fail(w, r, "episode", err)
		return
	}
	ep := resp.GetEpisode()
	rolloutURL := "/ui/rollouts/" + url.PathEscape(ep.GetRolloutId())
	page := &episodePage{pageBase: pageBase{Title: "Episode " + id,
		Crumbs: []crumb{{"/ui/", "Rollouts"}, {rolloutURL, ep.GetRolloutId()}}},
		Ep: ep, Row: h.episodeRow(ep), RolloutURL: rolloutURL}
	if ep.GetStatus() == pb.EpisodeStatus_EPISODE_STATUS_RUNNING {
		page.Live = 5
	}
	page.Pager = newPager(r.URL, pageNum(r), int64(ep.GetNumSteps()), stepsPerPage)
	// Step indexes may have gaps: the page starts at its first step's
	// index, not at an index computed from the page number.
	var steps []*pb.Step
	if from, err := h.idx.StepIndexAt(ctx, id, int64(page.Pager.Page-1)*stepsPerPage); err == nil {
		page.FirstIndex = from
		if steps, err = h.idx.StepRange(ctx, id, from, stepsPerPage); err != nil {
			h.fail(w, r, "steps", err)
			return
		}
	} else if !errors.Is(err, index.ErrNotFound) {
		h.fail(w, r, "steps", err)
		return
	}
	for _, st := range steps {
		page.Steps = append(page.Steps, stepOf(st))
	}
	if d := ep.GetEvaluatorDetailsJson(); d != "" {
		page.Evaluator = prettyJSON(d)
		page.Notes = evaluatorNotes(d)
	}
	for k, v := range ep.GetLabels() {
		page.Labels = append(page.Labels, [2]string{k, v})
	}
	sort.Slice(page.Labels, func(i, j int) bool { return page.Labels[i][0] < page.Labels[j][0] })
	if rec := ep.GetRecording(); rec.GetSha256() != "" {
		page.Recording = rec.GetSha256()
	}
	h.render(w, r, http.StatusOK, "episode", page)
}

// evaluatorNotes reads the notes an OSWorld evaluation keeps beside its
// scores (details "notes", one list per metric run, in the order of
// "func"), each after its metric's name; none for details of another
// shape.
func evaluatorNotes(details string) []string {
	var d struct {
		Func  []string   `json:"func"`
		Notes [][]string `json:"notes"`
	}
	if json.Unmarshal([]byte(details), &d) != nil {
		return nil
	}
	var out []string
	for i, notes := range d.Notes {
		for _, n := range notes {
			if i < len(d.Func) {
				n = d.Func[i] + ": " + n
			}
			out = append(out, n)
		}
	}
	return out
}

func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

func stepOf(st *pb.Step) stepView {
	mc := st.GetModelCall()
	v := stepView{Index: st.GetIndex(), Shot: st.GetObservation().GetScreenshot().GetSha256(), Scale: 2,
		Markers: markers(st.GetActions()), Response: mc.GetResponseText(), Error: st.GetError(), Reward: st.GetReward(),
		Done: st.GetDone(), Latency: "-", TTFT: "-", PromptTokens: mc.GetUsage().GetPromptTokens(),
		Completion: mc.GetUsage().GetCompletionTokens(), ModelVersion: mc.GetModelVersion(), Model: mc.GetModel(),
		Backend: mc.GetBackend(), Finish: mc.GetFinishReason(), Terminal: st.GetObservation().GetTerminal(),
		TextObservation: st.GetObservation().GetText(), Start: fmtTime(st.GetStartTime()), Retry: st.GetRetry()}
	if v.PromptTokens == 0 && v.Completion == 0 {
		v.PromptTokens, v.Completion = int32(len(mc.GetPromptTokenIds())), int32(len(mc.GetCompletionTokenIds()))
	}
	if l := mc.GetLatency(); l != nil {
		v.Latency = l.AsDuration().Round(time.Millisecond).String()
	}
	if l := mc.GetTimeToFirstToken(); l != nil {
		v.TTFT = l.AsDuration().Round(time.Millisecond).String()
	}
	if t := st.GetObservation().GetAccessibilityTree(); t.GetSha256() != "" {
		v.Tree, v.TreeBytes = t.GetSha256(), t.GetSize()
	}
	for _, m := range mc.GetNewMessages() {
		if m.GetRole() == "assistant" && m.GetReasoning() != "" {
			v.Thought = m.GetReasoning()
		}
	}
	for _, a := range st.GetActions() {
		av := actionView{Type: a.GetActionType(), Params: a.GetParametersJson(), Code: a.GetCode()}
		if tc := a.GetToolCall(); tc != nil {
			av.Tool = tc.GetName() + "(" + tc.GetArgumentsJson() + ")"
		}
		v.Actions = append(v.Actions, av)
	}
	for _, res := range st.GetResults() {
		v.Results = append(v.Results, resultView{OK: res.GetOk(), Error: res.GetError(), Output: res.GetOutput()})
	}
	return v
}

// stepJSON serves one stored step as protobuf JSON (blob data is never
// in a stored step: screenshots are references).
func (h *Handler) stepJSON(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	name, ok := strings.CutSuffix(r.PathValue("file"), ".json")
	n, err := strconv.Atoi(name)
	if !ok || err != nil || n < 0 || validate.ID("episode_id", id) != nil {
		h.notFound(w, r, "No such step.")
		return
	}
	steps, err := h.idx.StepRange(r.Context(), id, n, 1)
	if err != nil {
		h.fail(w, r, "step", err)
		return
	}
	if len(steps) == 0 || steps[0].GetIndex() != int32(n) {
		h.notFound(w, r, "No such step.")
		return
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(steps[0])
	if err != nil {
		h.fail(w, r, "step", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`inline; filename="%s-step-%d.json"`, id, n))
	_, _ = w.Write(b)
}

// oneEpisode is an export source that yields a single episode, so the
// rollout exporter writes that episode's OSWorld folder.
type oneEpisode struct {
	ep  *pb.Episode
	idx Index
}

func (o oneEpisode) ListEpisodes(context.Context, index.Filter, *index.Cursor, int) ([]*pb.Episode, *index.Cursor, error) {
	return []*pb.Episode{o.ep}, nil, nil
}

// Steps reads every step, bounded by bytes as the rollout export is.
func (o oneEpisode) Steps(ctx context.Context, episodeID string, maxBytes int64) ([]*pb.Step, error) {
	return o.idx.Steps(ctx, episodeID, maxBytes)
}

type blobsByHash struct{ reads Reads }

func (b blobsByHash) Read(ctx context.Context, sha string) ([]byte, error) {
	_, data, err := b.reads.ReadBlob(ctx, sha)
	return data, err
}

// tarSink writes exported files into a tar stream. Each file is held
// until it is closed (a tar header needs its size); the largest is a
// recording.
type tarSink struct {
	tw  *tar.Writer
	now time.Time
}

type tarFile struct {
	s    *tarSink
	name string
	buf  bytes.Buffer
}

func (s *tarSink) Create(path string) (io.WriteCloser, error) { return &tarFile{s: s, name: path}, nil }

func (f *tarFile) Write(p []byte) (int, error) { return f.buf.Write(p) }

func (f *tarFile) Close() error {
	if err := f.s.tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(f.buf.Len()), ModTime: f.s.now}); err != nil {
		return err
	}
	_, err := f.s.tw.Write(f.buf.Bytes())
	return err
}

// osworld serves the episode's OSWorld results folder as a tar.
func (h *Handler) osworld(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	resp, err := h.reads.GetEpisode(ctx, &pb.GetEpisodeRequest{EpisodeId: id})
	if err != nil {
		h.fail(w, r, "episode", err)
		return
	}
	out := &download{w: w, filename: id + "-osworld.tar"}
	tw := tar.NewWriter(out)
	x := export.New(oneEpisode{ep: resp.GetEpisode(), idx: h.idx}, blobsByHash{h.reads})
	if err := x.Write(ctx, export.Request{RolloutID: resp.GetEpisode().GetRolloutId(), Format: pb.ExportFormat_EXPORT_FORMAT_OSWORLD},
		&tarSink{tw: tw, now: h.now()}); err != nil {
		if !out.started {
			h.fail(w, r, "OSWorld folder", err)
			return
		}
		// The first files are sent: ending the response normally would
		// hand the client a well-formed tar without the rest. Aborting
		// it breaks the download, so the failure shows.
		h.log.Warn("viewer OSWorld download failed", zap.String("episode_id", id), zap.Error(err))
		panic(http.ErrAbortHandler)
	}
	if err := tw.Close(); err != nil {
		h.log.Warn("viewer OSWorld download failed", zap.String("episode_id", id), zap.Error(err))
		panic(http.ErrAbortHandler)
	}
}

// download is a file download's response: its headers go with its first
// bytes, so a failure before them is still an error page.
type download struct {
	w        http.ResponseWriter
	filename string
	started  bool
}

func (d *download) Write(p []byte) (int, error) {
	if !d.started {
		d.started = true
		d.w.Header().Set("Content-Type", "application/x-tar")
		d.w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, d.filename))
	}
	return d.w.Write(p)
}

// ---- Compare ----

// diffsPerPage is the changed tasks a compare page shows.
const diffsPerPage = 50

// compareSide is one rollout's side of a changed task: its mean score and
// the episode the row links to.
type compareSide struct {
	// Score is the mean over the task's finished episodes, "-" when none
	// finished.
	Score string
	// Episode is the linked episode ("" when none finished); Pick says
	// how it was chosen when the task has several ("at or above the mean"
	// or "at or below the mean").
	Episode, Href, Pick string
	// Scored is the task's finished episodes in the rollout, Unscored the
	// others (failed, running).
	Scored, Unscored int64
	// ListHref lists the task's episodes in the rollout.
	ListHref string
}

type compareRow struct {
	Domain, Task string
	Base, Other  compareSide
	Delta        float64
	Better       bool
}

type comparePage struct {
	pageBase
	Base, Other                 string
	Rows                        []compareRow
	Common, Improved, Regressed int32
	Pager                       pager
	Rollouts                    []string
	Chosen                      bool
}

func (h *Handler) compare(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	page := &comparePage{pageBase: pageBase{Title: "Compare rollouts", Crumbs: []crumb{{"/ui/", "Rollouts"}}},
		Base: q.Get("base"), Other: q.Get("other")}
	if page.Base == "" || page.Other == "" {
		list, _, err := h.idx.Rollouts(ctx, nil, 0)
		if err != nil {
			h.fail(w, r, "rollout list", err)
			return
		}
		for _, ro := range list {
			page.Rollouts = append(page.Rollouts, ro.ID)
		}
		h.render(w, r, http.StatusOK, "compare", page)
		return
	}
	page.Chosen = true
	resp, err := h.reads.CompareRollouts(ctx, &pb.CompareRolloutsRequest{BaseRolloutId: page.Base, OtherRolloutId: page.Other})
	if err != nil {
		h.fail(w, r, "rollout", err)
		return
	}
	page.Common, page.Improved, page.Regressed = resp.GetCommonTasks(), resp.GetImproved(), resp.GetRegressed()
	diffs := resp.GetDiffs()
	page.Pager = newPager(r.URL, pageNum(r), int64(len(diffs)), diffsPerPage)
	lo := (page.Pager.Page - 1) * diffsPerPage
	for _, d := range diffs[lo:min(lo+diffsPerPage, len(diffs))] {
		row := compareRow{Domain: d.GetDomain(), Task: d.GetTaskId(), Delta: d.GetOtherReward() - d.GetBaseReward()}
		row.Better = row.Delta > 0
		// Each side links to an episode that shows the change: the side
		// that scored better to one of its episodes at or above its mean,
		// the other to one at or below.
		if row.Base, err = h.compareSide(ctx, page.Base, d, d.BaseReward, !row.Better); err == nil {
			row.Other, err = h.compareSide(ctx, page.Other, d, d.OtherReward, row.Better)
		}
		if err != nil {
			h.fail(w, r, "episode list", err)
			return
		}
		page.Rows = append(page.Rows, row)
	}
	h.render(w, r, http.StatusOK, "compare", page)
}

// compareSide finds the episode of d's task in rollout that a compare row
// links to: the first finished one scoring at or above mean when high,
// else at or below it (one always exists; rounding of the mean aside, when
// the first finished one is taken).
func (h *Handler) compareSide(ctx context.Context, rollout string, d *pb.TaskDiff, mean *float64, high bool) (compareSide, error) {
	f := index.Filter{RolloutID: rollout, TaskID: d.GetTaskId(), Domain: d.GetDomain()}
	tq := url.Values{"task": {d.GetTaskId()}}
	if d.GetDomain() != "" {
		tq.Set("domain", d.GetDomain())
	}
	side := compareSide{Score: "-", ListHref: "/ui/rollouts/" + url.PathEscape(rollout) + "?" + tq.Encode()}
	all, err := h.idx.CountEpisodes(ctx, f)
	if err != nil {
		return side, err
	}
	if mean == nil {
		side.Unscored = all
		return side, nil
	}
	side.Score = strconv.FormatFloat(*mean, 'f', 3, 64)
	f.Status = pb.EpisodeStatus_EPISODE_STATUS_DONE
	if side.Scored, err = h.idx.CountEpisodes(ctx, f); err != nil {
		return side, err
	}
	side.Unscored = all - side.Scored
	picked := f
	if high {
		picked.MinScore, side.Pick = mean, "at or above the mean"
	} else {
		picked.MaxScore, side.Pick = mean, "at or below the mean"
	}
	eps, _, err := h.idx.ListEpisodes(ctx, picked, nil, 1)
	if err == nil && len(eps) == 0 {
		eps, _, err = h.idx.ListEpisodes(ctx, f, nil, 1)
	}
	if err != nil {
		return side, err
	}
	if len(eps) == 1 {
		side.Episode = eps[0].GetEpisodeId()
		side.Href = "/ui/episodes/" + url.PathEscape(side.Episode)
	}
	if side.Scored < 2 {
		side.Pick = ""
	}
	return side, nil
}

// ---- Blobs ----

// blob serves a stored blob: images (and their thumbnails with ?scale=2
// or 4) and recordings as themselves, anything else (accessibility trees)
// as plain text, so stored markup never runs in the viewer's origin.
func (h *Handler) blob(w http.ResponseWriter, r *http.Request) {
	sha := r.PathValue("sha")
	if validate.SHA256("sha256", sha) != nil {
		h.notFound(w, r, "No such blob.")
		return
	}
	etag := `"` + sha + `"`
	scale := 1
	if s := r.URL.Query().Get("scale"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || !thumbScales[n] {
			http.Error(w, "scale: want 2 or 4", http.StatusBadRequest)
			return
		}
		scale = n
		etag = `"` + sha + "-" + s + `"`
	}
	// Content-addressed: the bytes under a hash never change.
	w.Header().Set("Cache-Control", "private, max-age=31536000, immutable")
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if scale > 1 {
		key := sha + "/" + strconv.Itoa(scale)
		data, ok := h.thumbs.get(key)
		if ok {
			h.thumbsServed.WithLabelValues("cache").Inc()
		} else {
			v, err := h.shared(r.Context(), "thumb/"+key, func(ctx context.Context) (any, error) {
				_, orig, err := h.reads.ReadBlob(ctx, sha)
				if err != nil {
					return nil, err
				}
				var t []byte
				if err := h.decodes.do(ctx, func() (err error) {
					t, err = makeThumb(orig, scale)
					return err
				}); err != nil {
					return nil, err
				}
				h.thumbs.put(key, t)
				return t, nil
			})
			if err != nil {
				h.blobError(w, r, err)
				return
			}
			data = v.([]byte)
			h.thumbsServed.WithLabelValues("made").Inc()
		}
		w.Header().Set("Content-Type", "image/jpeg")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		return
	}
	mt, data, err := h.reads.ReadBlob(r.Context(), sha)
	if err != nil {
		h.blobError(w, r, err)
		return
	}
	switch mt {
	case "image/png", "image/jpeg", "image/webp", "video/mp4", "video/webm":
	default:
		mt = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", mt)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func (h *Handler) blobError(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Del("Cache-Control")
	w.Header().Del("ETag")
	if errors.Is(err, errNotImage) {
		http.Error(w, "not an image that can be shrunk", http.StatusUnprocessableEntity)
		return
	}
	h.fail(w, r, "blob", err)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
