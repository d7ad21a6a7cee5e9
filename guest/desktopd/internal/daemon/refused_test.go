package daemon

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestRefusedWritesLeaveNothing: an upload or download that is refused
// or fails leaves no trace, not even the parent directories the request
// would have created, and a form naming file_path twice is refused: the
// OSWorld server reads the first, a last-wins reader the second.
func TestRefusedWritesLeaveNothing(t *testing.T) {
	c := start(t, Config{Display: DisplayNone, MaxUpload: 1 << 20})
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)
	type part struct{ name, value string }
	upload := func(parts ...part) (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for _, p := range parts {
			if p.name == "file_data" {
				w, _ := mw.CreateFormFile(p.name, "f")
				_, _ = w.Write([]byte(p.value))
				continue
			}
			_ = mw.WriteField(p.name, p.value)
		}
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	big := string(bytes.Repeat([]byte("y"), 2<<20))
	tests := []struct {
		name  string
		path  string
		ctype string
		body  string
		want  int
		trace []string // paths under home that must not exist afterwards
	}{
		{
			name: "upload over the limit into new directories", path: "/setup/upload",
			want: 413, trace: []string{"up1"},
		},
		{
			name: "upload naming file_path twice", path: "/setup/upload",
			want: 400, trace: []string{"up2", "up3"},
		},
		{
			name: "download that fails into new directories", path: "/setup/download_file",
			ctype: "application/json", body: `{"url": "` + missing.URL + `/f", "path": "~/dl/sub/f"}`,
			want: 500, trace: []string{"dl"},
		},
	}
	tests[0].ctype, tests[0].body = upload(part{"file_path", "~/up1/sub/f"}, part{"file_data", big})
	tests[1].ctype, tests[1].body = upload(part{"file_path", "~/up2/f"}, part{"file_data", "data"}, part{"file_path", "~/up3/f"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := c.do("POST", tt.path, tt.ctype, bytes.NewReader([]byte(tt.body)))
			if code != tt.want {
				t.Errorf("POST %s got %d %.200s, want %d", tt.path, code, body, tt.want)
			}
			for _, p := range tt.trace {
				if _, err := os.Stat(filepath.Join(c.home, p)); err == nil {
					t.Errorf("POST %s answered %d but left ~/%s behind", tt.path, code, p)
				}
			}
		})
	}
	ents, err := os.ReadDir(c.home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("home holds %s after refused writes only", e.Name())
	}
}
