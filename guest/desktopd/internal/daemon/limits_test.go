package daemon

import (
	"bytes"
	"mime/multipart"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBodyLimitsAre413 sends bodies over their limit to every reader of a
// body (JSON, urlencoded and multipart forms, uploads): each is a 413,
// never a 400.
func TestBodyLimitsAre413(t *testing.T) {
	c := start(t, Config{Display: DisplayNone, MaxUpload: 1 << 20})
	big := strings.Repeat("x", 17<<20)
	multipartBody := func(field, value string) (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		_ = mw.WriteField(field, value)
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	mpType, mpBody := multipartBody("file_path", big)
	upType, upBody := func() (string, string) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		_ = mw.WriteField("file_path", filepath.Join(c.home, "up"))
		w, _ := mw.CreateFormFile("file_data", "up")
		_, _ = w.Write(bytes.Repeat([]byte("y"), 3<<20))
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}()
	tests := []struct {
		name, path, ctype, body string
	}{
		{"json object", "/execute", "application/json", `{"command": "` + big + `"}`},
		{"json array of actions", "/v1/actions", "application/json", `["` + big + `"]`},
		{"urlencoded form over net/http's 10 MiB", "/file", "application/x-www-form-urlencoded", "file_path=" + big[:11<<20]},
		{"urlencoded form over MaxBody", "/file", "application/x-www-form-urlencoded", "file_path=" + big},
		{"multipart form", "/file", mpType, mpBody},
		{"upload over MaxUpload", "/setup/upload", upType, upBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := c.do("POST", tt.path, tt.ctype, strings.NewReader(tt.body))
			if code != 413 {
				t.Errorf("POST %s (%d bytes) got %d %.200s, want 413", tt.path, len(tt.body), code, body)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(c.home, "up")); err == nil {
		t.Error("an upload over the limit was stored")
	}
}

// TestFilesRefuseNonRegular asks for files that are not regular: a FIFO
// (whose open or read would block for ever) and a device that never ends.
func TestFilesRefuseNonRegular(t *testing.T) {
	c := start(t, Config{Display: DisplayNone})
	fifo := filepath.Join(c.home, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	form := "application/x-www-form-urlencoded"
	js := "application/json"
	tests := []struct {
		name, path, ctype, body string
		want                    int
	}{
		{"file fifo", "/file", form, "file_path=" + fifo, 400},
		{"file device", "/file", form, "file_path=/dev/zero", 400},
		{"file directory", "/file", form, "file_path=" + c.home, 400},
		{"wallpaper fifo", "/setup/change_wallpaper", js, `{"path": "` + fifo + `"}`, 400},
		{"wallpaper device", "/setup/change_wallpaper", js, `{"path": "/dev/zero"}`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				code, _, body := c.do("POST", tt.path, tt.ctype, strings.NewReader(tt.body))
				if code != tt.want {
					t.Errorf("POST %s %s got %d %.200s, want %d", tt.path, tt.body, code, body, tt.want)
				}
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("POST %s %s still running after 10s", tt.path, tt.body)
			}
		})
	}
	// A regular file is still served, whole.
	if err := os.WriteFile(filepath.Join(c.home, "f.txt"), []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, body := c.do("POST", "/file", form, strings.NewReader("file_path=~/f.txt")); code != 200 || string(body) != "hello" {
		t.Errorf("/file of a regular file got %d %q, want 200 hello", code, body)
	}
}

func TestResolveToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flag, file, env string
		want                  string
		wantErr               bool
	}{
		{name: "env", env: "from-env", want: "from-env"},
		{name: "file over env", file: file, env: "from-env", want: "from-file"},
		{name: "flag", flag: "from-flag", want: "from-flag"},
		{name: "flag and file", flag: "x", file: file, wantErr: true},
		{name: "empty file", file: empty, wantErr: true},
		{name: "device", file: "/dev/zero", wantErr: true},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: true},
		{name: "none", want: ""},
	}
	for _, tt := range tests {
		got, err := ResolveToken(tt.flag, tt.file, tt.env)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: ResolveToken(%q, %q, %q) = %q, %v; want %q, error %v", tt.name, tt.flag, tt.file, tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}
