package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
)

// The guest's screen, as OSWorld's VMs have it.
const (
	screenW = 1920
	screenH = 1080
)

// Names of the served files, as the tasks put them in the guest.
const (
	sheetName = "Sales_Report.xlsx"
	videoName = "Lecture_Recording.mp4"
)

// benchTask is one representative OSWorld task: its config steps (those
// of a published task, with the URLs pointing at the local server) and
// the check that its application is ready for the agent.
type benchTask struct {
	name    string
	modelOn string // the published task it copies
	task    osworld.Task
	ready   func(ctx context.Context, g *guest.Client) error
}

// files are the served files made by the real applications.
type files struct {
	sheet, video string
	pages        []string // HTML pages for Chrome's tabs, by name
}

// makeFiles has LibreOffice make the workbook and ffmpeg the video, of the
// sizes OSWorld's tasks download (a sheet of a thousand rows, a 720p clip
// of some megabytes).
func makeFiles(ctx context.Context, dir string) (files, error) {
	var f files
	src := filepath.Join(dir, "src")
	out := filepath.Join(dir, "served")
	for _, d := range []string{src, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return f, err
		}
	}
	csvPath := filepath.Join(src, strings.TrimSuffix(sheetName, ".xlsx")+".csv")
	if err := writeCSV(csvPath, 1000); err != nil {
		return f, err
	}
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		return f, fmt.Errorf("LibreOffice makes the workbook: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, soffice, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"), "--headless",
		"--infilter=CSV:44,34,76,1", "--convert-to", "xlsx", "--outdir", out, csvPath)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		return f, fmt.Errorf("soffice --convert-to xlsx: %w\n%s", err, b)
	}
	f.sheet = filepath.Join(out, sheetName)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return f, fmt.Errorf("ffmpeg makes the video: %w", err)
	}
	f.video = filepath.Join(out, videoName)
	// Noise keeps the encoder from shrinking the test pattern to nothing,
	// so the file has a real video's size.
	cmd = exec.CommandContext(cctx, ffmpeg, "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=20",
		"-f", "lavfi", "-i", "sine=frequency=440:duration=20",
		"-vf", "noise=alls=12:allf=t", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M",
		"-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", f.video)
	if b, err := cmd.CombinedOutput(); err != nil {
		return f, fmt.Errorf("ffmpeg: %w\n%s", err, b)
	}
	for _, p := range []string{f.sheet, f.video} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			return f, fmt.Errorf("%s was not made: %v", p, err)
		}
	}
	for i, title := range []string{"travel", "lodging", "reviews"} {
		name := title + ".html"
		if err := os.WriteFile(filepath.Join(out, name), []byte(page(title, uint64(i))), 0o644); err != nil {
			return f, err
		}
		f.pages = append(f.pages, name)
	}
	return f, nil
}

func writeCSV(path string, rows int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"Date", "Region", "Rep", "Item", "Units", "UnitCost", "Total"})
	r := rand.New(rand.NewPCG(1, 2))
	regions := []string{"East", "West", "North", "South", "Central"}
	reps := []string{"Jones", "Kivell", "Jardine", "Gill", "Sorvino", "Andrews"}
	items := []string{"Pencil", "Binder", "Pen", "Desk", "Pen Set"}
	day := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		units, cost := 1+r.IntN(95), float64(100+r.IntN(27500))/100
		_ = w.Write([]string{day.AddDate(0, 0, i/5).Format("2006-01-02"), regions[r.IntN(len(regions))],
			reps[r.IntN(len(reps))], items[r.IntN(len(items))], strconv.Itoa(units),
			strconv.FormatFloat(cost, 'f', 2, 64), strconv.FormatFloat(float64(units)*cost, 'f', 2, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// page is a plain article page of some tens of kilobytes.
func page(title string, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 9))
	words := strings.Fields("trip hotel beach city museum guide review price room night flight tour market food view")
	var b strings.Builder
	fmt.Fprintf(&b, "<!doctype html><html><head><title>%s</title></head><body><h1>%s</h1>", title, title)
	for range 200 {
		b.WriteString("<p>")
		for range 30 {
			b.WriteString(words[r.IntN(len(words))] + " ")
		}
		b.WriteString("</p>")
	}
	b.WriteString("</body></html>")
	return b.String()
}

// server serves the files on loopback (the host side downloads from
// there, as it would from OSWorld's file cache) and on the Docker bridge's
// gateway address, where the guest's Chrome reaches the pages.
type server struct {
	loopback, bridge string // base URLs
	// downloads counts the files sent on loopback: what the download
	// cache fetched (Chrome's page loads come through the bridge).
	downloads atomic.Int64
	srvs      []*http.Server
}

func serve(dir string) (*server, error) {
	s := &server{}
	fs := http.FileServer(http.Dir(dir))
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.downloads.Add(1)
		fs.ServeHTTP(w, r)
	})
	gw, err := bridgeGateway()
	if err != nil {
		return nil, err
	}
	for _, host := range []string{"127.0.0.1", gw} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			s.close()
			return nil, fmt.Errorf("listen on %s: %w", host, err)
		}
		var h http.Handler = fs
		if host != gw {
			h = counted
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		s.srvs = append(s.srvs, srv)
		go srv.Serve(l)
		base := "http://" + l.Addr().String() + "/"
		if host == gw {
			s.bridge = base
		} else {
			s.loopback = base
		}
	}
	return s, nil
}

func (s *server) close() {
	for _, srv := range s.srvs {
		srv.Close()
	}
}

// bridgeGateway is the host's address on Docker's default bridge, which
// containers on it reach.
func bridgeGateway() (string, error) {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return "", fmt.Errorf("docker0 (the guest reaches the pages through it): %w", err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", errors.New("docker0 has no IPv4 address")
}

// tasks are the three representative tasks, modelled on published ones.
func tasks(s *server, f files) ([]benchTask, error) {
	var pageURLs []any
	for _, p := range f.pages {
		pageURLs = append(pageURLs, s.bridge+p)
	}
	specs := []struct {
		name, modelOn string
		config        []map[string]any
		ready         func(ctx context.Context, g *guest.Client) error
	}{
		{
			name: "calc: download + open", modelOn: "libreoffice_calc/01b269ae-2111-4a07-81fd-3fcd711993b0",
			config: []map[string]any{
				{"type": "download", "parameters": map[string]any{"files": []any{
					map[string]any{"url": s.loopback + sheetName, "path": "/home/user/" + sheetName}}}},
				{"type": "open", "parameters": map[string]any{"path": "/home/user/" + sheetName}},
			},
			ready: windowShown(sheetName + " - LibreOffice Calc"),
		},
		{
			name: "chrome: launch + chrome_open_tabs", modelOn: "chrome/06fe7178-4491-4589-810f-2e2bc9502122 (its 3 tabs)",
			config: []map[string]any{
				{"type": "launch", "parameters": map[string]any{"command": []any{"google-chrome", "--remote-debugging-port=1337"}}},
				{"type": "launch", "parameters": map[string]any{"command": []any{"socat", "tcp-listen:9222,fork", "tcp:localhost:1337"}}},
				{"type": "chrome_open_tabs", "parameters": map[string]any{"urls_to_open": pageURLs}},
			},
			ready: tabsOpen(pageURLs),
		},
		{
			name: "vlc: download + launch", modelOn: "vlc/aa4b5023-aef6-4ed9-bdc9-705f59ab9ad6",
			config: []map[string]any{
				{"type": "download", "parameters": map[string]any{"files": []any{
					map[string]any{"url": s.loopback + videoName, "path": "/home/user/Desktop/" + videoName}}}},
				{"type": "launch", "parameters": map[string]any{
					"command": "VLC_VERBOSE=-1 vlc --no-audio --no-video-title-show /home/user/Desktop/" + videoName, "shell": true}},
				{"type": "execute", "parameters": map[string]any{"command": []any{"python", "-c",
					"import pyautogui; import time; pyautogui.click({SCREEN_WIDTH_HALF}, {SCREEN_HEIGHT_HALF}); time.sleep(0.5);"}}},
			},
			ready: vlcAnswers,
		},
	}
	var out []benchTask
	for _, sp := range specs {
		data, err := json.Marshal(map[string]any{
			"id": "bench-" + strings.SplitN(sp.name, ":", 2)[0], "instruction": "benchmark setup of " + sp.name,
			"config": sp.config, "evaluator": map[string]any{"func": "infeasible"},
		})
		if err != nil {
			return nil, err
		}
		t, err := osworld.ParseTask(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		if kind, name, missing := t.Unsupported(); missing {
			return nil, fmt.Errorf("%s: the runner lacks the %s %s", sp.name, kind, name)
		}
		out = append(out, benchTask{name: sp.name, modelOn: sp.modelOn, task: t, ready: sp.ready})
	}
	return out, nil
}

// readyTimeout bounds the wait for an application after its config steps.
const readyTimeout = 3 * time.Minute

// poll calls check every 200 ms until it succeeds, ctx ends or
// readyTimeout passes; it returns the last error then.
func poll(ctx context.Context, what string, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w", what, readyTimeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// windowShown waits for a window of this title in wmctrl's list, as
// OSWorld's activate_window finds it.
func windowShown(title string) func(ctx context.Context, g *guest.Client) error {
	return func(ctx context.Context, g *guest.Client) error {
		return poll(ctx, "window "+title, func(ctx context.Context) error {
			res, err := g.Execute(ctx, []string{"wmctrl", "-l"}, false, false)
			if err != nil {
				return err
			}
			if !strings.Contains(res.Output, title) {
				return errors.New("no such window yet")
			}
			return nil
		})
	}
}

// tabsOpen waits until Chrome's DevTools list every URL as a page.
func tabsOpen(urls []any) func(ctx context.Context, g *guest.Client) error {
	return func(ctx context.Context, g *guest.Client) error {
		addr := g.ChromeAddr()
		if addr == "" {
			return errors.New("the lease names no chrome port")
		}
		return poll(ctx, "Chrome's tabs", func(ctx context.Context) error {
			body, err := get(ctx, "http://"+addr+"/json/list", "")
			if err != nil {
				return err
			}
			var tabs []struct{ Type, URL string }
			if err := json.Unmarshal(body, &tabs); err != nil {
				return err
			}
			open := map[string]bool{}
			for _, t := range tabs {
				if t.Type == "page" {
					open[t.URL] = true
				}
			}
			for _, u := range urls {
				if !open[u.(string)] {
					return fmt.Errorf("%s is not open", u)
				}
			}
			return nil
		})
	}
}

// vlcAnswers waits for VLC's HTTP interface to answer that it plays, with
// the password OSWorld's getters use.
func vlcAnswers(ctx context.Context, g *guest.Client) error {
	addr := g.Ports["vlc"]
	if addr == "" {
		return errors.New("the lease names no vlc port")
	}
	return poll(ctx, "VLC's HTTP interface", func(ctx context.Context) error {
		body, err := get(ctx, "http://"+addr+"/requests/status.xml", "password")
		if err != nil {
			return err
		}
		// Playing: the video the task launched VLC on is open.
		if !strings.Contains(string(body), "<state>playing</state>") {
			return errors.New("VLC is not playing")
		}
		return nil
	})
}

// get fetches a small document (basic auth with an empty user when
// password is set), bounded in time and size.
func get(ctx context.Context, u, password string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if password != "" {
		req.SetBasicAuth("", password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return boundedread.ReadAll(resp.Body, 4<<20)
}
