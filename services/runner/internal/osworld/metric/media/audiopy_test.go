package media

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// audioPyDriver makes random audio files with ffmpeg's lavfi sources in
// many containers, codecs, rates and channel counts, each with a variant
// (the same file, another encoding, louder, delayed, faster, cut short,
// reversed, filtered, mixed down, silent), and files that are no audio
// (missing, empty, text, a PNG, a WAV of no samples, a video without
// sound), and scores the pairs with vlc.py's compare_audios through
// librosa, soundfile, audioread and fastdtw, printing osworldpy.Case JSON.
// argv: metrics directory, output directory, seed, number of cases.
//
// Two things stand in for what pip would install:
//   - soxr (python-soxr, a compiled wheel) is a module of the driver's own
//     that calls Debian's libsoxr through ctypes the way python-soxr's
//     resample does: soxr_quality_spec(HQ, 0), float32 in and out, the
//     input fed in chunks of max(1000, 48000·in/out) samples, then flushed,
//     the output bounded by in·out/in + 1 samples.
//   - gi (PyGObject) is hidden, as OSWorld's requirements do not install
//     it: audioread then decodes with the ffmpeg command, not GStreamer.
const audioPyDriver = `
import json, random, os, io, contextlib, subprocess, wave, ctypes
import numpy as np
sys.modules["gi"] = None

soxr_lib = ctypes.CDLL("libsoxr.so.0")
class IOSpec(ctypes.Structure):
    _fields_ = [("itype", ctypes.c_int), ("otype", ctypes.c_int), ("scale", ctypes.c_double),
                ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]
class QualitySpec(ctypes.Structure):
    _fields_ = [("precision", ctypes.c_double), ("phase_response", ctypes.c_double), ("passband_end", ctypes.c_double),
                ("stopband_begin", ctypes.c_double), ("e", ctypes.c_void_p), ("flags", ctypes.c_ulong)]
soxr_lib.soxr_io_spec.restype, soxr_lib.soxr_io_spec.argtypes = IOSpec, [ctypes.c_int, ctypes.c_int]
soxr_lib.soxr_quality_spec.restype, soxr_lib.soxr_quality_spec.argtypes = QualitySpec, [ctypes.c_ulong, ctypes.c_ulong]
soxr_lib.soxr_create.restype = ctypes.c_void_p
soxr_lib.soxr_create.argtypes = [ctypes.c_double, ctypes.c_double, ctypes.c_uint, ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(IOSpec), ctypes.POINTER(QualitySpec), ctypes.c_void_p]
soxr_lib.soxr_process.restype = ctypes.c_char_p
soxr_lib.soxr_process.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                  ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
soxr_lib.soxr_delete.argtypes = [ctypes.c_void_p]
SOXR_FLOAT32_I, SOXR_HQ = 0, 4

def soxr_resample(x, in_rate, out_rate, quality="HQ"):
    if str(quality).lower() not in ("hq", "soxr_hq"):
        raise ValueError("the driver's soxr has HQ only")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError("the driver's soxr takes mono only")
    ilen = x.shape[0]
    olen = int(ilen * out_rate / in_rate + 1)
    io_spec, q_spec = soxr_lib.soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I), soxr_lib.soxr_quality_spec(SOXR_HQ, 0)
    err = ctypes.c_char_p()
    s = soxr_lib.soxr_create(in_rate, out_rate, 1, ctypes.byref(err), ctypes.byref(io_spec), ctypes.byref(q_spec), None)
    if err.value:
        raise RuntimeError(err.value)
    y = np.zeros(olen, dtype=np.float32)
    chunk = int(max(1000., 48000 * in_rate / out_rate))
    pos, done = 0, ctypes.c_size_t()
    for i in range(0, ilen, chunk):
        soxr_lib.soxr_process(s, x[i:].ctypes.data, min(chunk, ilen - i), None, y[pos:].ctypes.data, olen - pos, ctypes.byref(done))
        pos += done.value
    soxr_lib.soxr_process(s, None, 0, None, y[pos:].ctypes.data, olen - pos, ctypes.byref(done))
    soxr_lib.soxr_delete(s)
    return y[:pos + done.value].copy()
stub("soxr", resample=soxr_resample, __version__="1.0.0")

stub("acoustid"); stub("cv2"); stub("imagehash")
stub("skimage"); stub("skimage.metrics", structural_similarity=None)
vlc = load("vlc", os.path.join(sys.argv[1], "vlc.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

def sources(rate, d):
    f = rng.choice([110, 220, 440, 880, 1500, 3000, 7000])
    return rng.choice([
        "sine=frequency=%d:sample_rate=%d:duration=%g" % (f, rate, d),
        "sine=frequency=%d:beep_factor=4:sample_rate=%d:duration=%g" % (f, rate, d),
        "anoisesrc=color=%s:seed=%d:amplitude=0.3:sample_rate=%d:duration=%g" % (rng.choice(["white", "pink", "brown"]), rng.randrange(1000), rate, d),
        "aevalsrc=0.4*sin(2*PI*(%d+300*t)*t)|0.3*sin(2*PI*%d*t):s=%d:d=%g" % (f, f * 3 // 2, rate, d),
        "aevalsrc=0.5*sin(2*PI*%d*t)*lt(mod(t\\,0.4)\\,0.2):s=%d:d=%g" % (f, rate, d),
        "aevalsrc=0.3*sin(2*PI*%d*t)+0.2*sin(2*PI*%d*t)*gt(t\\,%g):s=%d:d=%g" % (f, 2 * f + 7, d / 2, rate, d),
    ])

# (extension, codec arguments, the rates the codec takes or None for any)
CODECS = [
    ("wav", ["-c:a", "pcm_s16le"], None),
    ("wav", ["-c:a", "pcm_u8"], None),
    ("wav", ["-c:a", "pcm_s24le"], None),
    ("wav", ["-c:a", "pcm_f32le"], None),
    ("wav", ["-c:a", "pcm_f64le"], None),
    ("wav", ["-c:a", "pcm_mulaw"], None),
    ("wav", ["-c:a", "pcm_alaw"], None),
    ("w64", ["-c:a", "pcm_s24le"], None),
    ("caf", ["-c:a", "pcm_s16le"], None),
    ("flac", ["-c:a", "flac"], None),
    ("ogg", ["-c:a", "libvorbis", "-q:a", "3"], None),
    ("opus", ["-c:a", "libopus", "-b:a", "64k"], [48000, 24000, 16000]),
    ("mp3", ["-c:a", "libmp3lame", "-b:a", "128k"], [8000, 11025, 16000, 22050, 32000, 44100, 48000]),
    ("mp3", ["-c:a", "libmp3lame", "-q:a", "7"], [22050, 44100, 48000]),
    ("m4a", ["-c:a", "aac", "-b:a", "96k"], None),
    ("aiff", ["-c:a", "pcm_s16be"], None),
    ("au", ["-c:a", "pcm_s16be"], None),
    ("mka", ["-c:a", "pcm_s16le"], None),
    ("webm", ["-c:a", "libopus", "-b:a", "48k"], [48000, 24000, 16000]),
]
RATES = [8000, 11025, 16000, 22050, 32000, 44100, 48000, 96000]
DURATIONS = [0.02, 0.05, 0.1, 0.5, 1, 2.5, 4]

count = 0
def render(src, rate, d, channels, codec, af=""):
    global count
    count += 1
    ext, args, rates = codec
    if rates and rate not in rates:
        rate = rng.choice(rates)
    if ext == "mp3":
        channels = min(channels, 2)
    path = os.path.join(out, "a%05d.%s" % (count, ext))
    cmd = ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", sources(rate, d) if src is None else src]
    if af:
        cmd += ["-af", af]
    subprocess.run(cmd + ["-ac", str(channels), "-ar", str(rate)] + args + [path], check=True)
    return path

def audio():
    rate, d = rng.choice(RATES), rng.choice(DURATIONS)
    return {"src": sources(rate, d), "rate": rate, "d": d, "channels": rng.choice([1, 1, 2, 2, 6]),
            "codec": rng.choice(CODECS)}

def special(kind):
    global count
    count += 1
    path = os.path.join(out, "s%05d" % count)
    if kind == "missing":
        return path + ".wav"
    if kind == "empty":
        open(path + ".mp3", "wb").close()
        return path + ".mp3"
    if kind == "text":
        with open(path + ".wav", "w") as f:
            f.write("not audio " * rng.choice([1, 100]))
        return path + ".wav"
    if kind == "nosamples":
        with wave.open(path + ".wav", "wb") as w:
            w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        return path + ".wav"
    if kind == "silent":
        return render("anullsrc=r=22050:cl=mono", 22050, 1, 1, ("wav", ["-c:a", "pcm_s16le", "-t", "1"], None))
    if kind == "film":
        # A video with a sound track, as a player's file: audioread's.
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10",
                        "-f", "lavfi", "-i", sources(44100, 1.5), "-t", "1.5", "-c:v", "mpeg4", "-c:a", "aac", "-ac", "2",
                        path + ".mp4"], check=True)
        return path + ".mp4"
    if kind == "video":
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10",
                        "-frames:v", "10", "-c:v", "mpeg4", path + ".mp4"], check=True)
        return path + ".mp4"
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=40x30", "-frames:v", "1",
                    path + ".png"], check=True)
    return path + ".png"

def variant(v):
    k = rng.randrange(12)
    w = dict(v)
    if k == 0:
        w["codec"] = rng.choice(CODECS)
    elif k == 1:
        w["rate"] = rng.choice(RATES)
    elif k == 2:
        w["af"] = "volume=%g" % rng.choice([0.25, 0.5, 2, 8])
    elif k == 3:
        w["af"] = "adelay=%d:all=1" % rng.choice([10, 100, 500])
    elif k == 4:
        w["af"] = "atempo=%g" % rng.choice([0.8, 1.25, 2])
    elif k == 5:
        w["af"] = "atrim=0:%g" % (v["d"] * rng.choice([0.3, 0.5, 0.9]))
    elif k == 6:
        w["af"] = "areverse"
    elif k == 7:
        w["af"] = rng.choice(["lowpass=f=1000", "highpass=f=2000", "afade=t=in:d=0.5"])
    elif k == 8:
        w["channels"] = rng.choice([1, 2, 6])
    elif k == 9:
        w["src"] = sources(v["rate"], v["d"])
    elif k == 10:
        w["d"] = rng.choice(DURATIONS)
        w["src"] = sources(v["rate"], w["d"])
    else:
        w["src"] = "anullsrc=r=%d:cl=mono" % v["rate"]
        w["af"] = "atrim=0:%g" % v["d"]
    return w

cases = []
for i in range(n):
    if rng.random() < 0.12:
        a = special(rng.choice(["missing", "empty", "text", "png", "nosamples", "silent", "video", "film"]))
        b = rng.choice([a, special(rng.choice(["missing", "text", "nosamples", "silent", "film"]))]) if rng.random() < 0.5 else render(**audio())
    else:
        v = audio()
        a = render(**v)
        b = a if rng.random() < 0.08 else render(**variant(v))
    if rng.random() < 0.5:
        a, b = b, a
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            score = float(vlc.compare_audios(a, b))
    except Exception as e:
        score = {"raise": type(e).__name__}
    if isinstance(score, float) and score != score:
        score = {"raise": "NaN"}
    cases.append({"metric": "compare_audios", "result": a, "expected": b, "options": {}, "score": score})
print(json.dumps(cases))
`

// TestCompareAudiosMatchesVLCPy scores random audio pairs with
// compare_audios here and in OSWorld's vlc.py, which loads them with
// librosa (soundfile, then audioread and the ffmpeg command for what
// libsndfile does not read), and wants the same scores to within
// audioTolerance. librosa (0.11), audioread and fastdtw are not in Debian:
// LIBROSA, AUDIOREAD and FASTDTW name checkouts of their sources
// (github.com/librosa/librosa, beetbox/audioread, slaypni/fastdtw).
// soundfile, numba, scikit-learn and libsoxr are Debian's
// (python3-soundfile, python3-numba, python3-sklearn, libsoxr0). It runs
// only when OSWORLD_REF names an OSWorld checkout.
func TestCompareAudiosMatchesVLCPy(t *testing.T) {
	metrics := osworldpy.MetricsDir(t)
	needTools(t, "ffmpeg", "ffprobe")
	path := pythonPathFrom(t, "import librosa, audioread, fastdtw, soundfile, scipy",
		"librosa, audioread and fastdtw (LIBROSA, AUDIOREAD, FASTDTW name their sources), soundfile (python3-soundfile), numba (python3-numba) or scikit-learn (python3-sklearn)",
		"LIBROSA", "AUDIOREAD", "FASTDTW")
	out := osworldpy.Run(t, audioPyDriver, path, metrics, t.TempDir(), "1", "300")
	cases := osworldpy.Cases(t, out)
	osworldpy.CompareWithin(t, cases, audioTolerance, func(c osworldpy.Case) (float64, error) {
		return Metrics()["compare_audios"].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}

// audioTolerance is how far a compare_audios score may be from OSWorld's:
// librosa computes in float32 and decoders differ in the last bits.
const audioTolerance = 1e-4
