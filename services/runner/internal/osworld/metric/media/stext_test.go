package media

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// stextByDecoder is the reference reading of mutool's stext XML, through
// encoding/xml; stextToText scans by hand for speed and must agree.
func stextByDecoder(data []byte) (string, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = false
	var b strings.Builder
	var last rune
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "line":
				last = 0
			case "char":
				for _, a := range t.Attr {
					if a.Name.Local == "c" {
						b.WriteString(a.Value)
						if r, _ := utf8.DecodeLastRuneInString(a.Value); a.Value != "" {
							last = r
						}
					}
				}
			}
		case xml.EndElement:
			if t.Name.Local == "line" && last != 0 && last != '\n' {
				b.WriteByte('\n')
			}
		}
	}
}

// TestStextScannerAgreesWithDecoder: on the stext mutool writes for the
// LibreOffice PDFs of the tests, and on hand-written XML with escapes and
// '>' inside attribute values, the scanner reads what encoding/xml reads.
func TestStextScannerAgreesWithDecoder(t *testing.T) {
	inputs := map[string][]byte{
		"escapes": []byte(`<document><page><block><line wmode="0" dir="1 0"><font name="x>y" size="9">` +
			`<char quad="1 2" c="&quot;"/><char c='&amp;'/><char c="&gt;"/><char c=">"/><char c="&#x4e2d;"/></font></line>` +
			`<line/><line><char c="z" /></line></block></page></document>`),
	}
	if mutool, err := exec.LookPath("mutool"); err == nil {
		dir := officePDFs(t)
		pdfs, _ := filepath.Glob(filepath.Join(dir, "*.pdf"))
		for _, p := range pdfs {
			out := filepath.Join(t.TempDir(), "out.xml")
			if b, err := exec.Command(mutool, "convert", "-F", "stext", "-O", mutoolOptions, "-o", out, p).CombinedOutput(); err != nil {
				t.Fatalf("mutool: %v\n%s", err, b)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			inputs[filepath.Base(p)] = data
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("mutool (mupdf-tools) is not installed")
	}
	for name, data := range inputs {
		want, err := stextByDecoder(data)
		if err != nil {
			t.Fatalf("%s: decoder: %v", name, err)
		}
		got, err := stextToText(data)
		if err != nil || got != want {
			t.Errorf("%s: scanner got %q, %v; decoder %q", name, got, err, want)
		}
	}
}
