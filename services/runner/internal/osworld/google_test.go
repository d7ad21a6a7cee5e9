package osworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

func TestLoadGoogleSettings(t *testing.T) {
	f := newFakeGoogle(t)
	tests := []struct {
		name    string
		edit    func(dir string)
		wantErr []string // substrings of the error; nil for success
		check   func(t *testing.T, g *GoogleSettings)
	}{
		{name: "OSWorld's shape", check: func(t *testing.T, g *GoogleSettings) {
			if g.Drive == nil || g.Account == nil {
				t.Fatalf("Drive %v, Account %v: want both", g.Drive, g.Account)
			}
			want := DriveAuth{SettingsFile: filepath.Join(g.Dir, "googledrive/settings.yml"), CredentialsFile: filepath.Join(g.Dir, "googledrive/credentials.json"),
				ClientID: f.clientID, ClientSecret: f.clientSecret, RefreshToken: "refresh-1", TokenURL: f.srv.URL + "/token",
				Scopes: []string{"https://www.googleapis.com/auth/drive"}, AccessToken: "stale", Expiry: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
			if !reflect.DeepEqual(*g.Drive, want) {
				t.Errorf("Drive = %+v\nwant %+v", *g.Drive, want)
			}
			if g.Account.Email != "agent@example.com" || g.Account.Password != "s3cret pass" {
				t.Errorf("Account = %+v", *g.Account)
			}
		}},
		{name: "client from client_secrets.json", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": "r"}`)
		}, check: func(t *testing.T, g *GoogleSettings) {
			if g.Drive.ClientID != f.clientID || g.Drive.ClientSecret != f.clientSecret || g.Drive.TokenURL != f.srv.URL+"/token" || g.Drive.AccessToken != "" {
				t.Errorf("Drive = %+v: want the client and token_uri of client_secrets.json, no access token", *g.Drive)
			}
		}},
		{name: "inline client_config", edit: func(dir string) {
			write(t, dir, "googledrive/settings.yml", "client_config_backend: settings\nclient_config:\n  client_id: inline-id\n  client_secret: inline-secret\nsave_credentials_file: creds.json\n")
			write(t, dir, "googledrive/creds.json", `{"refresh_token": "r"}`)
		}, check: func(t *testing.T, g *GoogleSettings) {
			if g.Drive.ClientID != "inline-id" || g.Drive.TokenURL != defaultTokenURL {
				t.Errorf("Drive = %+v", *g.Drive)
			}
		}},
		{name: "account only", edit: func(dir string) { os.RemoveAll(filepath.Join(dir, "googledrive")) }, check: func(t *testing.T, g *GoogleSettings) {
			if g.Drive != nil || g.Account == nil {
				t.Errorf("Drive %v, Account %v", g.Drive, g.Account)
			}
		}},
		{name: "empty folder", edit: func(dir string) {
			os.RemoveAll(filepath.Join(dir, "googledrive"))
			os.RemoveAll(filepath.Join(dir, "google"))
		}, wantErr: []string{"neither googledrive/settings.yml nor google/settings.json"}},
		{name: "no save_credentials_file", edit: func(dir string) {
			write(t, dir, "googledrive/settings.yml", "client_config_backend: file\n")
		}, wantErr: []string{"settings.yml", "save_credentials_file is required"}},
		{name: "credentials file missing", edit: func(dir string) {
			os.Remove(filepath.Join(dir, "googledrive/credentials.json"))
		}, wantErr: []string{"settings.yml", "save_credentials_file", "credentials.json"}},
		{name: "credentials not JSON", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": `)
		}, wantErr: []string{"credentials.json"}},
		{name: "no refresh_token", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"access_token": "a", "client_id": "c", "client_secret": "s"}`)
		}, wantErr: []string{"credentials.json", "refresh_token is missing"}},
		{name: "bad token_expiry", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": "r", "client_id": "c", "client_secret": "s", "token_expiry": "tomorrow"}`)
		}, wantErr: []string{"credentials.json", "token_expiry"}},
		{name: "client secret nowhere", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": "r"}`)
			write(t, dir, "googledrive/client_secrets.json", `{"installed": {"client_id": "c"}}`)
		}, wantErr: []string{"client_secrets.json", "client_secret is missing"}},
		{name: "client_secrets.json of no known shape", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": "r"}`)
			write(t, dir, "googledrive/client_secrets.json", `{"other": {}}`)
		}, wantErr: []string{"client_secrets.json", `no "installed" or "web" client`}},
		{name: "token_uri not a URL", edit: func(dir string) {
			write(t, dir, "googledrive/credentials.json", `{"refresh_token": "r", "client_id": "c", "client_secret": "s", "token_uri": "ftp:x"}`)
		}, wantErr: []string{"credentials.json", "token_uri"}},
		{name: "settings.yml not YAML", edit: func(dir string) {
			write(t, dir, "googledrive/settings.yml", "save_credentials_file: [\n")
		}, wantErr: []string{"settings.yml"}},
		{name: "no password", edit: func(dir string) {
			write(t, dir, "google/settings.json", `{"email": "a@b.c"}`)
		}, wantErr: []string{"google/settings.json", "password is missing"}},
		{name: "account not JSON", edit: func(dir string) {
			write(t, dir, "google/settings.json", `email: a`)
		}, wantErr: []string{"google/settings.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := googleFolder(t, f, "refresh-1")
			if tt.edit != nil {
				tt.edit(dir)
			}
			g, err := LoadGoogleSettings(dir)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("LoadGoogleSettings = %+v, want an error", g)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, g)
		})
	}
	if _, err := LoadGoogleSettings(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a missing folder: %v, want an error naming it", err)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A published task (multi_apps/22a4636f-...) with all three account names.
const driveTask = `{"id": "22a4636f", "instruction": "x", "config": [
  {"type": "googledrive", "parameters": {"settings_file": "evaluation_examples/settings/googledrive/settings.yml", "operation": ["delete", "mkdirs"], "args": [{"query": "title = 'Meeting-Agenda.docx' or title = 'Meeting-Agenda.pdf'", "trash": false}, {"path": ["meetings"]}]}},
  {"type": "login", "parameters": {"settings_file": "evaluation_examples/settings/google/settings.json", "platform": "googledrive"}}],
 "evaluator": {"func": "compare_pdfs", "result": {"type": "googledrive_file", "settings_file": "evaluation_examples/settings/googledrive/settings.yml", "path": ["meetings", "Meeting-Agenda.pdf"], "dest": "Meeting-Agenda.pdf"}, "expected": {"type": "cloud_file", "path": "https://example.com/a.pdf", "dest": "a.pdf"}}}`

func TestMissingForGoogleSettings(t *testing.T) {
	f := newFakeGoogle(t)
	task, err := ParseTask([]byte(driveTask))
	if err != nil {
		t.Fatal(err)
	}
	full := googleFolder(t, f, "refresh-1")
	driveOnly := googleFolder(t, f, "refresh-1")
	os.RemoveAll(filepath.Join(driveOnly, "google"))
	load := func(dir string) *GoogleSettings {
		g, err := LoadGoogleSettings(dir)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	tests := []struct {
		name string
		g    *GoogleSettings
		want []Missing
	}{
		{name: "none", want: []Missing{
			{Kind: "step", Name: "googledrive", Reason: "needs a Google Drive account: give the runner --google-settings"},
			{Kind: "step", Name: "login", Reason: "needs a Google account login: give the runner --google-settings"},
			{Kind: "getter", Name: "googledrive_file", Reason: "needs a Google Drive account: give the runner --google-settings"},
		}},
		{name: "full", g: load(full)},
		{name: "drive only", g: load(driveOnly), want: []Missing{
			{Kind: "step", Name: "login", Reason: "needs a Google account login: the Google settings folder has no google/settings.json"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := task.MissingFor(Offer{Google: tt.g}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MissingFor = %+v\nwant %+v", got, tt.want)
			}
		})
	}
	if got := task.Missing(); len(got) != 3 {
		t.Errorf("Missing() = %+v, want the three refusals", got)
	}
}

func TestDriveQuery(t *testing.T) {
	tests := []struct{ in, want string }{
		{"title = 'emails' and 'root' in parents", "name = 'emails' and 'root' in parents"},
		{"title = 'title' or title contains 'a\\'title'", "name = 'title' or name contains 'a\\'title'"},
		{`"root" in parents and title = "x title"`, `"root" in parents and name = "x title"`},
		{"modifiedDate > '2024-01-01' and subtitle = 'x'", "modifiedTime > '2024-01-01' and subtitle = 'x'"},
		{"( title = 'unterminated", "( name = 'unterminated"},
	}
	for _, tt := range tests {
		if got := driveQuery(tt.in); got != tt.want {
			t.Errorf("driveQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func driveSession(t *testing.T, g *GoogleSettings) *Session {
	return &Session{TaskID: "drive", CacheDir: filepath.Join(t.TempDir(), "drive"), Google: g}
}

func runJSON(t *testing.T, s *Session, steps string) error {
	t.Helper()
	var l []Step
	if err := json.Unmarshal([]byte(steps), &l); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.Run(ctx, l)
}

// TestGoogleDriveStepsAndGetter runs the published tasks' googledrive
// operations and getter forms against the stand-in.
func TestGoogleDriveStepsAndGetter(t *testing.T) {
	f := newFakeGoogle(t)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%%PDF-1.4 content of %s", r.URL.Path)
	}))
	t.Cleanup(files.Close)

	// The Drive before the task: what the deletes must remove, and what
	// they must leave.
	old := f.add("meetings", folderMime, "", "")
	f.add("Meeting-Agenda.pdf", "", old, "old agenda")
	f.add("Meeting-Agenda.docx", "", "", "old docx")
	f.add("keep.txt", "", "", "keep")
	f.add("invoice.pdf", "", "", "old invoice")
	f.add("trash-me.txt", "", "", "t")
	// Both folders match the delete; the inner one goes with the outer.
	f.add("nest-inner", folderMime, f.add("nest", folderMime, "", ""), "")

	s := driveSession(t, settingsFor(t, f, googleFolder(t, f, "refresh-1")))
	err := runJSON(t, s, fmt.Sprintf(`[
	  {"type": "googledrive", "parameters": {"settings_file": "evaluation_examples/settings/googledrive/settings.yml",
	    "operation": ["delete", "delete", "mkdirs", "delete", "upload", "upload", "delete"],
	    "args": [{"query": "title = 'Meeting-Agenda.docx' or title = 'Meeting-Agenda.pdf'", "trash": false},
	             {"query": "title = 'meetings'"},
	             {"path": ["meetings", "2024"]},
	             {"query": "title = 'trash-me.txt'", "trash": true},
	             {"url": %q, "path": ["invoice-new.pdf"]},
	             {"url": %q, "path": ["meetings", "2024", "agenda.pdf"]},
	             {"query": "title contains 'nest'"}]}}]`, files.URL+"/invoice.pdf", files.URL+"/agenda.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"invoice-new.pdf", "invoice.pdf", "keep.txt", "meetings/", "meetings/2024/", "meetings/2024/agenda.pdf", "trash-me.txt (trashed)"}
	if got := f.tree(); !reflect.DeepEqual(got, want) {
		t.Errorf("Drive after the steps = %q\nwant %q", got, want)
	}

	f.mu.Lock()
	queries, requests, issued := slices.Clone(f.queries), slices.Clone(f.requests), f.issued
	f.mu.Unlock()
	if issued != 1 {
		t.Errorf("%d access tokens issued, want 1 (the expired saved one refreshed once, then reused)", issued)
	}
	for _, q := range queries {
		if strings.Contains(q, "title") {
			t.Errorf("a v2 query term reached the v3 API: %q", q)
		}
	}
	wantQueries := []string{
		"( name = 'Meeting-Agenda.docx' or name = 'Meeting-Agenda.pdf' ) and mimeType != 'application/vnd.google-apps.folder'",
		"( name = 'Meeting-Agenda.docx' or name = 'Meeting-Agenda.pdf' ) and mimeType = 'application/vnd.google-apps.folder'",
		"'root' in parents and name = 'meetings' and mimeType = 'application/vnd.google-apps.folder' and trashed = false",
	}
	for _, w := range wantQueries {
		if !slices.Contains(queries, w) {
			t.Errorf("no files.list with q %q; got %q", w, queries)
		}
	}
	for _, w := range []string{"DELETE /drive/v3/files/", "PATCH /drive/v3/files/", "POST /drive/v3/files", "POST /upload/drive/v3/files"} {
		if !slices.ContainsFunc(requests, func(r string) bool { return strings.HasPrefix(r, w) }) {
			t.Errorf("no %s request; got %q", w, requests)
		}
	}

	// The getter's four forms, and a Google Docs file, which has no
	// content of its own type.
	f.add("native", "application/vnd.google-apps.document", "", "")
	ctx := context.Background()
	tests := []struct {
		name string
		cfg  string
		want any // local names under the cache, or nil
	}{
		{name: "path", cfg: `{"path": ["meetings", "2024", "agenda.pdf"], "dest": "a.pdf"}`, want: "a.pdf"},
		{name: "query", cfg: `{"query": ["title = 'meetings' and mimeType = 'application/vnd.google-apps.folder' and trashed = false", "title = '2024'", "( title = 'agenda.pdf' or title = 'x' ) and trashed = false"], "dest": "q.pdf"}`, want: "q.pdf"},
		{name: "path_list", cfg: `{"path_list": [["invoice-new.pdf"], ["meetings", "missing.pdf"]], "dest": ["i.pdf", "m.pdf"]}`, want: []any{"i.pdf", nil}},
		{name: "query_list", cfg: `{"query_list": [["title = 'keep.txt' and trashed = false"]], "dest": ["k.txt"]}`, want: []any{"k.txt"}},
		{name: "not found", cfg: `{"path": ["nothing"], "dest": "n"}`, want: nil},
		{name: "a folder path that is a file", cfg: `{"path": ["keep.txt", "x"], "dest": "n"}`, want: nil},
		{name: "Google Docs file", cfg: `{"path": ["native"], "dest": "native.docx"}`, want: nil},
	}
	contents := map[string]string{"a.pdf": "%PDF-1.4 content of /agenda.pdf", "q.pdf": "%PDF-1.4 content of /agenda.pdf", "i.pdf": "%PDF-1.4 content of /invoice.pdf", "k.txt": "keep"}
	local := func(v any) any {
		if n, ok := v.(string); ok {
			return filepath.Join(s.CacheDir, n)
		}
		return v
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg map[string]any
			if err := json.Unmarshal([]byte(tt.cfg), &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["type"] = "googledrive_file"
			got, err := s.get(ctx, "result", cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := local(tt.want)
			if l, ok := tt.want.([]any); ok {
				w := make([]any, len(l))
				for i, e := range l {
					w[i] = local(e)
				}
				want = w
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, want %#v", got, want)
			}
			paths := []any{got}
			if l, ok := got.([]any); ok {
				paths = l
			}
			for _, p := range paths {
				if p == nil {
					continue
				}
				data, err := os.ReadFile(p.(string))
				if err != nil {
					t.Fatal(err)
				}
				if w := contents[filepath.Base(p.(string))]; string(data) != w {
					t.Errorf("%s holds %q, want %q", p, data, w)
				}
			}
		})
	}
}

func TestGoogleDriveFailures(t *testing.T) {
	f := newFakeGoogle(t)
	ctx := context.Background()

	t.Run("refresh token refused", func(t *testing.T) {
		s := driveSession(t, settingsFor(t, f, googleFolder(t, f, "revoked")))
		err := runJSON(t, s, `[{"type": "googledrive", "parameters": {"operation": ["delete"], "args": [{"query": "title = 'x'"}]}}]`)
		for _, w := range []string{"step 0 (googledrive)", "refused the refresh token", "invalid_grant", "Token has been expired or revoked", f.srv.URL + "/token"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v does not say %q", err, w)
			}
		}
		_, err = s.get(ctx, "result", map[string]any{"type": "googledrive_file", "path": []any{"x"}, "dest": "x"})
		if _, ok := env.AsUnsupported(err); ok || err == nil || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("getter with a refused token: %v, want an environment error with the reason", err)
		}
		if !errors.Is(err, env.ErrEnvironment) {
			t.Errorf("getter error %v is not an env_error", err)
		}
	})

	t.Run("Drive API error", func(t *testing.T) {
		s := driveSession(t, settingsFor(t, f, googleFolder(t, f, "refresh-1")))
		f.mu.Lock()
		f.failList = http.StatusInternalServerError
		f.mu.Unlock()
		defer func() { f.mu.Lock(); f.failList = 0; f.mu.Unlock() }()
		err := runJSON(t, s, `[{"type": "googledrive", "parameters": {"operation": ["mkdirs"], "args": [{"path": "a"}]}}]`)
		for _, w := range []string{"mkdirs", "GET " + f.srv.URL + "/drive/v3/files", "HTTP 500", "Backend Error"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v does not say %q", err, w)
			}
		}
		if err != nil && strings.Contains(err.Error(), "q=") {
			t.Errorf("error %v carries the query string", err)
		}
	})

	t.Run("bad parameters", func(t *testing.T) {
		s := driveSession(t, settingsFor(t, f, googleFolder(t, f, "refresh-1")))
		for steps, want := range map[string]string{
			`{"operation": ["delete"], "args": []}`:                        "one object per operation",
			`{"operation": ["rename"], "args": [{}]}`:                      `"rename" is not delete, mkdirs or upload`,
			`{"operation": "upload", "args": [{"path": ["a"]}]}`:           "args[0].url is required",
			`{"operation": ["upload"], "args": [{"url": "x", "path": 3}]}`: "args[0].path must name the file",
			`{"args": [{}]}`: "operation must be",
		} {
			err := runJSON(t, s, `[{"type": "googledrive", "parameters": `+steps+`}]`)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error saying %q", steps, err, want)
			}
		}
		for cfg, want := range map[string]string{
			`{"dest": "x"}`:                               "needs query, path, query_list or path_list",
			`{"path": ["a"], "dest": ["x"]}`:              "dest must be a string",
			`{"path_list": [["a"]], "dest": ["x", "y"]}`:  "dest must be a list as long as path_list",
			`{"path": ["a"], "dest": "../../etc/passwd"}`: "",
		} {
			var m map[string]any
			json.Unmarshal([]byte(cfg), &m)
			m["type"] = "googledrive_file"
			v, err := s.get(ctx, "result", m)
			if want == "" {
				// An escaping dest stays in the cache.
				if err != nil || v != nil {
					t.Errorf("%s: %v, %v", cfg, v, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error saying %q", cfg, err, want)
			}
		}
	})

	t.Run("without settings", func(t *testing.T) {
		s := driveSession(t, nil)
		err := runJSON(t, s, `[{"type": "googledrive", "parameters": {"operation": ["mkdirs"], "args": [{"path": "a"}]}}]`)
		if u, ok := env.AsUnsupported(err); !ok || u.Name != "googledrive" {
			t.Errorf("googledrive without settings: %v, want unsupported", err)
		}
	})
}

// TestGoogleTokenSharedAcrossSessions: sessions of one runner share the
// settings and so one refreshed token, also when they start at once.
func TestGoogleTokenSharedAcrossSessions(t *testing.T) {
	f := newFakeGoogle(t)
	g := settingsFor(t, f, googleFolder(t, f, "refresh-1"))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := driveSession(t, g)
			errs <- runJSON(t, s, fmt.Sprintf(`[{"type": "googledrive", "parameters": {"operation": ["mkdirs"], "args": [{"path": ["f%d"]}]}}]`, i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if f.issued != 1 {
		t.Errorf("%d tokens issued for 8 sessions, want 1", f.issued)
	}
	if got := len(f.tree()); got != 8 {
		t.Errorf("%d folders, want 8", got)
	}
}

// signInPage is a loopback page with the shape of Google's sign-in: an
// email field (#identifierId) and #identifierNext's button, then a
// password field and #passwordNext's button, which posts the form.
const signInPage = `<!DOCTYPE html><html><head><title>Sign in</title></head><body>
<form id="f" method="post" action="/signin">
 <div id="identifier"><input type="email" id="identifierId" name="identifier">
  <div id="identifierNext"><div><button type="button">Next</button></div></div></div>
 <div id="password" style="display:none"><input type="password" name="Passwd">
  <div id="passwordNext"><div><button type="button">Next</button></div></div></div>
</form>
<script>
document.querySelector('#identifierNext button').addEventListener('click', () => {
  setTimeout(() => { document.getElementById('identifier').style.display = 'none';
    document.getElementById('password').style.display = ''; }, 300);
});
document.querySelector('#passwordNext button').addEventListener('click', () => document.getElementById('f').submit());
</script></body></html>`

func TestLoginStep(t *testing.T) {
	g := &chromeGuest{home: t.TempDir()}
	startChromium(t, g)
	var mu sync.Mutex
	var signins []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/drive/my-drive":
			fmt.Fprint(w, signInPage)
		case "/signin":
			r.ParseForm()
			mu.Lock()
			signins = append(signins, r.PostForm)
			mu.Unlock()
			fmt.Fprint(w, `<!DOCTYPE html><html><body>My Drive</body></html>`)
		case "/signed-in":
			fmt.Fprint(w, `<!DOCTYPE html><html><body>My Drive</body></html>`)
		}
	}))
	t.Cleanup(srv.Close)
	f := newFakeGoogle(t)
	settings := settingsFor(t, f, googleFolder(t, f, "refresh-1"))
	settings.LoginURL = srv.URL + "/drive/my-drive"
	s := &Session{Guest: g, TaskID: "login", CacheDir: t.TempDir(), Google: settings}

	step := `[{"type": "login", "parameters": {"settings_file": "evaluation_examples/settings/google/settings.json", "platform": "googledrive"}}]`
	if err := runJSON(t, s, step); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := slices.Clone(signins)
	mu.Unlock()
	want := []url.Values{{"identifier": {"agent@example.com"}, "Passwd": {"s3cret pass"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sign-ins = %v, want %v", got, want)
	}

	// A profile already signed in shows no email field: the step ends
	// without an error and without posting, as OSWorld's does.
	settings.LoginURL = srv.URL + "/signed-in"
	start := time.Now()
	if err := runJSON(t, s, step); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the signed-in case took %s", d)
	}
	mu.Lock()
	if len(signins) != 1 {
		t.Errorf("%d sign-ins after the signed-in page, want still 1", len(signins))
	}
	mu.Unlock()

	if err := runJSON(t, s, `[{"type": "login", "parameters": {"platform": "gmail"}}]`); err == nil || !strings.Contains(err.Error(), `platform "gmail" is not supported`) {
		t.Errorf("login to gmail: %v, want an error naming the platform", err)
	}
	s.Google = &GoogleSettings{Drive: settings.Drive}
	if err := runJSON(t, s, step); err == nil {
		t.Error("login without google/settings.json succeeded")
	} else if u, ok := env.AsUnsupported(err); !ok || u.Name != "login" {
		t.Errorf("login without an account: %v, want unsupported login", err)
	}
}

// TestDriveUploadURLsAreDownloads: the files a googledrive step uploads
// come through the download store, so the offline check and a cache
// warm-up list them.
func TestDriveUploadURLsAreDownloads(t *testing.T) {
	task, err := ParseTask([]byte(`{"id": "4e9f0faf", "instruction": "x", "config": [{"type": "googledrive", "parameters": {"operation": ["delete", "upload"],
	  "args": [{"query": "title = 'invoice.pdf'", "trash": false}, {"url": "https://example.com/invoice.pdf", "path": ["invoice.pdf"]}]}}],
	  "evaluator": {"func": "infeasible"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := task.DownloadURLs(), []string{"https://example.com/invoice.pdf"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DownloadURLs = %q, want %q", got, want)
	}
}

// TestPublishedGoogleTasksRunWithSettings: with OSWORLD_REF naming an
// OSWorld checkout, every published task that acts on a Google account is
// refused without settings and needs nothing more with them.
func TestPublishedGoogleTasksRunWithSettings(t *testing.T) {
	ref := os.Getenv("OSWORLD_REF")
	if ref == "" {
		t.Skip("OSWORLD_REF is not set")
	}
	f := newFakeGoogle(t)
	g := settingsFor(t, f, googleFolder(t, f, "refresh-1"))
	paths, err := filepath.Glob(filepath.Join(ref, "evaluation_examples/examples/*/*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no tasks under %s: %v", ref, err)
	}
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		task, err := ParseTask(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		without := task.Missing()
		if !slices.ContainsFunc(without, func(m Missing) bool { _, ok := accountOnly[m.Name]; return ok }) {
			continue
		}
		n++
		if with := task.MissingFor(Offer{Google: g}); len(with) != 0 {
			t.Errorf("%s with Google settings still misses %+v", filepath.Base(p), with)
		}
	}
	if n == 0 {
		t.Error("no published task uses a Google account")
	}
	t.Logf("%d published tasks use a Google account; all supported with the settings", n)
}
