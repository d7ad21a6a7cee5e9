// pypdf's len(PdfReader(path).pages), which OSWorld's check_pdf_pages
// reads, run by `mutool run pdfpages.js PATH` (see pdfPages in pdf.go).
// An encrypted file's count is its page tree's /Count; any other file's
// is the number of leaves of its page tree, walked as pypdf's _flatten
// does: a node typed /Pages is a branch, one typed /Page a page, an
// untyped one a branch when it has /Kids and a page when not, and any
// other node nothing. The declared /Count and a linearization header's
// page count are not read: poppler's pdfinfo believes them, and an agent
// could set them to pass a page-count check with the wrong pages.
var doc = new PDFDocument(scriptArgs[0]);
var trailer = doc.getTrailer();
var present = function (o) { return o !== undefined && o !== null && !o.isNull(); };
var root = trailer.get("Root");
if (!present(root) || !present(root.get("Pages"))) throw new Error("no page tree");
var pages = root.get("Pages");
if (present(trailer.get("Encrypt"))) {
  print("count " + pages.get("Count").valueOf());
} else {
  var n = 0, seen = {};
  // Python's recursion limit (1,000 frames) ends pypdf's walk near here.
  var walk = function (node, depth) {
    if (depth > 900) throw new Error("page tree deeper than 900 levels");
    if (node.isIndirect()) {
      var num = node.asIndirect();
      if (seen[num]) throw new Error("page tree loops");
      seen[num] = true;
    }
    if (!node.isDictionary()) return;
    var t = node.get("Type"), kids = node.get("Kids");
    var type = present(t) && t.isName() ? t.asName() : (present(kids) ? "Pages" : "Page");
    if (type == "Pages") {
      if (!present(kids) || !kids.isArray()) throw new Error("page tree node without /Kids");
      for (var i = 0; i < kids.length; i++) walk(kids.get(i), depth + 1);
    } else if (type == "Page") {
      n++;
    }
  };
  walk(pages, 0);
  print("count " + n);
}
