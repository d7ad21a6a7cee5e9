package media

import (
	"cmp"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// videoPyDriver makes random videos with ffmpeg's lavfi sources, each
// with a variant (the same file, the same frames through another codec,
// a box drawn over some frames, the picture flipped, fewer or more
// frames, another size or source), and files that are no video (missing,
// empty, text, a WAV, a PNG), and scores the pairs with vlc.py's
// compare_videos, through OpenCV and imagehash, under random
// max_frames_to_check and threshold, printing osworldpy.Case JSON. argv:
// metrics directory, output directory, seed, number of cases.
//
// Debian's OpenCV also has a GStreamer backend, which OSWorld's wheel
// (opencv-python-headless) lacks: it is turned off, so that a file
// FFmpeg cannot open is not read by another backend.
const videoPyDriver = `
import json, random, os, io, contextlib, subprocess
os.environ["OPENCV_VIDEOIO_PRIORITY_GSTREAMER"] = "0"
for name in ["acoustid", "librosa"]:
    stub(name)
stub("fastdtw", fastdtw=None)
vlc = load("vlc", os.path.join(sys.argv[1], "vlc.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

# OpenCV 4.6 (Debian's) reads a display matrix's angle with the wrong sign,
# which 4.7 fixed (OpenCV's issue 22088); OSWorld pins 4.8. vlc.py gets a
# cv2 whose VideoCapture turns frames as 4.7 and later do: the angle's
# sign corrected, then quarter turns only, as OpenCV applies them.
import cv2, types
class VideoCapture:
    def __init__(self, path):
        self.cap = cv2.VideoCapture(path)
        self.cap.set(cv2.CAP_PROP_ORIENTATION_AUTO, 0)
        self.turn = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}.get(
            (360 - int(self.cap.get(cv2.CAP_PROP_ORIENTATION_META))) % 360)
    def read(self):
        ok, frame = self.cap.read()
        if ok and self.turn is not None:
            frame = cv2.rotate(frame, self.turn)
        return ok, frame
shim = types.ModuleType("cv2")
shim.__dict__.update(cv2.__dict__)
shim.VideoCapture = VideoCapture
vlc.cv2 = shim

SOURCES = ["testsrc2", "testsrc", "smptebars", "rgbtestsrc", "mandelbrot", "life=mold=10:ratio=0.2", "cellauto",
           "color=c=0x3070c0", "gradients"]
# (extension, codec arguments, whether the codec needs even sizes)
CODECS = [
    ("mp4", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast"], True),
    ("mp4", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "40", "-bf", "2"], True),
    ("mkv", ["-c:v", "libx264", "-pix_fmt", "yuv444p", "-preset", "ultrafast"], False),
    ("avi", ["-c:v", "mpeg4", "-q:v", "5"], True),
    ("avi", ["-c:v", "mpeg4", "-q:v", "20"], True),
    ("mkv", ["-c:v", "mjpeg", "-q:v", "3", "-pix_fmt", "yuvj420p"], False),
    ("mkv", ["-c:v", "ffv1", "-pix_fmt", "bgr0"], False),
    ("mkv", ["-c:v", "png", "-pix_fmt", "rgb24"], False),
    ("mkv", ["-c:v", "rawvideo", "-pix_fmt", "gray"], False),
    ("webm", ["-c:v", "libvpx", "-b:v", "200k", "-pix_fmt", "yuv420p"], True),
    ("gif", ["-pix_fmt", "rgb8"], False),
]
# ffprobe's rotation field cuts 89.7 to 89; OpenCV rounds it to 90.
ROTATIONS = [180, 45, 90, 270, 89.7, 180.4, -90.3, 134.6]
SIZES = [(64, 48), (160, 120), (32, 32), (33, 17), (100, 30), (8, 8)]
FRAMES = [1, 2, 5, 20, 60, 99, 100, 101, 130]

count = 0
def render(src, size, rate, frames, vf, codec, rotate=0):
    global count
    count += 1
    ext, args, even = codec
    w, h = size
    if even:
        w, h = w + w % 2, h + h % 2
    path = os.path.join(out, "v%05d.%s" % (count, ext))
    cmd = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "%s%ssize=%dx%d:rate=%d" % (src, ":" if "=" in src else "=", w, h, rate),
           "-frames:v", str(frames)]
    if vf:
        cmd += ["-vf", vf]
    subprocess.run(cmd + args + [path], check=True)
    if rotate:
        # A display matrix, as a phone writes: the frames are untouched.
        turned = path + ".mp4"
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", path, "-c", "copy",
                        "-metadata:s:v:0", "rotate=%g" % rotate, turned], check=True)
        return turned
    return path

def video():
    return {"src": rng.choice(SOURCES), "size": rng.choice(SIZES), "rate": rng.choice([10, 25]),
            "frames": rng.choice(FRAMES), "vf": "", "codec": rng.choice(CODECS)}

def special(kind):
    global count
    count += 1
    path = os.path.join(out, "s%05d" % count)
    if kind == "missing":
        return path + ".mp4"
    if kind == "empty":
        open(path + ".mp4", "wb").close()
        return path + ".mp4"
    if kind == "text":
        with open(path + ".mp4", "w") as f:
            f.write("not a video " * rng.choice([1, 100]))
        return path + ".mp4"
    if kind == "wav":
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=d=0.5", path + ".wav"], check=True)
        return path + ".wav"
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=40x30", "-frames:v", "1",
                    path + ".png"], check=True)
    return path + ".png"

def variant(v):
    k = rng.randrange(11)
    w = dict(v)
    if k == 0:
        w["codec"] = rng.choice(CODECS)
    elif k in (1, 2):
        # A box over a run of frames, about as many as the threshold
        # allows to mismatch.
        s, c = rng.randrange(max(1, v["frames"])), rng.choice([1, 4, 5, 6, 7, 30])
        w["vf"] = "drawbox=x=0:y=0:w=iw/%d:h=ih:color=%s:t=fill:enable='between(n,%d,%d)'" % (
            rng.choice([1, 2, 3, 8]), rng.choice(["black", "white", "red"]), s, s + c - 1)
    elif k == 3:
        w["vf"] = rng.choice(["hflip", "vflip", "hflip,vflip"])
    elif k == 4:
        w["frames"] = max(1, v["frames"] + rng.choice([-1, 1, -5, 30]))
    elif k == 5:
        w["size"] = rng.choice(SIZES)
    elif k == 6:
        w["src"] = rng.choice(SOURCES)
    elif k == 7:
        w["vf"] = rng.choice(["eq=brightness=0.05", "eq=contrast=1.3", "noise=alls=20:allf=t", "boxblur=1"])
    elif k == 8:
        w["rate"] = 35 - v["rate"]
    elif k == 9:
        # Only MP4 carries the matrix: the variant is H.264 in MP4.
        w["rotate"], w["codec"] = rng.choice(ROTATIONS), CODECS[rng.choice([0, 1])]
    return w

cases = []
for i in range(n):
    if rng.random() < 0.1:
        a = special(rng.choice(["missing", "empty", "text", "wav", "png"]))
        b = rng.choice([a, special(rng.choice(["missing", "text", "png"]))]) if rng.random() < 0.5 else render(**video())
    else:
        v = video()
        a = render(**v)
        b = a if rng.random() < 0.1 else render(**variant(v))
    if rng.random() < 0.5:
        a, b = b, a
    options = {}
    if rng.random() < 0.3:
        options["max_frames_to_check"] = rng.choice([0, 1, 10, 50, 100, 150, 2.5])
    if rng.random() < 0.3:
        options["threshold"] = rng.choice([0, 2, 5, 10, 64, 2.5])
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score = float(vlc.compare_videos(a, b, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": "compare_videos", "result": a, "expected": b, "options": options, "score": score})
print(json.dumps(cases))
`

// TestCompareVideosMatchesVLCPy scores random video pairs with
// compare_videos here and in OSWorld's vlc.py, which reads frames through
// OpenCV (Debian's python3-opencv) and hashes them with imagehash, and
// wants the same scores. imagehash is not in Debian: IMAGEHASH names a
// checkout of its source (github.com/JohannesBuchner/imagehash). It runs
// only when OSWORLD_REF names an OSWorld checkout.
//
// OSWorld pins OpenCV 4.8, Debian has 4.6, over the same libavcodec and
// swscale. 4.6 reads a display matrix's angle with the wrong sign (OpenCV's
// issue 22088, fixed in 4.7): the driver gives vlc.py a VideoCapture that
// corrects the sign and turns the frames as 4.7 and later do.
func TestCompareVideosMatchesVLCPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	needTools(t, "ffmpeg")
	path := pythonPathFrom(t, "import cv2, imagehash, scipy.fftpack",
		"OpenCV (python3-opencv), SciPy (python3-scipy) or imagehash (IMAGEHASH names its source)", "IMAGEHASH")
	out := osworldpy.Run(t, videoPyDriver, path, metrics, t.TempDir(), "1", "200")
	cases := osworldpy.Cases(t, out)
	osworldpy.Compare(t, cases, func(c osworldpy.Case) (float64, error) {
		return Metrics()["compare_videos"].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}

// pythonPathFrom returns the source trees the envs name (those set) as
// the oracle's PYTHONPATH, and skips the test when imports fail under it.
func pythonPathFrom(t *testing.T, imports, what string, envs ...string) []string {
	t.Helper()
	var path []string
	for _, env := range envs {
		if p := os.Getenv(env); p != "" {
			path = append(path, p)
		}
	}
	py := exec.Command(cmp.Or(os.Getenv("OSWORLD_PYTHON"), "python3"), "-c", imports)
	py.Env = append(os.Environ(), "PYTHONPATH="+strings.Join(path, ":"))
	if out, err := py.CombinedOutput(); err != nil {
		t.Skipf("no %s: %v: %s", what, err, out)
	}
	return path
}
