// The images OSWorld's compare_pdf_images reads from a PDF with PyMuPDF
// 1.21, run by `mutool run pdfimages.js PATH DIR MAXIMAGES MAXPIXELS`
// (see pdfImages in pdf.go): for each page, page.get_images() and, for
// each image listed, the bytes doc.extract_image(xref)["image"] that PIL
// then opens.
//
// get_images lists the image XObjects of the page's resources (inherited
// from the page tree), then those of the resources of each XObject that
// has resources, depth first (JM_scan_resources): an image under two
// names is listed twice; one the page never draws is listed; inline
// images, soft masks, and images of patterns, Type 3 glyphs and
// annotations are not. Each form is scanned once a page: meeting one again
// ends the scan of the resources it is met in, and a resources dictionary
// met inside itself is not scanned.
//
// extract_image gives a JPX image's stream with its other filters
// undone, a stream whose raw bytes begin as an image file (a JPEG behind
// DCTDecode alone) as those bytes, and any other image decoded by MuPDF as
// a PNG, grey or RGB (converted). It raises when the bytes it returns are
// not an image MuPDF reads, or when the xref is not an image; OSWorld
// then scores 0.
//
// The output is one line per image listed, "image FILE" (the file in DIR
// holds the bytes PIL would open; for JPX, MuPDF's decoding as a PNG,
// since the runner has no JPEG 2000 decoder) or "size W H" (an image of
// more than MAXPIXELS pixels, not decoded), then "count N". More than
// MAXIMAGES images listed print "count N" alone; an extraction that would
// raise prints "raise REASON" and stops.
var path = scriptArgs[0], dir = scriptArgs[1];
var maxImages = parseInt(scriptArgs[2], 10), maxPixels = parseInt(scriptArgs[3], 10);
var doc = new Document(path);
if (!doc.isPDF()) {
  print("count 0");
  quit();
}
if (doc.needsPassword()) throw new Error("document is encrypted");

var present = function (o) { return o !== undefined && o !== null; };
var isName = function (o, n) { return present(o) && o.isName() && o.asName() == n; };
var num = function (o) { return present(o) && o.isIndirect() ? o.asIndirect() : 0; };

// The resources of page i, inherited as pdf_dict_get_inheritable does.
var pageResources = function (i) {
  var node = doc.findPage(i);
  for (var depth = 0; present(node) && depth < 64; depth++) {
    var r = node.get("Resources");
    if (present(r)) return r;
    node = node.get("Parent");
  }
  return null;
};

var listed = [];
var total = 0;
var scan = function (rsrc, tracer, marked) {
  var key = rsrc.isIndirect() ? rsrc.asIndirect() : -1;
  if (key >= 0 && marked[key]) return;
  if (key >= 0) marked[key] = true;
  try {
    var xobj = rsrc.isDictionary() ? rsrc.get("XObject") : null;
    var vals = [];
    if (present(xobj) && xobj.isDictionary()) xobj.forEach(function (k, v) { vals.push(v); });
    for (var i = 0; i < vals.length; i++) {
      var v = vals[i];
      if (!v.isDictionary() || !isName(v.get("Subtype"), "Image")) continue;
      total++;
      if (total <= maxImages) listed.push(num(v));
    }
    for (var j = 0; j < vals.length; j++) {
      var o = vals[j];
      if (!o.isDictionary()) continue;
      var sub = o.get("Resources");
      if (!present(sub)) continue;
      var sx = o.isStream() ? num(o) : 0;
      if (tracer[sx]) return;
      tracer[sx] = true;
      scan(sub, tracer, marked);
    }
  } finally {
    if (key >= 0) delete marked[key];
  }
};

var pages = doc.countPages();
for (var p = 0; p < pages; p++) {
  var r = pageResources(p);
  if (present(r)) scan(r, {}, {});
}
if (total > maxImages) {
  print("count " + total);
  quit();
}

// fz_recognize_image_format on a stream's first bytes.
var recognize = function (b) {
  var at = function (i) { return i < b.length ? b[i] : -1; };
  var P = 0x50, B = 0x42;
  if (at(0) == P && at(1) >= 0x31 && at(1) <= 0x37) return "pnm";
  if (at(0) == P && (at(1) == 0x46 || at(1) == 0x66)) return "pnm";
  if (at(0) == 0xff && at(1) == 0x4f) return "jpx";
  if (at(0) == 0 && at(1) == 0 && at(2) == 0 && at(3) == 0x0c && at(4) == 0x6a && at(5) == 0x50 && at(6) == 0x20 && at(7) == 0x20) return "jpx";
  if (at(0) == 0xff && at(1) == 0xd8) return "jpeg";
  if (at(0) == 137 && at(1) == 80 && at(2) == 78 && at(3) == 71 && at(4) == 13 && at(5) == 10 && at(6) == 26 && at(7) == 10) return "png";
  if (at(0) == 0x49 && at(1) == 0x49 && at(2) == 0xbc) return "jxr";
  if (at(0) == 0x49 && at(1) == 0x49 && at(2) == 42 && at(3) == 0) return "tif";
  if (at(0) == 0x4d && at(1) == 0x4d && at(2) == 0 && at(3) == 42) return "tif";
  if (at(0) == 0x47 && at(1) == 0x49 && at(2) == 0x46) return "gif";
  if (at(0) == B && (at(1) == 0x4d || at(1) == 0x41)) return "bmp";
  if (at(0) == 0x97 && at(1) == 0x4a && at(2) == 0x42 && at(3) == 0x32 && at(4) == 13 && at(5) == 10 && at(6) == 0x1a && at(7) == 10) return "jb2";
  return null;
};

var isJPX = function (obj) {
  var f = obj.get("Filter");
  if (isName(f, "JPXDecode")) return true;
  if (present(f) && f.isArray()) {
    for (var i = 0; i < f.length; i++) if (isName(f.get(i), "JPXDecode")) return true;
  }
  return false;
};

// writePNG writes a pixmap as fz_new_buffer_from_image_as_png does: grey
// and RGB as they are, any other colour space converted to RGB.
var writePNG = function (pix, file) {
  // A mask's pixmap has no colour space, which MuJS shows as "None".
  var cs = pix.getColorSpace();
  var name = present(cs) ? cs.toString() : "None";
  if (name != "None" && name != "DeviceGray" && name != "DeviceRGB") {
    var w = pix.getWidth(), h = pix.getHeight();
    var rgb = new Pixmap(DeviceRGB, [0, 0, w, h], pix.getAlpha());
    rgb.clear(pix.getAlpha() ? undefined : 255);
    var dev = new DrawDevice([1, 0, 0, 1, 0, 0], rgb);
    dev.fillImage(new Image(pix), [w, 0, 0, h, 0, 0], 1, {});
    dev.close();
    pix = rgb;
  }
  pix.saveAsPNG(file);
};

var done = {};
var extract = function (xref) {
  if (done[xref] !== undefined) return done[xref];
  if (xref < 1 || xref >= doc.countObjects()) throw { raise: "bad xref " + xref };
  var obj = doc.newIndirect(xref, 0);
  if (!isName(obj.get("Subtype"), "Image")) throw { raise: "xref " + xref + " is not an image" };
  var name = "img-" + xref, file = dir + "/" + name;
  var kind = null, res = null;
  if (isJPX(obj)) {
    kind = "jpx";
    res = obj.readStream();
  } else {
    res = obj.readRawStream();
    kind = recognize(res);
  }
  var line;
  if (kind === null) {
    var w = obj.get("Width"), h = obj.get("Height");
    if (!present(w)) w = obj.get("W");
    if (!present(h)) h = obj.get("H");
    // pdf_to_int.
    w = present(w) && w.isNumber() ? Math.floor(Math.abs(w.valueOf())) * (w.valueOf() < 0 ? -1 : 1) : 0;
    h = present(h) && h.isNumber() ? Math.floor(Math.abs(h.valueOf())) * (h.valueOf() < 0 ? -1 : 1) : 0;
    if (w * h > maxPixels) {
      line = "size " + w + " " + h;
    } else {
      writePNG(doc.loadImage(obj).toPixmap(), file + ".png");
      line = "image " + name + ".png";
    }
  } else {
    res.save(file + "." + kind);
    var img;
    try {
      img = new Image(file + "." + kind);
    } catch (e) {
      throw { raise: "xref " + xref + ": " + e };
    }
    if (kind == "jpx") {
      if (img.getWidth() * img.getHeight() > maxPixels) {
        line = "size " + img.getWidth() + " " + img.getHeight();
      } else {
        writePNG(img.toPixmap(), file + ".png");
        line = "image " + name + ".png";
      }
    } else {
      line = "image " + name + "." + kind;
    }
  }
  done[xref] = line;
  return line;
};

try {
  for (var k = 0; k < listed.length; k++) print(extract(listed[k]));
} catch (e) {
  if (e.raise === undefined) throw e;
  print("raise " + e.raise);
  quit();
}
print("count " + total);
