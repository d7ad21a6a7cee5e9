// pypdf's len(PdfReader(path).pages), which OSWorld's check_pdf_pages
// reads, run by `mutool run pdfpages.js PATH` (see pdfPages in pdf.go).
// OSWorld does not pin pypdf; this follows pypdf 6.16's _flatten, checked
// against it by TestCheckPDFPagesMatchesPdfPy. An encrypted file's count
// is its page tree's /Count. Any other file's is the number of leaves of
// its page tree:
//   - a node whose /Type is /Pages is a branch, /Page a page, and any other
//     /Type nothing; an untyped node is a branch when it has /Kids and a
//     page when not;
//   - a branch's /Kids may be missing or null (no kids); anything but an
//     array fails;
//   - a kid that Python finds false (an empty dictionary or array, 0, an
//     empty string) is passed over; one that is no dictionary fails, and a
//     null (or a reference to no object) makes pypdf walk the whole tree
//     again from inside, which always meets that null again and fails;
//   - a kid that is its own parent, or is on the path from the root to it,
//     fails; a page listed twice elsewhere counts twice;
//   - a tree deeper than 100 levels, or with more than 100,000 kids,
//     fails.
// The declared /Count and a linearization header's page count are not read
// for a file that is not encrypted: poppler's pdfinfo believes them, and an
// agent could set them to pass a page-count check with the wrong pages.
var doc = new PDFDocument(scriptArgs[0]);
var trailer = doc.getTrailer();
var present = function (o) { return o !== undefined && o !== null && !o.isNull(); };
var root = trailer.get("Root");
if (!present(root) || !present(root.get("Pages"))) throw new Error("no page tree");
var pages = root.get("Pages");
if (present(trailer.get("Encrypt"))) {
  print("count " + pages.get("Count").valueOf());
} else {
  if (!pages.isDictionary()) throw new Error("invalid object in /Pages");
  var n = 0, entries = 0, path = {};
  // falsy is Python's truth of a kid: what `if obj:` passes over.
  var falsy = function (o) {
    if (o.isArray()) return o.length === 0;
    if (o.isDictionary()) {
      var empty = true;
      o.forEach(function () { empty = false; });
      return empty;
    }
    if (o.isNumber()) return o.valueOf() === 0;
    if (o.isString()) return o.asString().length === 0;
    return false;
  };
  // typeName is what the node's /Type compares equal to in Python: a name
  // or a string holding "/Pages" or "/Page".
  var typeName = function (t) {
    if (t.isName()) return "/" + t.asName();
    if (t.isString()) return t.asString();
    return "";
  };
  // has is Python's `key in node`: mutool's get gives the same for a key
  // that is missing and one whose value is null.
  var has = function (node, key) {
    var found = false;
    node.forEach(function (k) { if (k == key) found = true; });
    return found;
  };
  // kidsOf gives the kids of a node to walk, null for a page or a node that
  // is neither, counting the page.
  var kidsOf = function (node, depth) {
    if (depth > 100) throw new Error("page tree deeper than 100 levels");
    if (!present(node)) throw new Error("page tree loops (a null kid)");
    if (!node.isDictionary()) throw new Error("a kid that is no dictionary");
    var type;
    if (has(node, "Type")) {
      var t = node.get("Type");
      type = present(t) ? typeName(t) : "";
    } else {
      type = has(node, "Kids") ? "/Pages" : "/Page";
    }
    if (type == "/Page") n++;
    if (type != "/Pages") return null;
    var kids = node.get("Kids");
    if (!present(kids)) return null;
    if (!kids.isArray()) throw new Error("/Kids is no array");
    return kids;
  };
  // The walk is depth first with a stack of its own (MuJS's is too small
  // for 100 levels of recursion); path holds the kids from the root down
  // to the node being walked.
  var rootRef = pages.isIndirect() ? pages.asIndirect() : null;
  var stack = [{ kids: kidsOf(pages, 0), ref: rootRef, key: "root", depth: 0, i: 0 }];
  while (stack.length > 0) {
    var top = stack[stack.length - 1];
    if (top.kids === null || top.i >= top.kids.length) {
      stack.pop();
      delete path[top.key];
      continue;
    }
    var i = top.i++;
    var kid = top.kids.get(i);
    var kidRef = present(kid) && kid.isIndirect() ? kid.asIndirect() : null;
    if (kidRef !== null && kidRef === top.ref) throw new Error("page tree loops");
    if (!present(kid)) throw new Error("page tree loops (a null kid)");
    if (falsy(kid)) continue;
    var kidKey = kidRef !== null ? "R" + kidRef : top.key + "/" + i;
    if (path[kidKey]) throw new Error("page tree loops");
    if (++entries > 100000) throw new Error("page tree has more than 100000 kids");
    path[kidKey] = true;
    stack.push({ kids: kidsOf(kid, top.depth + 1), ref: kidRef, key: kidKey, depth: top.depth + 1, i: 0 });
  }
  print("count " + n);
}
