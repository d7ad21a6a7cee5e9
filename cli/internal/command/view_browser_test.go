package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Where the scripted model clicks in the terminal of the bundled
// desktop-xterm-file task before typing (screen pixels of the 1280x720
// process VM; the terminal opens at +40+40, 100x30 characters).
const (
	realClickX, realClickY = 300, 200
	realScreenW            = 1280
	realScreenH            = 720
	xtermTask              = "desktop-xterm-file"
)

// TestViewerOfRealRollouts loads the viewer in headless Chromium over a
// storage filled by two real rollouts of the bundled tasks
// (examples/tasks: two desktop tasks on process VMs, desktopd and Xvfb on
// this host, plus the math and py tasks) on the embedded mesh, as
// `rollout run` and `rollout view` do it, with the scripted stand-in
// model. The two runs differ in one answer: in the first the model clicks
// into the terminal and types the command the task asks for (score 1), in
// the second it types another text (score 0). The test checks what a user
// relies on: the step count and a screenshot per step, the click drawn on
// the pixel it hit and the typed text beside it, the filters narrowing the
// list, and the compare page listing the changed task with links to an
// episode of each run. Page screenshots go to
// $ROLLOUTMESH_VIEWER_ARTIFACTS (make test sets it), else the test's
// temporary directory.
func TestViewerOfRealRollouts(t *testing.T) {
	chromium := chromiumPath(t)
	root := repoRoot(t)
	desktopdOnPath(t)
	dir := t.TempDir()
	meshDir := filepath.Join(dir, "mesh")

	good := answerScript(t, root, dir, "good.jsonl", "echo 'hello from rolloutmesh' > ~/rolloutmesh_hello.txt")
	bad := answerScript(t, root, dir, "bad.jsonl", "echo 'hello from elsewhere' > ~/rolloutmesh_hello.txt")
	base := realRollout(t, root, meshDir, filepath.Join(dir, "results-good"), good)
	other := realRollout(t, root, meshDir, filepath.Join(dir, "results-bad"), bad)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	u, _ := startView(t, ctx, "view", "--data-dir", meshDir, "--listen", "127.0.0.1:0")
	site := strings.TrimSuffix(u, "/ui/")
	bctx := chromiumContext(t, chromium)
	arts := viewerArtifacts(t)

	// 7 tasks (2 desktop, 3 math, 2 py) in groups of 2.
	const episodes, desktopEpisodes = 14, 4

	t.Run("rollouts", func(t *testing.T) {
		browse(t, bctx, u)
		if got := countOf(t, bctx, "tr.rollout-row"); got != 2 {
			t.Errorf("rollout rows = %d, want 2", got)
		}
		for _, r := range []struct{ id, success string }{{base, "100.0%"}, {other, "85.7%"}} {
			got := textOf(t, bctx, fmt.Sprintf("tr[data-rollout=%q]", r.id))
			if want := fmt.Sprintf("%d/%d", episodes, episodes); !strings.Contains(got, "finished") || !strings.Contains(got, want) || !strings.Contains(got, r.success) {
				t.Errorf("row of %s = %q, want finished, %s and success %s", r.id, got, want, r.success)
			}
		}
		screenshotPage(t, bctx, arts, "viewer-real-rollouts")
	})

	var xtermEpisode string
	t.Run("filters narrow the list", func(t *testing.T) {
		browse(t, bctx, site+"/ui/rollouts/"+base)
		if got := countOf(t, bctx, "tr.episode-row"); got != episodes {
			t.Errorf("episode rows = %d, want %d", got, episodes)
		}
		screenshotPage(t, bctx, arts, "viewer-real-rollout")
		if err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.CSS(`#filters select[name="domain"]`), "os"),
			chromedp.Submit(chromedp.CSS(`#filters`)),
		); err != nil {
			t.Fatal(err)
		}
		// Submit navigates: wait for the filtered page to have loaded.
		waitUntil(t, bctx, `location.search.includes("domain=os") && document.readyState === "complete"`)
		if got := countOf(t, bctx, "tr.episode-row"); got != desktopEpisodes {
			t.Errorf("episode rows of domain os = %d, want %d", got, desktopEpisodes)
		}
		if err := chromedp.Do(bctx,
			chromedp.SetValue(chromedp.CSS(`#filters input[name="task"]`), xtermTask),
			chromedp.Submit(chromedp.CSS(`#filters`)),
		); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, bctx, `location.search.includes("task=`+xtermTask+`") && document.readyState === "complete"`)
		if got := countOf(t, bctx, "tr.episode-row"); got != 2 {
			t.Fatalf("episode rows of %s = %d, want its group of 2", xtermTask, got)
		}
		xtermEpisode = attrOf(t, bctx, "tr.episode-row", "data-episode")
		browse(t, bctx, site+"/ui/rollouts/"+other+"?max=0.5")
		if got := countOf(t, bctx, "tr.episode-row"); got != 2 {
			t.Errorf("episodes of %s scoring at most 0.5 = %d, want the 2 that typed the wrong text", other, got)
		}
	})

	t.Run("episode", func(t *testing.T) {
		if xtermEpisode == "" {
			t.Skip("no episode of the terminal task found")
		}
		browse(t, bctx, site+"/ui/episodes/"+xtermEpisode)
		// The model acted in step 0 and said DONE in step 1.
		steps := countOf(t, bctx, "section.step")
		if got := textOf(t, bctx, "#num-steps"); got != "2" || steps != 2 {
			t.Errorf("step count %q, %d steps shown; want 2 and 2", got, steps)
		}
		if got := countOf(t, bctx, "section.step figure.shot img"); got != steps {
			t.Errorf("screenshots = %d, want one per step (%d)", got, steps)
		}
		// Every step's screenshot loads (they load lazily as the page
		// scrolls; the page screenshot below shows them all).
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[any](`document.querySelectorAll("figure.shot img").forEach(i => { i.loading = "eager"; })`)); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, bctx, `[...document.querySelectorAll("figure.shot img")].every(i => i.complete && i.naturalWidth > 0)`)
		waitUntil(t, bctx, `[...document.querySelectorAll("figure.shot")].every(f => f.classList.contains("fitted"))`)
		if got := textOf(t, bctx, "#score"); got != "1.000" {
			t.Errorf("score = %q, want 1.000", got)
		}
		type rects struct{ IX, IY, IW, IH, CX, CY, NW, NH, Scale float64 }
		got, err := chromedp.Run(bctx, chromedp.Evaluate[rects](`(() => {
			const img = document.querySelector("#step-0 img");
			const i = img.getBoundingClientRect();
			const c = document.querySelector("#step-0 circle.marker.click").getBoundingClientRect();
			return {IX: i.left, IY: i.top, IW: i.width, IH: i.height, CX: c.left + c.width/2, CY: c.top + c.height/2,
				NW: img.naturalWidth, NH: img.naturalHeight, Scale: Number(img.closest("figure").dataset.scale)};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		// The thumbnail is the VM's screen shrunk by its scale.
		if got.NW*got.Scale != realScreenW || got.NH*got.Scale != realScreenH {
			t.Errorf("screenshot %gx%g (thumbnail %gx%g at scale %g), want the VM's %dx%d", got.NW*got.Scale, got.NH*got.Scale,
				got.NW, got.NH, got.Scale, realScreenW, realScreenH)
		}
		wantX, wantY := got.IX+realClickX*got.IW/realScreenW, got.IY+realClickY*got.IH/realScreenH
		if math.Abs(got.CX-wantX) > 2 || math.Abs(got.CY-wantY) > 2 {
			t.Errorf("click marker centre at (%.1f, %.1f), want (%.1f, %.1f): pixel (%d, %d) of the %.0fx%.0f image at (%.1f, %.1f)",
				got.CX, got.CY, wantX, wantY, realClickX, realClickY, got.IW, got.IH, got.IX, got.IY)
		}
		// The typed text is drawn where it was typed: at the click.
		label := `#step-0 text.marker-label.text`
		if got := textOf(t, bctx, label); got != "echo 'hello from rolloutmesh' > ~/rolloutmesh_hello.txt" {
			t.Errorf("typed text drawn = %q", got)
		}
		if x, y := attrOf(t, bctx, label, "x"), attrOf(t, bctx, label, "y"); x != fmt.Sprint(realClickX) || y != fmt.Sprint(realClickY) {
			t.Errorf("typed text drawn at (%s, %s), want the click (%d, %d)", x, y, realClickX, realClickY)
		}
		if got := countOf(t, bctx, `#step-0 text.marker-label.text`); got != 2 {
			t.Errorf("text markers on step 0 = %d, want the typed command and the Enter key", got)
		}
		if got := textOf(t, bctx, "#evaluator"); !strings.Contains(got, "exact_match") {
			t.Errorf("evaluator = %q, want exact_match", got)
		}
		screenshotPage(t, bctx, arts, "viewer-real-episode")
	})

	t.Run("compare lists the changed task", func(t *testing.T) {
		browse(t, bctx, site+"/ui/compare?base="+base+"&other="+other)
		if got := countOf(t, bctx, "tr.diff-row"); got != 1 {
			t.Errorf("changed tasks = %d, want 1 (%s)", got, xtermTask)
		}
		row := fmt.Sprintf("tr.diff-row[data-task=%q]", xtermTask)
		if got := textOf(t, bctx, row+" td.side.base .score") + " " + textOf(t, bctx, row+" td.side.other .score"); got != "1.000 0.000" {
			t.Errorf("scores = %q, want 1.000 0.000", got)
		}
		for _, side := range []struct{ name, pick string }{{"base", "(1 of 2, at or above the mean)"}, {"other", "(1 of 2, at or below the mean)"}} {
			if got := textOf(t, bctx, row+" td.side."+side.name+" small.pick"); got != side.pick {
				t.Errorf("%s: %q, want %q", side.name, got, side.pick)
			}
		}
		screenshotPage(t, bctx, arts, "viewer-real-compare")
		for _, side := range []struct{ name, rollout, score, typed string }{
			{"base", base, "1.000", "echo 'hello from rolloutmesh' > ~/rolloutmesh_hello.txt"},
			{"other", other, "0.000", "echo 'hello from elsewhere' > ~/rolloutmesh_hello.txt"},
		} {
			browse(t, bctx, site+"/ui/compare?base="+base+"&other="+other)
			link := row + " td.side." + side.name + " a.episode"
			if countOf(t, bctx, link) != 1 {
				t.Errorf("%s: no link to an episode", side.name)
				continue
			}
			if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(link))); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, bctx, `location.pathname.startsWith("/ui/episodes/") && document.readyState === "complete"`)
			if got := textOf(t, bctx, "header.top nav"); !strings.Contains(got, side.rollout) {
				t.Errorf("%s link: episode of %q, want one of %s", side.name, got, side.rollout)
			}
			if got := textOf(t, bctx, "#episode-summary"); !strings.Contains(got, xtermTask) {
				t.Errorf("%s link: episode of %q, want %s", side.name, got, xtermTask)
			}
			if got := textOf(t, bctx, "#score"); got != side.score {
				t.Errorf("%s link: score %s, want %s", side.name, got, side.score)
			}
			if got := textOf(t, bctx, "#step-0 text.marker-label.text"); got != side.typed {
				t.Errorf("%s link: typed text %q, want %q", side.name, got, side.typed)
			}
		}
	})
}

// answerScript writes a fakellm script: the bundled demo script with the
// first step of the terminal task answered by a click into the terminal
// and the given command typed there.
func answerScript(t *testing.T, root, dir, name, command string) string {
	t.Helper()
	demo, err := os.ReadFile(filepath.Join(root, "examples", "fakellm", "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// One line, as the demo's answers: the stand-in model's replies do
	// not keep line breaks inside a code block.
	reply := fmt.Sprintf("I will click into the terminal to focus it, then type the command. ```python pyautogui.click(%d, %d); "+
		"pyautogui.typewrite(%q, interval=0.01); pyautogui.press('enter') ```", realClickX, realClickY, command)
	rule, err := json.Marshal(map[string]string{"match": `(?s)rolloutmesh_hello\.txt.*Step 1 of`, "reply": reply})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	// First match wins: the rule above the demo's own.
	if err := os.WriteFile(p, append(append(rule, '\n'), demo...), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// realRollout runs `rollout run` over the bundled tasks on the embedded
// mesh in meshDir and returns the rollout's id.
func realRollout(t *testing.T, root, meshDir, out, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := Run(ctx, []string{"run", "--data", filepath.Join(root, "examples", "tasks"), "--group-size", "2",
		"--num-vms", "2", "--num-rollouts", "4", "--model-base-url", "", "--data-dir", meshDir, "--output-dir", out,
		"--fake-script", script}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("rollout run: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	runs, _ := filepath.Glob(filepath.Join(out, "r-*"))
	if len(runs) != 1 {
		t.Fatalf("results dirs = %v, want one\nstdout:\n%s", runs, stdout.String())
	}
	t.Logf("rollout %s of the bundled tasks took %s:\n%s", filepath.Base(runs[0]), time.Since(start).Round(time.Second), stdout.String())
	return filepath.Base(runs[0])
}

// chromiumPath finds Debian's chromium; missing, the test skips on a
// developer machine and fails under CI.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is missing; the viewer's browser test needs it (apt-get install chromium)")
	}
	t.Skip("chromium is missing: apt-get install chromium to run the viewer's browser test")
	return ""
}

// chromiumContext starts headless chromium for the rest of the test.
func chromiumContext(t *testing.T, path string) context.Context {
	t.Helper()
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

// viewerArtifacts is where page screenshots are kept:
// $ROLLOUTMESH_VIEWER_ARTIFACTS, else the test's temporary directory.
func viewerArtifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ROLLOUTMESH_VIEWER_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshotPage(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("page screenshot: %s", p)
}

func browse(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
		t.Fatalf("navigate %s: %v", u, err)
	}
}

func countOf(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	// Evaluated rather than queried: a query waits for a missing element
	// until the browser's deadline.
	s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.textContent : null; })()`, sel)))
	if err != nil || s == nil {
		t.Fatalf("text of %s: %v (found %v)", sel, err, s != nil)
	}
	return *s
}

func attrOf(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[*string](fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.getAttribute(%q) : null; })()`, sel, name)))
	if err != nil || v == nil {
		t.Fatalf("attribute %s of %s: %v (found %v)", name, sel, err, v != nil)
	}
	return *v
}

func waitUntil(t *testing.T, ctx context.Context, cond string) {
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
