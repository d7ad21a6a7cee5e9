# What OSWorld's compare_pdfs and compare_pdf_images read from PDFs, with
# PyMuPDF itself: the oracle of TestPDFsMatchPyMuPDF (pymupdf_test.go).
# For each path on the command line: the text of every page's get_text()
# joined and stripped (or the error), and for each image of each page's
# get_images(full=True) the image extract_image gives as PIL opens it:
# size, mode, the MD5 of its grey version and its perceptual hash (as
# imagehash.phash computes it), or why PIL could not open it. The first
# line of output names the versions; the second is the JSON.
import hashlib
import io
import json
import sys

import fitz
import numpy
from PIL import Image

import scipy.fftpack


def dct2(px):
    return scipy.fftpack.dct(scipy.fftpack.dct(px, axis=0), axis=1)


def phash(img):
    px = numpy.asarray(img.convert("L").resize((32, 32), Image.LANCZOS))
    low = dct2(px)[:8, :8]
    med = numpy.median(low)
    h = 0
    for i, v in enumerate((low > med).flatten()):
        if v:
            h |= 1 << i
    return "%016x" % h


out = {}
for path in sys.argv[1:]:
    r = {}
    try:
        text = ""
        with fitz.open(path) as pdf:
            for page in pdf:
                text += page.get_text()
        r["text"] = text.strip()
    except Exception as e:
        r["text_error"] = str(e)
    try:
        doc = fitz.open(path)
        images = []
        for pno in range(doc.page_count):
            for img in doc[pno].get_images(full=True):
                data = doc.extract_image(img[0])["image"]
                try:
                    pil = Image.open(io.BytesIO(data))
                    h = phash(pil)
                    images.append({"xref": img[0], "size": list(pil.size), "mode": pil.mode,
                                   "lmd5": hashlib.md5(pil.convert("L").tobytes()).hexdigest(),
                                   "phash": h})
                except Exception as e:
                    images.append({"xref": img[0], "skip": str(e)})
        r["images"] = images
    except Exception as e:
        r["images_error"] = str(e)
    out[path] = r
print(fitz.VersionBind, fitz.VersionFitz)
print(json.dumps(out))
