package osworld

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeGoogle is a local stand-in for Google's OAuth2 token endpoint and the
// subset of the Drive v3 REST API the googledrive step and getter use. It
// speaks the real protocol: the refresh_token grant, files.list with a q
// in v3's query language (a v2 term such as title is refused, as Google
// does), files.delete, files.update (trash), files.create with JSON or a
// multipart/related upload, files.get with alt=media, and Google's JSON
// errors. Every Drive request must carry the access token last issued.
type fakeGoogle struct {
	srv *httptest.Server

	mu           sync.Mutex
	refreshToken string // the one the token endpoint accepts
	clientID     string
	clientSecret string
	issued       int    // access tokens issued
	token        string // the current access token
	files        map[string]*fakeFile
	nextID       int
	queries      []string // q of every files.list
	requests     []string // method and path of every Drive request
	failList     int      // answer files.list with HTTP failList
}

type fakeFile struct {
	id, name, mime string
	parents        []string
	trashed        bool
	content        []byte
}

func newFakeGoogle(t *testing.T) *fakeGoogle {
	f := &fakeGoogle{refreshToken: "refresh-1", clientID: "client-1.apps.googleusercontent.com", clientSecret: "secret-1", files: map[string]*fakeFile{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", f.tokenEndpoint)
	mux.HandleFunc("/drive/v3/", f.authed(f.drive))
	mux.HandleFunc("/upload/drive/v3/files", f.authed(f.upload))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// add puts a file in the fake Drive and returns its id.
func (f *fakeGoogle) add(name, mime, parent string, content string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(name, mime, parent, []byte(content))
}

func (f *fakeGoogle) addLocked(name, mime, parent string, content []byte) string {
	f.nextID++
	id := "id" + strconv.Itoa(f.nextID)
	if mime == "" {
		mime = "application/octet-stream"
	}
	if parent == "" {
		parent = "root"
	}
	f.files[id] = &fakeFile{id: id, name: name, mime: mime, parents: []string{parent}, content: content}
	return id
}

// tree lists the Drive's files as "folder/name" paths (trashed ones
// marked), sorted, for comparisons.
func (f *fakeGoogle) tree() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, file := range f.files {
		p := file.name
		for parent := file.parents[0]; parent != "root"; {
			pf, ok := f.files[parent]
			if !ok {
				p = "?/" + p
				break
			}
			p = pf.name + "/" + p
			parent = pf.parents[0]
		}
		if file.mime == folderMime {
			p += "/"
		}
		if file.trashed {
			p += " (trashed)"
		}
		out = append(out, p)
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func googleError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

func (f *fakeGoogle) tokenEndpoint(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("client_id") != f.clientID || r.PostForm.Get("client_secret") != f.clientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client","error_description":"The OAuth client was not found."}`)
		return
	}
	if r.PostForm.Get("refresh_token") != f.refreshToken {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`)
		return
	}
	f.issued++
	f.token = "access-" + strconv.Itoa(f.issued)
	json.NewEncoder(w).Encode(map[string]any{"access_token": f.token, "expires_in": 3599, "token_type": "Bearer", "scope": "https://www.googleapis.com/auth/drive"})
}

func (f *fakeGoogle) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ok := f.token != "" && r.Header.Get("Authorization") == "Bearer "+f.token
		f.requests = append(f.requests, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		if !ok {
			googleError(w, http.StatusUnauthorized, "Request had invalid authentication credentials.")
			return
		}
		h(w, r)
	}
}

func (f *fakeGoogle) drive(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/drive/v3/files")
	id := strings.TrimPrefix(rest, "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case rest == "" && r.Method == http.MethodGet:
		f.list(w, r)
	case rest == "" && r.Method == http.MethodPost:
		var meta map[string]any
		if err := json.NewDecoder(r.Body).Decode(&meta); err != nil {
			googleError(w, http.StatusBadRequest, "Invalid JSON payload")
			return
		}
		f.create(w, meta, nil)
	case id != "" && r.Method == http.MethodDelete:
		if _, ok := f.files[id]; !ok {
			googleError(w, http.StatusNotFound, "File not found: "+id+".")
			return
		}
		f.deleteLocked(id)
		w.WriteHeader(http.StatusNoContent)
	case id != "" && r.Method == http.MethodPatch:
		file, ok := f.files[id]
		if !ok {
			googleError(w, http.StatusNotFound, "File not found: "+id+".")
			return
		}
		var meta struct {
			Trashed *bool `json:"trashed"`
		}
		if err := json.NewDecoder(r.Body).Decode(&meta); err != nil || meta.Trashed == nil {
			googleError(w, http.StatusBadRequest, "Invalid JSON payload")
			return
		}
		file.trashed = *meta.Trashed
		json.NewEncoder(w).Encode(map[string]any{"id": id})
	case id != "" && r.Method == http.MethodGet && r.URL.Query().Get("alt") == "media":
		file, ok := f.files[id]
		if !ok {
			googleError(w, http.StatusNotFound, "File not found: "+id+".")
			return
		}
		if strings.HasPrefix(file.mime, "application/vnd.google-apps.") {
			googleError(w, http.StatusForbidden, "Only files with binary content can be downloaded. Use Export with Docs Editors files.")
			return
		}
		w.Write(file.content)
	default:
		googleError(w, http.StatusNotFound, "Not Found")
	}
}

func (f *fakeGoogle) deleteLocked(id string) {
	delete(f.files, id)
	for cid, c := range f.files {
		if c.parents[0] == id {
			f.deleteLocked(cid)
		}
	}
}

func (f *fakeGoogle) create(w http.ResponseWriter, meta map[string]any, content []byte) {
	name, _ := meta["name"].(string)
	if name == "" {
		googleError(w, http.StatusBadRequest, "name is required")
		return
	}
	if _, ok := meta["title"]; ok {
		googleError(w, http.StatusBadRequest, "Invalid field: title")
		return
	}
	mime, _ := meta["mimeType"].(string)
	parent := "root"
	if ps, ok := meta["parents"].([]any); ok && len(ps) == 1 {
		parent, _ = ps[0].(string)
		if _, ok := f.files[parent]; !ok {
			googleError(w, http.StatusNotFound, "File not found: "+parent+".")
			return
		}
	}
	id := f.addLocked(name, mime, parent, content)
	json.NewEncoder(w).Encode(map[string]any{"id": id})
}

func (f *fakeGoogle) upload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Query().Get("uploadType") != "multipart" {
		googleError(w, http.StatusBadRequest, "uploadType must be multipart")
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/related" {
		googleError(w, http.StatusBadRequest, "Content-Type must be multipart/related")
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var meta map[string]any
	var content []byte
	for i := 0; ; i++ {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			googleError(w, http.StatusBadRequest, "bad multipart body: "+err.Error())
			return
		}
		b, _ := io.ReadAll(p)
		switch i {
		case 0:
			if !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") || json.Unmarshal(b, &meta) != nil {
				googleError(w, http.StatusBadRequest, "the first part must be JSON metadata")
				return
			}
		case 1:
			content = b
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.create(w, meta, content)
}

func (f *fakeGoogle) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	f.queries = append(f.queries, q)
	if f.failList != 0 {
		googleError(w, f.failList, "Backend Error")
		return
	}
	expr, err := parseDriveQuery(q)
	if err != nil {
		googleError(w, http.StatusBadRequest, "Invalid Value: "+err.Error())
		return
	}
	var out []map[string]any
	for _, file := range f.files {
		if expr(file) {
			out = append(out, map[string]any{"id": file.id, "name": file.name, "mimeType": file.mime})
		}
	}
	sortByName(out)
	// Pages of two, so that the client must follow nextPageToken.
	start, _ := strconv.Atoi(r.URL.Query().Get("pageToken"))
	end := min(start+2, len(out))
	page := map[string]any{"files": out[min(start, len(out)):end]}
	if end < len(out) {
		page["nextPageToken"] = strconv.Itoa(end)
	}
	json.NewEncoder(w).Encode(page)
}

func sortByName(l []map[string]any) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j]["id"].(string) < l[j-1]["id"].(string); j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

// parseDriveQuery compiles the v3 query language's subset: and, or, not,
// parentheses, name/mimeType =, !=, contains, trashed = true|false, and
// 'id' in parents.
func parseDriveQuery(q string) (func(*fakeFile) bool, error) {
	toks, err := lexDrive(q)
	if err != nil {
		return nil, err
	}
	p := &dqParser{toks: toks}
	e, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.i].s)
	}
	return e, nil
}

type dqTok struct {
	s   string
	str bool
}

func lexDrive(q string) ([]dqTok, error) {
	var out []dqTok
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ':
			i++
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for ; j < len(q) && q[j] != '\''; j++ {
				if q[j] == '\\' && j+1 < len(q) {
					j++
				}
				b.WriteByte(q[j])
			}
			if j >= len(q) {
				return nil, errors.New("unterminated string")
			}
			out = append(out, dqTok{s: b.String(), str: true})
			i = j + 1
		case c == '(' || c == ')' || c == '=':
			out = append(out, dqTok{s: string(c)})
			i++
		case c == '!' && i+1 < len(q) && q[i+1] == '=':
			out = append(out, dqTok{s: "!="})
			i += 2
		case isIdentByte(c):
			j := i
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			out = append(out, dqTok{s: q[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q", c)
		}
	}
	return out, nil
}

type dqParser struct {
	toks []dqTok
	i    int
}

func (p *dqParser) peek(s string) bool {
	return p.i < len(p.toks) && !p.toks[p.i].str && p.toks[p.i].s == s
}

func (p *dqParser) next() (dqTok, error) {
	if p.i >= len(p.toks) {
		return dqTok{}, errors.New("unexpected end")
	}
	p.i++
	return p.toks[p.i-1], nil
}

func (p *dqParser) or() (func(*fakeFile) bool, error) {
	l, err := p.and()
	for err == nil && p.peek("or") {
		p.i++
		var r func(*fakeFile) bool
		if r, err = p.and(); err == nil {
			a, b := l, r
			l = func(f *fakeFile) bool { return a(f) || b(f) }
		}
	}
	return l, err
}

func (p *dqParser) and() (func(*fakeFile) bool, error) {
	l, err := p.term()
	for err == nil && p.peek("and") {
		p.i++
		var r func(*fakeFile) bool
		if r, err = p.term(); err == nil {
			a, b := l, r
			l = func(f *fakeFile) bool { return a(f) && b(f) }
		}
	}
	return l, err
}

func (p *dqParser) term() (func(*fakeFile) bool, error) {
	if p.peek("not") {
		p.i++
		e, err := p.term()
		if err != nil {
			return nil, err
		}
		return func(f *fakeFile) bool { return !e(f) }, nil
	}
	if p.peek("(") {
		p.i++
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.peek(")") {
			return nil, errors.New("missing )")
		}
		p.i++
		return e, nil
	}
	first, err := p.next()
	if err != nil {
		return nil, err
	}
	if first.str { // 'id' in parents
		if !p.peek("in") {
			return nil, errors.New("a string must be followed by in")
		}
		p.i++
		if field, err := p.next(); err != nil || field.s != "parents" {
			return nil, errors.New("only 'x' in parents is supported")
		}
		id := first.s
		return func(f *fakeFile) bool { return f.parents[0] == id }, nil
	}
	op, err := p.next()
	if err != nil {
		return nil, err
	}
	val, err := p.next()
	if err != nil {
		return nil, err
	}
	switch first.s {
	case "name", "mimeType":
		if !val.str {
			return nil, fmt.Errorf("%s needs a string", first.s)
		}
		get := func(f *fakeFile) string { return f.name }
		if first.s == "mimeType" {
			get = func(f *fakeFile) string { return f.mime }
		}
		switch op.s {
		case "=":
			return func(f *fakeFile) bool { return get(f) == val.s }, nil
		case "!=":
			return func(f *fakeFile) bool { return get(f) != val.s }, nil
		case "contains":
			return func(f *fakeFile) bool { return strings.Contains(get(f), val.s) }, nil
		}
	case "trashed":
		if val.str || (val.s != "true" && val.s != "false") || op.s != "=" && op.s != "!=" {
			return nil, errors.New("trashed needs = true or false")
		}
		want := (val.s == "true") == (op.s == "=")
		return func(f *fakeFile) bool { return f.trashed == want }, nil
	}
	return nil, fmt.Errorf("unknown field %q", first.s)
}

// googleFolder writes a --google-settings folder as OSWorld ships it
// (settings.yml verbatim), with credentials whose token_uri is the fake's
// and an expired access token, and the account file.
func googleFolder(t *testing.T, f *fakeGoogle, refresh string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("googledrive/settings.yml", `client_config_backend: file
client_config_file: evaluation_examples/settings/googledrive/client_secrets.json

save_credentials: True
save_credentials_backend: file
save_credentials_file: evaluation_examples/settings/googledrive/credentials.json

get_refresh_token: True
`)
	write("googledrive/client_secrets.json", fmt.Sprintf(`{"installed": {"client_id": %q, "client_secret": %q, "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": %q}}`,
		f.clientID, f.clientSecret, f.srv.URL+"/token"))
	write("googledrive/credentials.json", fmt.Sprintf(`{"access_token": "stale", "client_id": %q, "client_secret": %q, "refresh_token": %q, "token_expiry": "2024-01-01T00:00:00Z", "token_uri": %q, "user_agent": null, "revoke_uri": "https://oauth2.googleapis.com/revoke", "id_token": null, "token_response": {}, "scopes": ["https://www.googleapis.com/auth/drive"], "invalid": false, "_class": "OAuth2Credentials", "_module": "oauth2client.client"}`,
		f.clientID, f.clientSecret, refresh, f.srv.URL+"/token"))
	write("google/settings.json", `{"email": "agent@example.com", "password": "s3cret pass"}`)
	return dir
}

// settingsFor loads dir and points it at the fake.
func settingsFor(t *testing.T, f *fakeGoogle, dir string) *GoogleSettings {
	t.Helper()
	g, err := LoadGoogleSettings(dir)
	if err != nil {
		t.Fatal(err)
	}
	g.DriveURL, g.UploadURL = f.srv.URL+"/drive/v3", f.srv.URL+"/upload/drive/v3"
	return g
}
