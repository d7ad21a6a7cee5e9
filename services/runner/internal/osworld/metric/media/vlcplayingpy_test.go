package media

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// vlcPlayingPyDriver writes random VLC status files (/requests/status.xml:
// a state, and meta and stream information whose names, order and text
// vary) and scores them with is_vlc_playing of OSWorld's vlc.py against the
// published tasks' rules and variations, printing osworldpy.Case JSON.
// argv: metrics directory, output directory, seed, number of cases.
const vlcPlayingPyDriver = `
import json, random, os, io, contextlib
for name in ["acoustid", "librosa", "imagehash", "cv2"]:
    stub(name)
stub("fastdtw", fastdtw=None)
vlc = load("vlc", os.path.join(sys.argv[1], "vlc.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])
pick = rng.choice
FILE = "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"
URL = "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_example_fmp4/master.m3u8"
TEXTS = [FILE, "/home/user/" + FILE, "file:///home/user/" + FILE.replace(" ", "%20"), "C:\\\\v\\\\" + FILE, "x" + FILE, FILE + ".part",
         URL, "master.m3u8", "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_example_fmp4/master.m3u8?x=1",
         "https://devstreaming-cdn.apple.com/other/master.m3u8", "https://other.example/videos/streaming/examples/img_bipbop_adv_example_fmp4/master.m3u8",
         "h264", "Video", "", " ", "&amp;"]
NAMES = ["filename", "title", "uri", "URI", "url", "location", "name", "artist"]
def status():
    infos = []
    for cat in rng.sample(["meta", "Stream 0", "Stream 1", "meta"], rng.randrange(4)):
        items = "".join('<info name="%s">%s</info>' % (pick(NAMES + ["Codec", "Type", "Language"]), pick(TEXTS)) for _ in range(rng.randrange(4)))
        infos.append('<category name="%s">%s</category>' % (cat, items))
    state = pick(["playing", "playing", "paused", "stopped", ""])
    return '<?xml version="1.0" encoding="utf-8" standalone="yes" ?><root><fullscreen>false</fullscreen><state>%s</state><information>%s</information></root>' % (state, "".join(infos))
cases = []
for i in range(n):
    p = os.path.join(out, "s%05d.xml" % i)
    with open(p, "w") as f:
        f.write(status())
    rule = pick([{"type": "file_name", "file_name": pick([FILE, "master.m3u8", "Never Gonna Give You Up (Official Music Video).mp4", "mp4"])},
                 {"type": "url", "url": pick([URL, "https://devstreaming-cdn.apple.com/videos/streaming/examples/img_bipbop_adv_example_fmp4/", "master.m3u8", "https://x.example/"])},
                 {"type": "other"}])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(vlc.is_vlc_playing(p, rule))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "is_vlc_playing", "result": p, "expected": rule, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestVLCPlayingMatchesPy scores random VLC status files with
// is_vlc_playing (2 published tasks) here and in OSWorld's vlc.py
// (ElementTree's find, urlparse), and wants the same scores. It runs only
// when OSWORLD_REF names an OSWorld checkout.
func TestVLCPlayingMatchesPy(t *testing.T) {
	out := osworldpy.Run(t, vlcPlayingPyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "5000")
	osworldpy.Compare(t, osworldpy.Cases(t, out), func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
