package media

import (
	"context"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/osworldpy"
)

// imagePyDriver draws random images with PIL, each with a variant (the
// same image mirrored, darker, brighter, more or less saturated or
// contrasted, resized, a palette image, a JPEG, with alpha, or another
// image), and scores the pairs with the image metrics of OSWorld's
// gimp.py and vlc.py, printing osworldpy.Case JSON. argv: metrics
// directory, output directory, seed, number of cases.
const imagePyDriver = `
import json, random, os, io, contextlib
for name in ["acoustid", "librosa", "imagehash", "cv2"]:
    stub(name)
stub("fastdtw", fastdtw=None)
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
gimp = load("gimp", os.path.join(sys.argv[1], "gimp.py"))
vlc = load("vlc", os.path.join(sys.argv[1], "vlc.py"))
out, rng, n = sys.argv[2], random.Random(int(sys.argv[3])), int(sys.argv[4])

def image():
    w, h = rng.choice([5, 8, 16, 24, 40]), rng.choice([5, 8, 16, 24, 40])
    img = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    d = ImageDraw.Draw(img)
    for _ in range(rng.randrange(5)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        d.rectangle([x0, y0, x0 + rng.randrange(w), y0 + rng.randrange(h)], fill=tuple(rng.randrange(256) for _ in range(3)))
    for _ in range(rng.randrange(3) * w):
        img.putpixel((rng.randrange(w), rng.randrange(h)), tuple(rng.randrange(256) for _ in range(3)))
    return img
def variant(img):
    k = rng.randrange(12)
    if k == 0: return ImageOps.mirror(img)
    if k == 1: return ImageEnhance.Brightness(img).enhance(rng.choice([0.5, 0.9, 1.2]))
    if k == 2: return ImageEnhance.Color(img).enhance(rng.choice([0.5, 1.5, 2.0]))
    if k == 3: return ImageEnhance.Contrast(img).enhance(rng.choice([0.5, 1.5]))
    if k == 4: return img.resize((max(1, img.width * rng.choice([1, 2]) // rng.choice([1, 2])), img.height))
    if k == 5: return img.convert("P", palette=Image.ADAPTIVE, colors=rng.choice([4, 16]))
    if k == 6: return img.convert("L")
    if k == 7:
        a = img.convert("RGBA"); a.putalpha(rng.choice([0, 128, 255])); return a
    if k == 8: return image()
    if k == 9:
        # A tRNS chunk: PIL's info["transparency"], with or without alpha
        # in the mode.
        p = img.convert("P", palette=Image.ADAPTIVE, colors=8)
        p.info["transparency"] = rng.randrange(8)
        return p
    if k == 10:
        a = img.convert("RGBA")
        d = ImageDraw.Draw(a)
        d.rectangle([0, 0, a.width, rng.randrange(a.height)], fill=(0, 0, 0, 0))
        return a
    return img
def save(img, path):
    fmt = "JPEG" if img.mode in ("RGB", "L") and rng.random() < 0.2 else "PNG"
    kw = {"transparency": img.info["transparency"]} if fmt == "PNG" and "transparency" in img.info else {}
    img.save(path, fmt, quality=rng.choice([50, 95]), **kw)

METRICS = {"compare_images": vlc.compare_images}
for name in ["check_structure_sim", "check_structure_sim_resized", "check_brightness_decrease_and_structure_sim",
             "check_saturation_increase_and_structure_sim", "check_contrast_increase_and_structure_sim",
             "check_file_exists_and_structure_sim", "check_palette_and_structure_sim", "check_image_mirror",
             "check_green_background", "check_structure_sim_with_threshold", "check_image_size",
             "check_image_file_size", "compare_image_list", "check_textbox_on_leftside", "check_triangle_position"]:
    METRICS[name] = getattr(gimp, name)
cases = []
for i in range(n):
    m = rng.choice(sorted(METRICS))
    a, b = os.path.join(out, "a%05d.img" % i), os.path.join(out, "b%05d.img" % i)
    base = image()
    first, second = (variant(base), base) if rng.random() < 0.5 else (base, variant(base))
    save(first, a); save(second, b)
    options = {}
    if m == "compare_images" and rng.random() < 0.5:
        options["reference_base_result"] = rng.choice([0.5, 0.9])
    if m == "check_structure_sim_with_threshold" and rng.random() < 0.5:
        options["ssim_threshold"] = rng.choice([0.5, 0.85, 0.99])
    result, expected = a, b
    if m == "check_image_size":
        sizes = [5, 8, 16, 24, 40, 10, 20, 2, 0]
        expected = {k: rng.choice(sizes) for k in ["height", "width"] if rng.random() < 0.7}
        if rng.random() < 0.5:
            expected["ignore_transparent"] = rng.random() < 0.7
    elif m == "check_image_file_size":
        size = os.path.getsize(a)
        expected = {"max_size": rng.choice([size, size + 1, size - 1, 600000, 100])}
    elif m == "compare_image_list":
        c = os.path.join(out, "c%05d.img" % i)
        save(variant(base) if rng.random() < 0.5 else base, c)
        if rng.random() < 0.5:
            result, expected = [a, c], [b, rng.choice([c, a, b])]
    elif m == "check_textbox_on_leftside":
        # Dark text somewhere: the metric reads the leftmost dark pixel.
        img = Image.new("RGB", (rng.choice([20, 40, 100]), 10), (255, 255, 255))
        d = ImageDraw.Draw(img)
        for _ in range(rng.randrange(3)):
            x = rng.choice([0, 1, 2, 4, 5, 10, 30])
            d.rectangle([x, rng.randrange(10), x + 3, 9], fill=(rng.choice([0, 100, 127, 128, 200]),) * 3)
        save(img, a)
        expected = None
    elif m == "check_triangle_position":
        # A triangle near the middle or not, on a background, sometimes
        # with a blob of a third colour or smoothed edges, in the modes
        # the metric reads or raises on.
        w, h = rng.choice([20, 40, 41]), rng.choice([20, 40, 30])
        img = Image.new("RGB", (w, h), rng.choice([(255, 255, 255), (0, 0, 0), (10, 200, 10)]))
        d = ImageDraw.Draw(img)
        cx, cy, r = w / 2 + rng.choice([0, 0, 1, 2, 5]), h / 2 + rng.choice([0, 0, -1, 3, 8]), rng.choice([3, 5, 8])
        d.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=rng.choice([(255, 0, 0), (0, 0, 255), (128, 128, 128)]))
        for _ in range(rng.randrange(3)):
            x, y = rng.randrange(w), rng.randrange(h)
            d.rectangle([x, y, x + rng.randrange(3), y + rng.randrange(3)], fill=(200, 100, 0))
        if rng.random() < 0.2:
            img = img.resize((w * 2, h * 2), Image.BILINEAR)
        img = img.convert(rng.choice(["RGB", "RGB", "RGBA", "L", "P", "LA"]))
        img.save(a, "PNG")
        expected = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            args = [result] if m in ("check_textbox_on_leftside", "check_triangle_position") else [result, expected]
            score = float(METRICS[m](*args, **options))
    except Exception as e:
        score = {"raise": type(e).__name__}
    cases.append({"metric": m, "result": result, "expected": expected, "options": options, "score": score})
print(json.dumps(cases))
`

// TestImageMetricsMatchPy scores random image pairs with compare_images (7
// published tasks), compare_image_list (2), check_image_size (2),
// check_image_file_size, check_textbox_on_leftside, check_triangle_position
// and GIMP's other image checks here and in OSWorld's gimp.py
// and vlc.py (PIL, NumPy and scikit-image's SSIM), and wants the same
// scores (a negative SSIM is 0 here, on purpose). It runs only when
// OSWORLD_REF names an OSWorld checkout, with OSWORLD_PYTHON a Python with
// PIL, NumPy and scikit-image (Debian's python3-pil, python3-skimage).
func TestImageMetricsMatchPy(t *testing.T) {
	out := osworldpy.Run(t, imagePyDriver, nil, osworldpy.MetricsDir(t), t.TempDir(), "1", "2000")
	cases := osworldpy.Cases(t, out)
	for i, c := range cases {
		if f, ok := c.Score.(float64); ok && f < 0 {
			// compare_images returns a negative SSIM as it is; scores here
			// stay in [0, 1] (the runner README's differences on purpose).
			cases[i].Score = 0.0
		}
	}
	osworldpy.Compare(t, cases, func(c osworldpy.Case) (float64, error) {
		return Metrics()[c.Metric].Fn(context.Background(), c.Result, c.Expected, true, c.Options)
	})
}
