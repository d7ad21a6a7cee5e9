package osworld

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// slideGettersDriver runs OSWorld's getters/impress.py (in the getters
// directory argv[1]) on the jobs in the JSON file argv[2]. Each job has a
// getter, its config, the guest's files (path to a local file holding
// their bytes) and a cache directory of its own; get_vm_file is replaced
// by one that copies a guest file into the cache as OSWorld's does, None
// when the guest has none. It prints each answer as {"value": path
// relative to the cache, or null} or {"raise": name}.
const slideGettersDriver = `
import json, os, shutil
def get_vm_file(env, config):
    src = env.files.get(config["path"])
    if src is None:
        return None
    dst = os.path.join(env.cache_dir, config["dest"])
    shutil.copyfile(src, dst)
    return dst
stub("desktop_env.evaluators.getters")
stub("desktop_env.evaluators.getters.file", get_vm_file=get_vm_file)
impress = load("osworld_impress_getters", os.path.join(sys.argv[1], "impress.py"))
class Env:
    pass
out = []
for job in json.load(open(sys.argv[2])):
    env = Env()
    env.files, env.cache_dir = job["files"], job["cache"]
    try:
        v = getattr(impress, "get_" + job["getter"])(env, job["config"])
        out.append({"value": None if v is None else os.path.relpath(v, job["cache"])})
    except Exception as e:
        out.append({"raise": type(e).__name__})
print(json.dumps(out))
`

type slideGetterJob struct {
	Getter string            `json:"getter"`
	Config map[string]any    `json:"config"`
	Files  map[string]string `json:"files"`
	Cache  string            `json:"cache"`
}

// randomDeck is a zip of the parts the slide getters read: slides whose
// backgrounds hold a blip (with an r:embed or not, one p:bgPr or two),
// their relationship parts (types, ids and targets the getters treat
// apart: package parts, missing ones, file:// URLs, other targets, a
// relationship without a Type) and media.
func randomDeck(rng *rand.Rand) []byte {
	pick := func(l ...string) string { return l[rng.IntN(len(l))] }
	const ns = `xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	blip := func() string {
		return pick(`<a:blip r:embed="rId1"/>`, `<a:blip r:embed="rId2"/>`, `<a:blip r:embed="rId3"/>`, `<a:blip/>`, `<a:blip r:link="rId1"/>`)
	}
	parts := map[string]string{
		"ppt/media/image1.png": "png one",
		"ppt/media/audio1.wav": "wav one",
	}
	for n := 1; n <= 3; n++ {
		if rng.IntN(4) == 0 {
			continue
		}
		var bg strings.Builder
		for range rng.IntN(3) {
			bg.WriteString(`<p:bg><p:bgPr><a:blipFill>` + blip() + pick("", blip()) + `</a:blipFill></p:bgPr></p:bg>`)
		}
		parts[fmt.Sprintf("ppt/slides/slide%d.xml", n)] = `<?xml version="1.0"?><p:sld ` + ns + `><p:cSld>` + bg.String() +
			`<p:spTree>` + pick("", `<p:pic><p:blipFill>`+blip()+`</p:blipFill></p:pic>`) + `</p:spTree></p:cSld></p:sld>`
		if rng.IntN(5) == 0 {
			continue
		}
		var rels strings.Builder
		for range rng.IntN(4) {
			typ := ` Type="` + pick("http://schemas.openxmlformats.org/officeDocument/2006/relationships/image",
				"http://schemas.openxmlformats.org/officeDocument/2006/relationships/audio",
				"http://schemas.microsoft.com/office/2007/relationships/media",
				"http://schemas.openxmlformats.org/officeDocument/2006/relationships/slideLayout") + `"`
			if rng.IntN(12) == 0 {
				typ = ""
			}
			elem := pick("Relationship", "Relationship", "Relationship", "r:Other")
			fmt.Fprintf(&rels, `<%s Id="%s"%s Target="%s"/>`, elem, pick("rId1", "rId2", "rId3"), typ,
				pick("../media/image1.png", "../media/audio1.wav", "../media/missing.png", "file:///home/user/a.wav",
					"file:///home/user/missing.wav", "media/image1.png", "../slideLayouts/slideLayout1.xml", "../../ppt/media/image1.png"))
		}
		parts[fmt.Sprintf("ppt/slides/_rels/slide%d.xml.rels", n)] = `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships" xmlns:r="urn:other">` +
			rels.String() + `</Relationships>`
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for n, b := range parts {
		w, err := zw.Create(n)
		if err != nil {
			panic(err)
		}
		if _, err := w.Write([]byte(b)); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestSlideGettersMatchImpressPy runs background_image_in_slide (2
// published tasks) and audio_in_slide (1) here and in OSWorld's
// getters/impress.py on random decks and slide indexes, and wants the same
// answer: the same file in the cache (by its path there and its bytes),
// None, or a failure where OSWorld's getter raises. OSWorld's code is not
// ours to commit, so the test runs only when OSWORLD_REF names a checkout.
func TestSlideGettersMatchImpressPy(t *testing.T) {
	getters := osworldpy.GettersDir(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(53, 59))
	guestFiles := map[string][]byte{"/home/user/a.wav": []byte("linked wav")}
	const deck = "/home/user/Desktop/deck.pptx"
	var jobs []slideGetterJob
	var decks [][]byte
	for i := range 1500 {
		d := randomDeck(rng)
		if rng.IntN(30) == 0 {
			d = []byte("not a zip")
		}
		decks = append(decks, d)
		local := filepath.Join(dir, fmt.Sprintf("deck%04d.pptx", i))
		if err := os.WriteFile(local, d, 0o644); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{deck: local}
		for p, b := range guestFiles {
			lp := filepath.Join(dir, fmt.Sprintf("guest%04d-%s", i, filepath.Base(p)))
			if err := os.WriteFile(lp, b, 0o644); err != nil {
				t.Fatal(err)
			}
			files[p] = lp
		}
		cfg := map[string]any{"ppt_file_path": deck, "dest": "x.wav",
			"slide_index": []any{0.0, 0.0, 1.0, 2.0, -1.0, 5.0, "1", " 2 ", 1.7, true, "x"}[rng.IntN(11)]}
		getter := []string{"background_image_in_slide", "audio_in_slide"}[rng.IntN(2)]
		for _, side := range []string{"py", "go"} {
			cache := filepath.Join(dir, fmt.Sprintf("cache-%s-%04d", side, i))
			if err := os.MkdirAll(cache, 0o755); err != nil {
				t.Fatal(err)
			}
			if side == "py" {
				jobs = append(jobs, slideGetterJob{getter, cfg, files, cache})
			}
		}
	}
	jobFile := filepath.Join(dir, "jobs.json")
	b, _ := json.Marshal(jobs)
	if err := os.WriteFile(jobFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	if err := json.Unmarshal(osworldpy.Run(t, slideGettersDriver, nil, getters, jobFile), &want); err != nil || len(want) != len(jobs) {
		t.Fatalf("impress.py answered %d jobs of %d: %v", len(want), len(jobs), err)
	}
	g, gc := newTestGuest(t)
	for p, b := range guestFiles {
		g.files[p] = b
	}
	bad, answers, kinds := 0, map[string]int{}, map[string]int{}
	for i, j := range jobs {
		g.mu.Lock()
		g.files[deck] = decks[i]
		g.mu.Unlock()
		cache := filepath.Join(dir, fmt.Sprintf("cache-go-%04d", i))
		s := &Session{Guest: gc, CacheDir: cache}
		got, err := s.get(context.Background(), "result", map[string]any{"type": j.Getter, "ppt_file_path": deck, "dest": "x.wav", "slide_index": j.Config["slide_index"]})
		w := want[i]
		answers[fmt.Sprint(w)]++
		switch _, raised := w["raise"]; {
		case raised:
			kinds["raise"]++
		case w["value"] == nil:
			kinds["None"]++
		default:
			kinds["a file"]++
		}
		_, wRaise := w["raise"]
		ok := false
		switch {
		case wRaise:
			ok = err != nil
		case err != nil:
		case w["value"] == nil:
			ok = got == nil
		default:
			rel, _ := w["value"].(string)
			gp, _ := got.(string)
			pyBytes, _ := os.ReadFile(filepath.Join(j.Cache, rel))
			goBytes, _ := os.ReadFile(gp)
			ok = gp == filepath.Join(cache, rel) && bytes.Equal(pyBytes, goBytes)
		}
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("%s(slide_index %v) on deck %d: ours %v, %v; OSWorld's %v", j.Getter, j.Config["slide_index"], i, got, err, w)
			}
		}
	}
	t.Logf("answers: %v", answers)
	// The decks must lead OSWorld's getters to each kind of answer, or
	// the comparison proves little.
	if len(kinds) < 3 {
		t.Errorf("OSWorld's answers were only %v", kinds)
	}
	if bad > 0 {
		t.Errorf("%d of %d answers differ from OSWorld's", bad, len(jobs))
	}
}
