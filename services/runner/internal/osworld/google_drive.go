package osworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// googleSteps and googleGetters act on a Google account with the runner's
// --google-settings; without them, Task.Missing refuses the tasks by name.
var (
	googleSteps = map[string]stepFunc{
		"googledrive": stepGoogleDrive,
		"login":       stepLogin,
	}
	googleGetters = map[string]getterFunc{
		"googledrive_file": getGoogleDriveFile,
	}
)

const folderMime = "application/vnd.google-apps.folder"

// Bounds of the Drive requests: a listing is read page by page up to
// maxDrivePages; an error body is read up to maxDriveErrorBody.
const (
	driveMaxPages     = 50
	driveMaxListBody  = 16 << 20
	maxDriveErrorBody = 64 << 10
)

// driveClient speaks the subset of the Drive v3 REST API OSWorld's
// PyDrive calls amount to.
type driveClient struct {
	base, upload string
	hc           *http.Client
	tokens       oauth2.TokenSource
	tokenURL     string
}

type driveFile struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
}

// drive is the session's Drive client; without Drive settings, the step
// or getter (kind, name) is unsupported.
func (s *Session) drive(kind, name string) (*driveClient, error) {
	if s.Google == nil || s.Google.Drive == nil {
		return nil, &env.UnsupportedError{Kind: kind, Name: name, Why: "needs a Google Drive account: give the runner --google-settings with googledrive/settings.yml"}
	}
	g := s.Google
	d := &driveClient{base: g.DriveURL, upload: g.UploadURL, hc: g.httpClient(), tokens: g.tokenSource(), tokenURL: g.Drive.TokenURL}
	if d.base == "" {
		d.base = defaultDriveURL
	}
	if d.upload == "" {
		d.upload = defaultUploadURL
	}
	d.base, d.upload = strings.TrimSuffix(d.base, "/"), strings.TrimSuffix(d.upload, "/")
	return d, nil
}

// do sends one authenticated request; a status other than 2xx is an error
// with Google's message.
func (d *driveClient) do(ctx context.Context, method, u string, body io.Reader, contentType string) (*http.Response, error) {
	tok, err := d.tokens.Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			msg := re.ErrorCode
			if re.ErrorDescription != "" {
				msg += ": " + re.ErrorDescription
			}
			if msg == "" && re.Response != nil {
				msg = fmt.Sprintf("HTTP %d", re.Response.StatusCode)
			}
			return nil, fmt.Errorf("google drive: the token endpoint %s refused the refresh token: %s", d.tokenURL, msg)
		}
		return nil, fmt.Errorf("google drive: refreshing the access token at %s: %w", d.tokenURL, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	tok.SetAuthHeader(req)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("google drive: %s %s: %w", method, redactQuery(u), err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDriveErrorBody))
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return nil, &driveError{Method: method, URL: redactQuery(u), Status: resp.StatusCode, Message: msg}
	}
	return resp, nil
}

// driveError is a Drive answer other than 2xx, with Google's message.
type driveError struct {
	Method, URL string
	Status      int
	Message     string
}

func (e *driveError) Error() string {
	return fmt.Sprintf("google drive: %s %s: HTTP %d: %.300s", e.Method, e.URL, e.Status, e.Message)
}

// redactQuery drops a URL's query from messages: it holds the task's Drive
// query, which is long and says little about the failure.
func redactQuery(u string) string {
	p, _, _ := strings.Cut(u, "?")
	return p
}

func (d *driveClient) doJSON(ctx context.Context, method, u string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = strings.NewReader(string(b)), "application/json; charset=UTF-8"
	}
	resp, err := d.do(ctx, method, u, body, ct)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDriveErrorBody))
		return err
	}
	b, err := boundedread.ReadAll(resp.Body, driveMaxListBody)
	if err != nil {
		return fmt.Errorf("google drive: %s %s: %w", method, redactQuery(u), err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("google drive: %s %s: bad answer: %v", method, redactQuery(u), err)
	}
	return nil
}

// list is files.list with q (Drive v3 syntax), every page, as PyDrive's
// GetList reads them.
func (d *driveClient) list(ctx context.Context, q string) ([]driveFile, error) {
	var out []driveFile
	token := ""
	for range driveMaxPages {
		v := url.Values{"q": {q}, "fields": {"nextPageToken,files(id,name,mimeType)"}, "pageSize": {"1000"}, "spaces": {"drive"}}
		if token != "" {
			v.Set("pageToken", token)
		}
		var page struct {
			NextPageToken string      `json:"nextPageToken"`
			Files         []driveFile `json:"files"`
		}
		if err := d.doJSON(ctx, http.MethodGet, d.base+"/files?"+v.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Files...)
		if token = page.NextPageToken; token == "" {
			return out, nil
		}
	}
	return nil, fmt.Errorf("google drive: more than %d pages match %q", driveMaxPages, q)
}

func (d *driveClient) delete(ctx context.Context, id string) error {
	return d.doJSON(ctx, http.MethodDelete, d.base+"/files/"+url.PathEscape(id), nil, nil)
}

func (d *driveClient) trash(ctx context.Context, id string) error {
	return d.doJSON(ctx, http.MethodPatch, d.base+"/files/"+url.PathEscape(id), map[string]any{"trashed": true}, nil)
}

// metadata is a new file's: in root when parent is "root", as PyDrive
// creates it with no parents.
func metadata(name, parent, mime string) map[string]any {
	m := map[string]any{"name": name}
	if mime != "" {
		m["mimeType"] = mime
	}
	if parent != "root" {
		m["parents"] = []string{parent}
	}
	return m
}

func (d *driveClient) createFolder(ctx context.Context, name, parent string) (string, error) {
	var f driveFile
	if err := d.doJSON(ctx, http.MethodPost, d.base+"/files?fields=id", metadata(name, parent, folderMime), &f); err != nil {
		return "", err
	}
	if f.ID == "" {
		return "", fmt.Errorf("google drive: created folder %q has no id", name)
	}
	return f.ID, nil
}

// uploadFile is files.create with a multipart upload: the metadata part,
// then the content streamed from src.
func (d *driveClient) uploadFile(ctx context.Context, name, parent string, src io.Reader) (string, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			h := textproto.MIMEHeader{"Content-Type": {"application/json; charset=UTF-8"}}
			w, err := mw.CreatePart(h)
			if err != nil {
				return err
			}
			if err := json.NewEncoder(w).Encode(metadata(name, parent, "")); err != nil {
				return err
			}
			if w, err = mw.CreatePart(textproto.MIMEHeader{"Content-Type": {"application/octet-stream"}}); err != nil {
				return err
			}
			if _, err := io.Copy(w, src); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	resp, err := d.do(ctx, http.MethodPost, d.upload+"/files?uploadType=multipart&fields=id", pr, "multipart/related; boundary="+mw.Boundary())
	pr.CloseWithError(errors.New("request finished")) // ends the writer if the request did not read it all
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var f driveFile
	b, err := boundedread.ReadAll(resp.Body, maxDriveErrorBody)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil || f.ID == "" {
		return "", fmt.Errorf("google drive: upload %q: bad answer: %v", name, err)
	}
	return f.ID, nil
}

// download writes file id's content (files.get alt=media) to dst, at most
// limit bytes.
func (d *driveClient) download(ctx context.Context, id, dst string, limit int64) error {
	resp, err := d.do(ctx, http.MethodGet, d.base+"/files/"+url.PathEscape(id)+"?alt=media", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return writeAtomic(dst, io.LimitReader(resp.Body, limit+1), limit)
}

// quoteDrive is s as a Drive query string literal.
func quoteDrive(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// v2Fields are the Drive v2 query terms (PyDrive's API, which OSWorld's
// task queries are written for) that v3 renamed.
var v2Fields = map[string]string{
	"title":              "name",
	"modifiedDate":       "modifiedTime",
	"createdDate":        "createdTime",
	"lastViewedByMeDate": "viewedByMeTime",
}

// driveQuery rewrites a Drive v2 query for v3: the renamed terms outside
// string literals ("title = 'a'" becomes "name = 'a'").
func driveQuery(q string) string {
	var b strings.Builder
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) && q[j] != c {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(q))
			b.WriteString(q[i:j])
			i = j
		case isIdentByte(c):
			j := i
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			w := q[i:j]
			if r, ok := v2Fields[w]; ok {
				w = r
			}
			b.WriteString(w)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// mkdirs walks the folder path from root, making the folders that are
// missing, and returns the last one's id ("root" for an empty path).
func (d *driveClient) mkdirs(ctx context.Context, path []string) (string, error) {
	parent := "root"
	for _, p := range path {
		q := quoteDrive(parent) + " in parents and name = " + quoteDrive(p) + " and mimeType = '" + folderMime + "' and trashed = false"
		found, err := d.list(ctx, q)
		if err != nil {
			return "", err
		}
		if len(found) > 0 {
			parent = found[0].ID
			continue
		}
		if parent, err = d.createFolder(ctx, p, parent); err != nil {
			return "", err
		}
	}
	return parent, nil
}

// stringList is a parameter that is a string or a list of strings.
func stringList(v any, name string) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%s entries must be strings", name)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s must be a string or a list of strings", name)
}

// stepGoogleDrive is OSWorld's _googledrive_setup: for each operation,
// with the args of the same index, delete (or trash) what a query
// matches, files first, then folders; make a folder path; or upload a
// file from a URL to a path. Two differences on purpose: OSWorld stops
// after the first upload (a return inside its loop), and its upload reads
// the path list as one name; here every operation runs and the path's
// last entry is the name, the others folders, as its doc says.
func stepGoogleDrive(ctx context.Context, s *Session, p map[string]any) error {
	ops, err := stringList(p["operation"], "operation")
	if err != nil {
		return err
	}
	args, _ := p["args"].([]any)
	if len(args) != len(ops) {
		return fmt.Errorf("args must be a list with one object per operation (%d operations, %d args)", len(ops), len(args))
	}
	d, err := s.drive("step", "googledrive")
	if err != nil {
		return err
	}
	for i, op := range ops {
		a, ok := args[i].(map[string]any)
		if !ok {
			return fmt.Errorf("args[%d] must be an object", i)
		}
		switch op {
		case "delete":
			err = driveDelete(ctx, d, str(a, "query"), boolean(a, "trash"))
		case "mkdirs":
			var path []string
			if path, err = stringList(a["path"], fmt.Sprintf("args[%d].path", i)); err == nil {
				_, err = d.mkdirs(ctx, path)
			}
		case "upload":
			err = driveUpload(ctx, s, d, a, i)
		default:
			return fmt.Errorf("operation[%d] %q is not delete, mkdirs or upload", i, op)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}

func driveDelete(ctx context.Context, d *driveClient, q string, trash bool) error {
	files, folders := "mimeType != '"+folderMime+"'", "mimeType = '"+folderMime+"'"
	if strings.TrimSpace(q) != "" {
		q = driveQuery(q)
		files, folders = "( "+q+" ) and "+files, "( "+q+" ) and "+folders
	}
	var all []driveFile
	for _, query := range []string{files, folders} {
		l, err := d.list(ctx, query)
		if err != nil {
			return err
		}
		all = append(all, l...)
	}
	for _, f := range all {
		var err error
		if trash {
			err = d.trash(ctx, f.ID)
		} else {
			err = d.delete(ctx, f.ID)
		}
		// A folder deleted earlier took what was in it along.
		var de *driveError
		if err != nil && !(errors.As(err, &de) && de.Status == http.StatusNotFound) {
			return err
		}
	}
	return nil
}

func driveUpload(ctx context.Context, s *Session, d *driveClient, a map[string]any, i int) error {
	u := str(a, "url")
	if u == "" {
		return fmt.Errorf("args[%d].url is required", i)
	}
	path, err := stringList(a["path"], fmt.Sprintf("args[%d].path", i))
	if err != nil || len(path) == 0 || path[len(path)-1] == "" {
		return fmt.Errorf("args[%d].path must name the file", i)
	}
	src, err := s.source(ctx, u)
	if err != nil {
		return err
	}
	f, err := boundedread.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() > s.maxDownload() {
		return fmt.Errorf("%s: larger than %d bytes", u, s.maxDownload())
	}
	parent, err := d.mkdirs(ctx, path[:len(path)-1])
	if err != nil {
		return err
	}
	_, err = d.uploadFile(ctx, path[len(path)-1], parent, f)
	return err
}

// getGoogleDriveFile is OSWorld's get_googledrive_file: each file is found
// by a chain of queries, each searched in the folder the previous one
// found (path gives the chain from names), and downloaded to cache/<dest>.
// query and path give one file, query_list and path_list a list of them
// (dest a list of the same length). A file not found is None, as is a
// Google Docs file (PyDrive cannot download it in its own type); a Drive
// that cannot be reached or refuses the request is an error (env_error).
func getGoogleDriveFile(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	d, err := s.drive("getter", "googledrive_file")
	if err != nil {
		return nil, err
	}
	pathQueries := func(v any, name string) ([]string, error) {
		path, err := stringList(v, name)
		if err != nil {
			return nil, err
		}
		q := make([]string, len(path))
		for i, p := range path {
			q[i] = "title = " + quoteDrive(p) + " and trashed = false"
			if i < len(path)-1 {
				q[i] = "title = " + quoteDrive(p) + " and mimeType = '" + folderMime + "' and trashed = false"
			}
		}
		return q, nil
	}
	single := func(chain []string, err error) (any, error) {
		if err != nil {
			return nil, err
		}
		dest, ok := cfg["dest"].(string)
		if !ok {
			return nil, errors.New("dest must be a string")
		}
		return s.driveFile(ctx, d, chain, dest)
	}
	many := func(key string, toChain func(v any, name string) ([]string, error)) (any, error) {
		l, ok := cfg[key].([]any)
		if !ok {
			return nil, fmt.Errorf("%s must be a list", key)
		}
		dests, err := stringList(cfg["dest"], "dest")
		if err != nil || len(dests) != len(l) {
			return nil, fmt.Errorf("dest must be a list as long as %s", key)
		}
		out := make([]any, len(l))
		for i, e := range l {
			chain, err := toChain(e, fmt.Sprintf("%s[%d]", key, i))
			if err != nil {
				return nil, err
			}
			if out[i], err = s.driveFile(ctx, d, chain, dests[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	switch {
	case cfg["query"] != nil:
		return single(stringList(cfg["query"], "query"))
	case cfg["path"] != nil:
		return single(pathQueries(cfg["path"], "path"))
	case cfg["query_list"] != nil:
		return many("query_list", stringList)
	case cfg["path_list"] != nil:
		return many("path_list", pathQueries)
	}
	return nil, errors.New("googledrive_file needs query, path, query_list or path_list")
}

// driveFile follows the query chain from root and downloads the file it
// ends at to cache/<dest>: the local path, or nil when a query finds
// nothing or the file is a Google Docs one.
func (s *Session) driveFile(ctx context.Context, d *driveClient, chain []string, dest string) (any, error) {
	if len(chain) == 0 {
		return nil, errors.New("an empty query chain")
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, err
	}
	parent := "root"
	var f driveFile
	for _, q := range chain {
		found, err := d.list(ctx, "( "+driveQuery(q)+" ) and "+quoteDrive(parent)+" in parents")
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return noneBecause(ctx, "Google Drive has no file matching %q", q)
		}
		f = found[0] // OSWorld takes the first of several too
		parent = f.ID
	}
	if strings.HasPrefix(f.MimeType, "application/vnd.google-apps.") {
		s.log().Info("googledrive_file: a Google Docs file has no content of its own type; returning None",
			zap.String("name", f.Name), zap.String("mime_type", f.MimeType))
		return noneBecause(ctx, "%s on Google Drive is a Google Docs file (%s), which has no content of its own type", f.Name, f.MimeType)
	}
	_ = os.Remove(local) // a stale copy must not stand for a file that fails to download
	if err := d.download(ctx, f.ID, local, s.maxDownload()); err != nil {
		return nil, err
	}
	return local, nil
}

// driveUploadURLs are the URLs the task's googledrive steps upload from.
// OSWorld keeps no cache copy of them (it downloads to a temporary file),
// so they are not among cacheSources.
func (t Task) driveUploadURLs() []string {
	var out []string
	for _, st := range append(append([]Step{}, t.Config...), t.Evaluator.Postconfig...) {
		if st.Type != "googledrive" {
			continue
		}
		var p struct {
			Args []struct {
				URL string `json:"url"`
			} `json:"args"`
		}
		if json.Unmarshal(st.Parameters, &p) != nil {
			continue
		}
		for _, a := range p.Args {
			if a.URL != "" {
				out = append(out, a.URL)
			}
		}
	}
	return out
}
