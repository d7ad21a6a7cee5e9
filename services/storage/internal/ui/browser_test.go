package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/storage"
)

// Screenshot size of the test episodes; the click of step 0 is at
// (clickX, clickY) in these pixels.
const (
	shotW, shotH   = 640, 400
	clickX, clickY = 300, 200
	longSteps      = 60 // more than one page of steps (50)
)

// viewer is a real storage service (gRPC for the writes, its HTTP handler
// for the viewer) on loopback.
type viewer struct {
	client pb.StorageClient
	url    string
	logs   *observer.ObservedLogs
	// dataDir holds the service's index.db and blobs; reg its metrics.
	dataDir string
	reg     *prometheus.Registry
}

func startViewer(t *testing.T, token string) *viewer {
	t.Helper()
	env := daemontest.Env(t)
	core, logs := observer.New(zapcore.DebugLevel)
	env.Logger = zap.New(core)
	env.AuthToken = token
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := storage.New(ctx, storage.Config{}, env)
	if err != nil {
		t.Fatalf("storage.New: %v", err)
	}
	addr := daemontest.Serve(t, env, svc)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hs := httptest.NewServer(svc.HTTPHandler())
	t.Cleanup(hs.Close)
	return &viewer{client: pb.NewStorageClient(conn), url: hs.URL, logs: logs, dataDir: env.DataDir, reg: env.Registry}
}

// screenshot draws a PNG with a distinct background per n and a dark
// cross-hair at the click point, so screenshots differ and the page
// screenshot shows where the marker should be.
func screenshot(t *testing.T, n int) []byte {
	t.Helper()
	// Drawn once per n: a fill stores 60-odd of them, and drawing pixel by
	// pixel under the race detector costs seconds on a loaded machine.
	if b, ok := screenshots.Load(n); ok {
		return b.([]byte)
	}
	img := image.NewRGBA(image.Rect(0, 0, shotW, shotH))
	bg := color.RGBA{R: uint8(200 + n%50), G: uint8(220 - n%40), B: 240, A: 255}
	for y := range shotH {
		for x := range shotW {
			img.Set(x, y, bg)
		}
	}
	for i := -20; i <= 20; i++ {
		img.Set(clickX+i, clickY, color.Black)
		img.Set(clickX, clickY+i, color.Black)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	screenshots.Store(n, buf.Bytes())
	return buf.Bytes()
}

var screenshots sync.Map // int -> PNG bytes

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

type epSpec struct {
	rollout, id, group, task, domain string
	status                           pb.EpisodeStatus
	score                            float64
	reason                           string
	steps                            int
	response                         string // of step 0
	start                            int
}

// write stores episodes through the real AppendSteps API, each on its own
// stream, with real PNG screenshots.
func (v *viewer) write(t *testing.T, specs ...epSpec) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range specs {
		stream, err := v.client.AppendSteps(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := t0.Add(time.Duration(s.start) * time.Minute)
		ep := &pb.Episode{EpisodeId: s.id, RolloutId: s.rollout, GroupId: s.group, TaskId: s.task, Domain: s.domain,
			Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING, Attempt: 1, StartTime: timestamppb.New(start),
			Instruction: "Open the settings of " + s.task + " & save <them>", EnvMode: "desktop"}
		send := func(m *pb.AppendStepsRequest) {
			if err := stream.Send(m); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}})
		for i := range s.steps {
			st := &pb.Step{EpisodeId: s.id, Index: int32(i),
				Observation: &pb.Observation{Screenshot: &pb.BlobRef{Data: screenshot(t, i%7), MediaType: "image/png"}},
				ModelCall: &pb.ModelCall{ResponseText: fmt.Sprintf("step %d: I will act", i), ModelVersion: 3, Model: "fake-model",
					Latency: durationpb.New(420 * time.Millisecond), Usage: &pb.Usage{PromptTokens: 1200, CompletionTokens: 30}},
				Results:   []*pb.ActionResult{{Ok: true}},
				StartTime: timestamppb.New(start.Add(time.Duration(i) * time.Second)),
			}
			switch i {
			case 0:
				st.Actions = []*pb.Action{{ActionType: "CODE", Code: fmt.Sprintf("import pyautogui\npyautogui.click(%d, %d)", clickX, clickY)}}
				if s.response != "" {
					st.ModelCall.ResponseText = s.response
				}
				st.Observation.AccessibilityTree = &pb.BlobRef{Data: []byte(`<desktop><button name="OK"/><script>alert(1)</script></desktop>`), MediaType: "application/xml"}
			case 1:
				st.Actions = []*pb.Action{{ActionType: "CODE", Code: "pyautogui.moveTo(100, 100)\npyautogui.dragTo(400, 300, duration=0.5)"}}
			case 2:
				st.Actions = []*pb.Action{{ActionType: "TYPING", ParametersJson: `{"text":"hello world"}`}}
				st.Results = []*pb.ActionResult{{Ok: false, Error: "the window went away"}}
			default:
				st.Actions = []*pb.Action{{ActionType: "CLICK", ParametersJson: fmt.Sprintf(`{"x":%d,"y":%d}`, 20+i, 30+i)}}
			}
			st.Done = i == s.steps-1
			send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Step{Step: st}})
		}
		if s.status != pb.EpisodeStatus_EPISODE_STATUS_RUNNING {
			ep.Status, ep.Score, ep.FailureReason = s.status, s.score, s.reason
			ep.EndTime = timestamppb.New(start.Add(2 * time.Minute))
			ep.EvaluatorDetailsJson = fmt.Sprintf(`{"func":["exact_match"],"scores":[%v],"getter":"vm_file","notes":[["a <note> on the score"]]}`, s.score)
			send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}})
		}
		if _, err := stream.CloseAndRecv(); err != nil {
			t.Fatalf("append %s: %v", s.id, err)
		}
	}
}

const (
	done   = pb.EpisodeStatus_EPISODE_STATUS_DONE
	failed = pb.EpisodeStatus_EPISODE_STATUS_FAILED
)

const xss = `<script>window.__xss = 1</script><img src=x onerror="window.__xss=2">`

func fill(t *testing.T, v *viewer) {
	v.write(t,
		epSpec{"r-base", "ep-long", "g-long", "t-click", "os", done, 1, "", longSteps, "", 0},
		epSpec{"r-base", "ep-fail", "g-fail", "t-fail", "chrome", failed, 0, "env_error", 1, "", 1},
		epSpec{"r-base", "ep-xss", "g-xss", "t-xss", "os", done, 0, "", 1, xss, 2},
		epSpec{"r-base", "ep-g1", "g-grpo", "t-grpo", "os", done, 1, "", 1, "", 3},
		epSpec{"r-base", "ep-g2", "g-grpo", "t-grpo", "os", done, 0, "", 1, "", 4},
		epSpec{"r-new", "ep-new-click", "g-n1", "t-click", "os", done, 0, "", 1, "", 10},
		epSpec{"r-new", "ep-new-xss", "g-n2", "t-xss", "os", done, 1, "", 1, "", 11},
		epSpec{"r-new", "ep-new-fail", "g-n3", "t-fail", "chrome", failed, 0, "env_error", 1, "", 12},
	)
}

// browser starts Debian's headless chromium; missing, the test skips on a
// developer machine and fails under CI.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is missing; the viewer's browser tests need it (apt-get install chromium)")
		}
		t.Skip("chromium is missing: apt-get install chromium to run the viewer's browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1300), chromedp.Flag("disable-gpu", true), chromedp.Flag("hide-scrollbars", true))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(tcancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// artifacts is where page screenshots go: $ROLLOUTMESH_VIEWER_ARTIFACTS,
// else a directory kept in the test's temporary space.
func artifacts(t *testing.T) string {
	dir := os.Getenv("ROLLOUTMESH_VIEWER_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docsImages are the page screenshots docs/viewer.md shows; with
// ROLLOUTMESH_UPDATE_DOCS_IMAGES set the test copies them to docs/images.
var docsImages = map[string]bool{"viewer-rollouts": true, "viewer-rollout": true, "viewer-episode": true, "viewer-compare": true}

// shoot saves a PNG of the whole page, or of the window only when the
// page is long (an episode of 50 steps).
func shoot(t *testing.T, ctx context.Context, dir, name string) string {
	t.Helper()
	action := chromedp.FullScreenshot(100)
	if strings.HasPrefix(name, "viewer-episode") {
		action = chromedp.CaptureScreenshot()
	}
	buf, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("page screenshot: %s", p)
	if docsImages[name] && os.Getenv("ROLLOUTMESH_UPDATE_DOCS_IMAGES") != "" {
		// The user docs show what the test saw.
		copyFile(t, p, filepath.Join("..", "..", "..", "..", "docs", "images", name+".png"))
	}
	return p
}

func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func navigate(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("navigate %s: %v", u, err)
	}
}

func TestViewerInBrowser(t *testing.T) {
	ctx := browser(t)
	bctx := ctx
	v := startViewer(t, "")
	fill(t, v)
	dir := artifacts(t)

	t.Run("rollouts", func(t *testing.T) {
		navigate(t, ctx, v.url+"/ui/")
		if got := count(t, ctx, "tr.rollout-row"); got != 2 {
			t.Errorf("rollout rows = %d, want 2", got)
		}
		if got := text(t, ctx, `tr[data-rollout="r-base"]`); !strings.Contains(got, "finished") || !strings.Contains(got, "5/5") {
			t.Errorf("r-base row = %q, want finished and 5/5", got)
		}
		shoot(t, ctx, dir, "viewer-rollouts")
	})

	t.Run("rollout filter narrows the list", func(t *testing.T) {
		navigate(t, ctx, v.url+"/ui/rollouts/r-base")
		if got := count(t, ctx, "tr.episode-row"); got != 5 {
			t.Errorf("episode rows = %d, want 5", got)
		}
		if got := text(t, ctx, "#reasons"); !strings.Contains(got, "env_error") {
			t.Errorf("failure reasons = %q, want env_error", got)
		}
		if got := count(t, ctx, "tr.group-row"); got != 4 {
			t.Errorf("GRPO group rows = %d, want 4 (g-grpo holds two episodes)", got)
		}
		// The group of two: rewards 1 and 0, advantages ±1.
		if got := text(t, ctx, "#groups"); !strings.Contains(got, "1.00 (1.00)") || !strings.Contains(got, "0.00 (-1.00)") {
			t.Errorf("groups = %q, want rewards with advantages 1.00 and -1.00", got)
		}
		shoot(t, ctx, dir, "viewer-rollout")
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#filters select[name="domain"]`), "chrome"),
			chromedp.Submit(chromedp.CSS(`#filters`)),
		); err != nil {
			t.Fatal(err)
		}
		// Submit navigates; wait for the filtered page.
		waitFor(t, ctx, `location.search.includes("domain=chrome") && document.readyState === "complete"`)
		if got := count(t, ctx, "tr.episode-row"); got != 1 {
			t.Errorf("episode rows with domain=chrome = %d, want 1", got)
		}
		if got := text(t, ctx, "#episodes tbody"); !strings.Contains(got, "ep-fail") {
			t.Errorf("filtered list = %q, want ep-fail", got)
		}
		navigate(t, ctx, v.url+"/ui/rollouts/r-base?reason=env_error&status=failed")
		if got := count(t, ctx, "tr.episode-row"); got != 1 {
			t.Errorf("episode rows with reason=env_error = %d, want 1", got)
		}
		navigate(t, ctx, v.url+"/ui/rollouts/r-base?min=0.5")
		if got := count(t, ctx, "tr.episode-row"); got != 2 {
			t.Errorf("episode rows with score >= 0.5 = %d, want 2", got)
		}
		navigate(t, ctx, v.url+"/ui/rollouts/r-base?page=99999999999999999999999")
		if got := text(t, ctx, ".pageinfo"); !strings.HasPrefix(got, "page 1 of 1") {
			t.Errorf("huge page number: pager = %q, want page 1 of 1", got)
		}
		if got := count(t, ctx, "tr.episode-row"); got != 5 {
			t.Errorf("huge page number: rows = %d, want the 5 of the last page", got)
		}
	})

	t.Run("episode", func(t *testing.T) {
		navigate(t, ctx, v.url+"/ui/episodes/ep-long")
		if got := count(t, ctx, "section.step"); got != 50 {
			t.Errorf("steps on page 1 = %d, want 50", got)
		}
		if got := text(t, ctx, "#num-steps"); got != fmt.Sprint(longSteps) {
			t.Errorf("step count = %q, want %d", got, longSteps)
		}
		waitFor(t, ctx, `document.querySelector("#step-0 figure.shot").classList.contains("fitted")`)
		// The click marker's centre sits on pixel (clickX, clickY) of the
		// screenshot as displayed.
		type rects struct{ IX, IY, IW, IH, CX, CY float64 }
		r, err := chromedp.Run(ctx, chromedp.Evaluate[rects](`(() => {
			const img = document.querySelector("#step-0 img").getBoundingClientRect();
			const c = document.querySelector("#step-0 circle.marker.click").getBoundingClientRect();
			return {IX: img.left, IY: img.top, IW: img.width, IH: img.height, CX: c.left + c.width/2, CY: c.top + c.height/2};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		wantX, wantY := r.IX+clickX*r.IW/shotW, r.IY+clickY*r.IH/shotH
		if math.Abs(r.CX-wantX) > 2 || math.Abs(r.CY-wantY) > 2 {
			t.Errorf("click marker centre at (%.1f, %.1f), want (%.1f, %.1f) (image at %.1f,%.1f size %.1fx%.1f)",
				r.CX, r.CY, wantX, wantY, r.IX, r.IY, r.IW, r.IH)
		}
		if got := count(t, ctx, "#step-1 line.marker.drag"); got != 1 {
			t.Errorf("drag arrows on step 1 = %d, want 1", got)
		}
		if got := text(t, ctx, "#step-2 text.marker-label"); got != "hello world" {
			t.Errorf("typed text on step 2 = %q, want hello world", got)
		}
		if got := text(t, ctx, "#evaluator"); !strings.Contains(got, `"getter": "vm_file"`) {
			t.Errorf("evaluator = %q, want the getter", got)
		}
		if got := text(t, ctx, "#evaluator-notes"); got != "exact_match: a <note> on the score" {
			t.Errorf("evaluator notes = %q, want the metric's note after its name", got)
		}
		if got := text(t, ctx, "#instruction"); got != "Open the settings of t-click & save <them>" {
			t.Errorf("instruction = %q", got)
		}
		// → moves to the next step.
		for range 2 {
			if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowRight)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, ctx, `document.querySelector("section.step.current") && document.querySelector("section.step.current").id === "step-1"`)
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.ArrowLeft)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `document.querySelector("section.step.current").id === "step-0"`)
		// The accessibility tree opens as text.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#step-0 details.a11y summary"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `document.querySelector("#step-0 details.a11y pre").textContent.includes("<button name=\"OK\"/>")`)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.scrollTo(0, 0)`)); err != nil {
			t.Fatal(err)
		}
		shoot(t, ctx, dir, "viewer-episode")
		// Zoom shows the full screenshot with the marker still on its pixel.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#step-0 figure.shot"))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `(() => { const i = document.querySelector("#step-0 img"); return i.complete && i.naturalWidth === 640 && i.src.indexOf("scale") < 0; })()`)
		if r, err = chromedp.Run(ctx, chromedp.Evaluate[rects](`(() => {
			const img = document.querySelector("#step-0 img").getBoundingClientRect();
			const c = document.querySelector("#step-0 circle.marker.click").getBoundingClientRect();
			return {IX: img.left, IY: img.top, IW: img.width, IH: img.height, CX: c.left + c.width/2, CY: c.top + c.height/2};
		})()`)); err != nil {
			t.Fatal(err)
		}
		wantX, wantY = r.IX+clickX*r.IW/shotW, r.IY+clickY*r.IH/shotH
		if math.Abs(r.CX-wantX) > 2 || math.Abs(r.CY-wantY) > 2 {
			t.Errorf("zoomed: click marker centre at (%.1f, %.1f), want (%.1f, %.1f)", r.CX, r.CY, wantX, wantY)
		}
		shoot(t, ctx, dir, "viewer-episode-zoom")

		navigate(t, ctx, v.url+"/ui/episodes/ep-long?page=2")
		if got := count(t, ctx, "section.step"); got != longSteps-50 {
			t.Errorf("steps on page 2 = %d, want %d", got, longSteps-50)
		}
		navigate(t, ctx, v.url+"/ui/episodes/ep-long?page=1000")
		if got := text(t, ctx, ".pageinfo"); !strings.HasPrefix(got, "page 2 of 2") {
			t.Errorf("page 1000 of a 2-page episode: pager = %q, want page 2 of 2", got)
		}
		if got := count(t, ctx, "section.step"); got != longSteps-50 {
			t.Errorf("page 1000: steps = %d, want the %d of the last page", got, longSteps-50)
		}
	})

	t.Run("script in a model response is escaped", func(t *testing.T) {
		navigate(t, ctx, v.url+"/ui/episodes/ep-xss")
		if got := text(t, ctx, "#step-0 pre.response"); got != xss {
			t.Errorf("response shown as %q, want the literal %q", got, xss)
		}
		hit, err := chromedp.Run(ctx, chromedp.Evaluate[any](`window.__xss === undefined ? null : window.__xss`))
		if err != nil {
			t.Fatal(err)
		}
		if hit != nil {
			t.Errorf("window.__xss = %v: the response's script ran", hit)
		}
		if got := count(t, ctx, "pre.response script, pre.response img"); got != 0 {
			t.Errorf("elements parsed out of the response = %d, want 0", got)
		}
	})

	t.Run("compare", func(t *testing.T) {
		navigate(t, ctx, v.url+"/ui/compare?base=r-base&other=r-new")
		if got := count(t, ctx, "tr.diff-row"); got != 3 {
			t.Errorf("changed tasks = %d, want 3 (t-click, t-grpo, t-xss)", got)
		}
		if got := text(t, ctx, `tr.diff-row[data-task="t-click"]`); !strings.Contains(got, "1.000") || !strings.Contains(got, "0.000") {
			t.Errorf("t-click row = %q, want 1.000 and 0.000", got)
		}
		shoot(t, ctx, dir, "viewer-compare")
		// Each changed task links to both episodes; t-grpo ran twice in
		// r-base (rewards 1 and 0) and not in r-new: the link goes to the
		// one at or above the mean, and the page says so.
		for _, tc := range []struct{ task, side, want, pick string }{
			{"t-click", "base", "ep-long", ""},
			{"t-click", "other", "ep-new-click", ""},
			{"t-xss", "base", "ep-xss", ""},
			{"t-xss", "other", "ep-new-xss", ""},
			{"t-grpo", "base", "ep-g1", "(1 of 2, at or above the mean)"},
		} {
			row := fmt.Sprintf(`tr.diff-row[data-task=%q] td.side.%s`, tc.task, tc.side)
			href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(row+" a.episode"), "href"))
			if err != nil {
				t.Fatalf("%s %s: %v", tc.task, tc.side, err)
			}
			if want := "/ui/episodes/" + tc.want; href.Value != want {
				t.Errorf("%s %s links to %q, want %q", tc.task, tc.side, href.Value, want)
			}
			if tc.pick != "" {
				if got := text(t, ctx, row+" small.pick"); got != tc.pick {
					t.Errorf("%s %s: pick = %q, want %q", tc.task, tc.side, got, tc.pick)
				}
			} else if n := count(t, ctx, row+" small.pick"); n != 0 {
				t.Errorf("%s %s: %d pick notes for a task with one episode, want none", tc.task, tc.side, n)
			}
		}
		if n := count(t, ctx, `tr.diff-row[data-task="t-grpo"] td.side.other a.episode`); n != 0 {
			t.Errorf("t-grpo did not run in r-new, yet its side has %d episode links", n)
		}
		// Following a link shows that episode.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.diff-row[data-task="t-click"] td.side.other a.episode`))); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `location.pathname === "/ui/episodes/ep-new-click" && document.readyState === "complete"`)
		if got := text(t, ctx, "h1"); got != "Episode ep-new-click" {
			t.Errorf("the diff's link shows %q, want Episode ep-new-click", got)
		}
		// "all" lists the task's episodes in that rollout.
		navigate(t, ctx, v.url+"/ui/compare?base=r-base&other=r-new")
		all, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`tr.diff-row[data-task="t-grpo"] td.side.base a.all`), "href"))
		if err != nil {
			t.Fatal(err)
		}
		navigate(t, ctx, v.url+all.Value)
		if got := count(t, ctx, "tr.episode-row"); got != 2 {
			t.Errorf("all t-grpo episodes of r-base: %d rows, want 2", got)
		}
	})

	t.Run("unknown ids are 404 pages", func(t *testing.T) {
		for _, p := range []string{"/ui/episodes/nope", "/ui/rollouts/nope", "/ui/episodes/bad%20id", "/ui/compare?base=r-base&other=nope",
			"/ui/blobs/" + strings.Repeat("0", 64), "/ui/episodes/ep-long/steps/999.json", "/ui/nowhere"} {
			resp, err := http.Get(v.url + p)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
			}
			if !strings.Contains(string(body), `id="error-code">404<`) {
				t.Errorf("GET %s: body is not the 404 page", p)
			}
		}
		navigate(t, ctx, v.url+"/ui/episodes/nope")
		if got := text(t, ctx, "#error-code"); got != "404" {
			t.Errorf("404 page shows %q", got)
		}
		shoot(t, ctx, dir, "viewer-404")
	})

	t.Run("a running rollout updates live", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := t0.Add(time.Hour)
		ep := &pb.Episode{EpisodeId: "ep-live", RolloutId: "r-live", GroupId: "g-live", TaskId: "t-live", Domain: "os",
			Status: pb.EpisodeStatus_EPISODE_STATUS_RUNNING, StartTime: timestamppb.New(start)}
		appendHeader := func(ep *pb.Episode) {
			stream, err := v.client.AppendSteps(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(&pb.AppendStepsRequest{Item: &pb.AppendStepsRequest_Episode{Episode: ep}}); err != nil {
				t.Fatal(err)
			}
			if _, err := stream.CloseAndRecv(); err != nil {
				t.Fatal(err)
			}
		}
		appendHeader(ep)
		navigate(t, bctx, v.url+"/ui/")
		if got := text(t, bctx, `tr[data-rollout="r-live"] .badge`); got != "running" {
			t.Fatalf("r-live state = %q, want running", got)
		}
		ep.Status, ep.Score, ep.EndTime = done, 1, timestamppb.New(start.Add(time.Minute))
		appendHeader(ep)
		// No reload: the page refetches itself every 5 s while running.
		waitFor(t, bctx, `document.querySelector('tr[data-rollout="r-live"] .badge').textContent === "finished"`)
	})
}

func waitFor(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!(`+cond+`)`))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: err %v", cond, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("copied %s to %s", from, to)
}
