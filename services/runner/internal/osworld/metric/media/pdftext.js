// PyMuPDF's text of a document, every page's page.get_text() one after
// the other, run by `mutool run pdftext.js PATH [RULES]` (see pdfText in
// pdf.go). It writes what PyMuPDF's JM_print_stext_page_as_text writes
// before Python decodes it: for each line of MuPDF's structured text
// (TEXT_PRESERVE_WHITESPACE, TEXT_PRESERVE_LIGATURES, TEXT_MEDIABOX_CLIP),
// the UTF-8 of each character whose box the page keeps (see the rules
// below), then a newline unless the line ended with one (or with no
// character). A NUL character goes out as C0 80, the only way a MuJS
// string holds it.
//
// PyMuPDF differs from mutool's structured text in ways copied here: it
// reads a turned page as if it were not turned (get_textpage sets
// /Rotate 0 while it extracts); it tests each character's box against the
// page itself, where MuPDF's clip drops only those wholly outside; and the
// box it tests is the character's quad made at least one font size tall
// when the font's ascender and descender span less than an em
// (JM_char_quad), with a glyph of no width given its advance.
//
// The walk gives each character's quad, origin and size but not the
// font's ascender and descender JM_char_quad starts from: they are read
// off the quad, exact unless the glyph matrix stretches one way more than
// the other (Tz, or a page scaled unevenly), where a font spanning just
// under an em can be taken for one that spans more, or the reverse.
//
// scriptArgs[1] picks the PyMuPDF whose rules are followed: "1.26" (the
// default), the version OSWorld pins, or "1.21", the version Debian 12
// packages, which tests run beside it. The two differ in two places
// (PyMuPDF's JM_print_stext_page_as_text and JM_append_rune): 1.26 keeps
// a character whose box overlaps the page at all (JM_rects_overlap), 1.21
// only one whose box the page contains; and 1.26 writes a lone surrogate
// as one U+FFFD (an escape Python decodes), 1.21 as the three bytes of
// its UTF-8 form, which Python decodes as three. The script writes those
// three bytes either way; mutoolText decodes them by the version's rule.
var doc = new Document(scriptArgs[0]);
var rules126 = scriptArgs.length < 2 || scriptArgs[1] != "1.21";
if (doc.needsPassword()) throw new Error("document needs a password");
var isPDF = doc.isPDF();

var FLT_EPSILON = 1.1920929e-7;

// Rotate's value as PyMuPDF's Page.rotation reads it (pdf_to_int of the
// inherited entry; anything but a multiple of 90 is 0).
var pageRotation = function (obj) {
  for (var depth = 0; obj !== undefined && obj !== null && depth < 64; depth++) {
    var r = obj.get("Rotate");
    if (r !== undefined && r !== null && !r.isNull()) {
      if (!r.isNumber()) return 0;
      var v = r.valueOf();
      v = v < 0 ? Math.ceil(v) : Math.floor(v);
      while (v < 0) v += 360;
      while (v >= 360) v -= 360;
      return v % 90 != 0 ? 0 : v;
    }
    obj = obj.get("Parent");
  }
  return 0;
};

// The code point of a character string from StructuredText.walk (a
// surrogate pair for one past the BMP; "" for NUL).
var codePoint = function (c) {
  if (c.length == 0) return 0;
  var hi = c.charCodeAt(0);
  if (hi >= 0xd800 && hi < 0xdc00 && c.length > 1) {
    var lo = c.charCodeAt(1);
    if (lo >= 0xdc00 && lo < 0xe000) return (hi - 0xd800) * 0x400 + (lo - 0xdc00) + 0x10000;
  }
  return hi;
};

var tq = function (x, y, m) { return [x * m[0] + y * m[2] + m[4], x * m[1] + y * m[3] + m[5]]; };

// JM_char_quad for a horizontal line of direction (dx, dy): the quad
// itself when the font's ascender less its descender is at least 1. The
// stext quad spans them scaled by the glyph matrix; they are read off it
// taking that matrix as a rotation scaled by size (true unless the text
// is stretched, e.g. by Tz).
var charQuad = function (q, origin, size, font, c, dx, dy) {
  var ox = origin[0], oy = origin[1];
  // Up from the baseline is (dy, -dx) on the page, whose y runs down;
  // on text turned upside down by its matrix the ascender lies below.
  var up = (q[0] - q[4]) * dy - (q[1] - q[5]) * dx < 0 ? -1 : 1;
  var asc = up * ((q[0] - ox) * dy - (q[1] - oy) * dx) / size;
  var dsc = up * ((q[4] - ox) * dy - (q[5] - oy) * dx) / size;
  var ascDsc = asc - dsc + FLT_EPSILON;
  if (!(size > 0) || ascDsc >= 1 - 1e-4) return q;
  if (asc < 1e-3) { dsc = -0.1; asc = 0.9; ascDsc = 1; }
  if (ascDsc < 1) { dsc = dsc / ascDsc; asc = asc / ascDsc; }
  ascDsc = asc - dsc;
  asc = asc * size / ascDsc;
  dsc = dsc * size / ascDsc;
  var cs = dx, sn = dy;
  var trm1 = [cs, -sn, sn, cs, 0, 0], trm2 = [cs, sn, -sn, cs, 0, 0];
  if (cs == -1) { trm1[3] = 1; trm2[3] = 1; }
  var p = [];
  for (var i = 0; i < 8; i += 2) p.push(tq(q[i] - ox, q[i + 1] - oy, trm1));
  // p: ul, ur, ll, lr
  if (cs == 1 && p[0][1] > 0) {
    p[0][1] = asc; p[1][1] = asc; p[2][1] = dsc; p[3][1] = dsc;
  } else {
    p[0][1] = -asc; p[1][1] = -asc; p[2][1] = -dsc; p[3][1] = -dsc;
  }
  if (p[2][0] < 0) { p[2][0] = 0; p[0][0] = 0; }
  if (p[3][0] - p[2][0] < FLT_EPSILON) {
    var glyph = font.encodeCharacter(c);
    if (glyph) {
      p[3][0] = p[2][0] + font.advanceGlyph(glyph, 0) * size;
      p[1][0] = p[3][0];
    }
  }
  var out = [];
  for (var j = 0; j < 4; j++) {
    var t = tq(p[j][0], p[j][1], trm2);
    out.push(t[0] + ox, t[1] + oy);
  }
  return out;
};

// The walker keeps to plain arithmetic, reading as little of each
// character as it can: it runs for every character, and MuJS calls and
// array reads are slow. A character whose font needs no correction lies
// within its line's box, so a line inside the page keeps all of those.
// PyMuPDF's last_char is the last character kept ("" is NUL).
var page, rect, valid, parts, lastC, wmode, dx, dy, lineInside, fast;
var NUL = String.fromCharCode(0);

// inPage is fz_contains_rect(page, fz_rect_from_quad(quad)), with
// fz_min and fz_max; a vertical line's box is at least size tall
// (JM_char_bbox). A valid page rect holds any invalid box.
var inPage = function (q, size) {
  var ulx = q[0], uly = q[1], urx = q[2], ury = q[3], llx = q[4], lly = q[5], lrx = q[6], lry = q[7];
  var t1 = llx < lrx ? llx : lrx, t2 = ulx < urx ? ulx : urx;
  var x0 = t1 < t2 ? t1 : t2;
  t1 = lly < lry ? lly : lry; t2 = uly < ury ? uly : ury;
  var y0 = t1 < t2 ? t1 : t2;
  t1 = llx > lrx ? llx : lrx; t2 = ulx > urx ? ulx : urx;
  var x1 = t1 > t2 ? t1 : t2;
  t1 = lly > lry ? lly : lry; t2 = uly > ury ? uly : ury;
  var y1 = t1 > t2 ? t1 : t2;
  if (wmode && y1 < y0 + size) y0 = y1 - size;
  if (rules126) return !(rect[0] >= x1 || rect[1] >= y1 || rect[2] <= x0 || rect[3] <= y0);
  if (!valid) return false;
  if (!(x0 <= x1 && y0 <= y1)) return true;
  return rect[0] <= x0 && rect[1] <= y0 && rect[2] >= x1 && rect[3] >= y1;
};

// add appends a character when PyMuPDF keeps it, (dx, dy) being its
// line's direction.
var add = function (c, origin, font, size, quad, dx, dy) {
  if (wmode) {
    if (!inPage(quad, size)) return;
  } else {
    var k;
    if (dx === 1 && dy === 0)
      k = Math.abs(quad[5] - quad[1]) / size;
    else
      k = Math.abs((quad[0] - quad[4]) * dy - (quad[1] - quad[5]) * dx) / size;
    if (size > 0 && k + FLT_EPSILON < 1 - 1e-4) {
      if (!inPage(charQuad(quad, origin, size, font, codePoint(c), dx, dy), size)) return;
    } else if (!lineInside && !inPage(quad, size)) {
      return;
    }
  }
  lastC = c;
  parts.push(c === "" ? NUL : c);
};

// A line's direction is its first character's (MuPDF's line->dir), read
// off the baseline of the first character that advances: characters
// before it wait in pending. A line with none is taken as upright.
var pending;
var flush = function (dx, dy) {
  for (var i = 0; i < pending.length; i++) {
    var p = pending[i];
    add(p[0], p[1], p[2], p[3], p[4], dx, dy);
  }
  pending = [];
};
var walker = {
  beginLine: function (bbox, wm) {
    parts = []; pending = []; lastC = ""; wmode = wm; dx = null; fast = false;
    // Under 1.26's rule a box of no area on the page's edge does not
    // overlap it, so there the line must lie strictly inside.
    if (rules126)
      lineInside = !wm && rect[0] < bbox[0] && rect[1] < bbox[1] && rect[2] > bbox[2] && rect[3] > bbox[3];
    else
      lineInside = valid && !wm && rect[0] <= bbox[0] && rect[1] <= bbox[1] && rect[2] >= bbox[2] && rect[3] >= bbox[3];
  },
  onChar: function (c, origin, font, size, quad) {
    if (fast) {
      // add's common case inline: an upright line inside the page, a
      // font that needs no correction.
      var k = quad[5] - quad[1];
      if (k < 0) k = -k;
      if (!(size > 0) || k / size + FLT_EPSILON >= 1 - 1e-4) {
        lastC = c;
        parts.push(c === "" ? NUL : c);
        return;
      }
    }
    if (dx === null) {
      var ux = quad[6] - quad[4], uy = quad[7] - quad[5], un = Math.sqrt(ux * ux + uy * uy);
      if (!(un > 0) && !wmode) {
        pending.push([c, origin, font, size, quad]);
        return;
      }
      dx = un > 0 ? ux / un : 1; dy = un > 0 ? uy / un : 0;
      fast = lineInside && dx === 1 && dy === 0;
      if (pending.length > 0) flush(dx, dy);
    }
    add(c, origin, font, size, quad, dx, dy);
  },
  endLine: function () {
    if (pending.length > 0) {
      // The quad's upright side, turned a quarter.
      var q = pending[0][4], vx = q[0] - q[4], vy = q[1] - q[5], vn = Math.sqrt(vx * vx + vy * vy);
      if (vn > 0) flush(-vy / vn, vx / vn); else flush(1, 0);
    }
    if (lastC !== "" && lastC !== "\n") parts.push("\n");
    if (parts.length > 0) write(parts.join(""));
  }
};

var n = doc.countPages();
for (var i = 0; i < n; i++) {
  page = doc.loadPage(i);
  if (isPDF) {
    var obj = doc.findPage(i);
    if (pageRotation(obj) != 0) obj.put("Rotate", 0);
  }
  rect = page.bound();
  valid = rect[0] <= rect[2] && rect[1] <= rect[3];
  // PyMuPDF runs the page with its annotations and form fields
  // (fz_run_page); Page.toStructuredText runs its contents alone. A page
  // with either goes through a display list, which runs the whole page
  // but leaves out what has no area (a clip of zero size, and what it
  // clips): the direct run is kept for the pages that can take it.
  var st, opts = "preserve-whitespace,preserve-ligatures";
  if (isPDF && (page.getAnnotations().length > 0 || page.getWidgets().length > 0))
    st = page.toDisplayList().toStructuredText(opts);
  else
    st = page.toStructuredText(opts);
  st.walk(walker);
}
