package ui_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/api"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/ui"
)

// TestDownloads: a step's raw JSON and the episode's OSWorld folder.
func TestDownloads(t *testing.T) {
	v := startViewer(t, "")
	fill(t, v)

	resp, err := http.Get(v.url + "/ui/episodes/ep-long/steps/1.json")
	if err != nil {
		t.Fatal(err)
	}
	var step map[string]any
	err = json.NewDecoder(resp.Body).Decode(&step)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("step JSON: %d, %v", resp.StatusCode, err)
	}
	if step["episodeId"] != "ep-long" || step["index"] != float64(1) {
		t.Errorf("step JSON = %v, want ep-long step 1", step)
	}

	resp, err = http.Get(v.url + "/ui/episodes/ep-long/osworld.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("OSWorld folder: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	tr := tar.NewReader(resp.Body)
	var names []string
	pngs := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		names = append(names, h.Name)
		if strings.HasSuffix(h.Name, ".png") {
			pngs++
		}
		if h.Name == "os/t-click/result.txt" {
			b, _ := io.ReadAll(tr)
			if strings.TrimSpace(string(b)) != "1.0" && strings.TrimSpace(string(b)) != "1" {
				t.Errorf("result.txt = %q, want the score 1", b)
			}
		}
	}
	for _, want := range []string{"os/t-click/traj.jsonl", "os/t-click/result.txt"} {
		if !slices.Contains(names, want) {
			t.Errorf("tar lacks %s; has %v", want, names)
		}
	}
	if pngs != longSteps {
		t.Errorf("tar holds %d screenshots, want %d", pngs, longSteps)
	}
}

// TestOSWorldDownloadFailureIsNotAFolder: the download streams as it goes,
// so a failure after the first file (a damaged screenshot) cannot become
// an error status. The response must then end as a broken one, never as a
// complete tar that lacks the episode's screenshots and result.
func TestOSWorldDownloadFailureIsNotAFolder(t *testing.T) {
	v := startViewer(t, "")
	v.write(t, epSpec{"r-dmg", "ep-dmg", "g-dmg", "t-dmg", "os", done, 1, "", 3, "", 0})
	packs, err := filepath.Glob(filepath.Join(v.dataDir, "blobs", "packs", "*.pack"))
	if err != nil || len(packs) == 0 {
		t.Fatalf("packs: %v, %v", packs, err)
	}
	for _, p := range packs {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(v.url + "/ui/episodes/ep-dmg/osworld.tar")
	if err != nil {
		return // broken before its headers reached the client
	}
	defer resp.Body.Close()
	var names []string
	tr := tar.NewReader(resp.Body)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("the download of a damaged episode ended as a complete tar of %v", names)
		}
		if err != nil {
			break // the broken response the client must see
		}
		names = append(names, h.Name)
	}
}

// manySteps is the index with one episode of n small steps (made up, not
// stored: a hundred thousand steps take a while to store).
type manySteps struct {
	*index.DB
	n int
}

func (m manySteps) step(i int) *pb.Step {
	return &pb.Step{EpisodeId: "ep-one", Index: int32(i), Actions: []*pb.Action{{ActionType: "WAIT"}}}
}

func (m manySteps) StepRange(_ context.Context, _ string, from, limit int) ([]*pb.Step, error) {
	var out []*pb.Step
	for i := from; i < m.n && i < from+limit; i++ {
		out = append(out, m.step(i))
	}
	return out, nil
}

func (m manySteps) Steps(context.Context, string, int64) ([]*pb.Step, error) {
	return m.StepRange(context.Background(), "", 0, m.n)
}

// TestOSWorldDownloadHasEveryStep: the download read at most 100,000
// steps (with no bound on their bytes) and silently left the rest out of
// traj.jsonl; an episode may have up to a million. It reads the episode
// as the export does now: every step, within the export's byte bound.
func TestOSWorldDownloadHasEveryStep(t *testing.T) {
	idx, blobs := oneEpisodeStore(t)
	const steps = 100_001
	h, err := ui.New(ui.Options{Reads: api.New(idx, blobs, nil, api.Options{SuccessThreshold: 1}), Index: manySteps{idx, steps}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/episodes/ep-one/osworld.tar", nil))
	tr := tar.NewReader(rec.Body)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no traj.jsonl in the tar: %v", err)
		}
		if hdr.Name != "os/t-one/traj.jsonl" {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(b), "\n"); got != steps {
			t.Errorf("traj.jsonl has %d lines, want one per step: %d", got, steps)
		}
		return
	}
}
