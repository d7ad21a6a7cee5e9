package ui_test

import (
	"archive/tar"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
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
