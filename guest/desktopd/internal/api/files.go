package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func (s *Server) platform(w http.ResponseWriter, r *http.Request) error {
	writeText(w, http.StatusOK, "Linux")
	return nil
}

func (s *Server) desktopPath(w http.ResponseWriter, r *http.Request) error {
	p := filepath.Join(s.run.HomeDir(), "Desktop")
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return errorf(http.StatusNotFound, "Desktop path not found")
	}
	writeJSON(w, http.StatusOK, map[string]string{"desktop_path": p})
	return nil
}

// Limits of /list_directory, which OSWorld walks recursively without
// bounds (and into symlink loops); we do not follow symlinked
// directories and stop at these limits, marking the root "truncated".
const (
	listMaxEntries = 100000
	listMaxDepth   = 64
)

type dirNode struct {
	Type      string     `json:"type"`
	Name      string     `json:"name"`
	Children  []*dirNode `json:"children,omitempty"`
	Error     string     `json:"error,omitempty"`
	Truncated bool       `json:"truncated,omitempty"`
}

func (s *Server) listDirectory(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Path string `json:"path"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return badRequest("path required")
	}
	p := s.run.ExpandPath(req.Path)
	st, err := os.Stat(p)
	if err != nil {
		return badRequest("Path not found: %s", p)
	}
	if !st.IsDir() {
		return badRequest("not a directory: %s", p)
	}
	count := 0
	truncated := false
	var walk func(dir string, depth int) *dirNode
	walk = func(dir string, depth int) *dirNode {
		n := &dirNode{Type: "directory", Name: filepath.Base(dir), Children: []*dirNode{}}
		if r.Context().Err() != nil {
			truncated = true
			return n
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			n.Error = err.Error()
			return n
		}
		for _, e := range ents {
			if count >= listMaxEntries {
				truncated = true
				break
			}
			count++
			if e.IsDir() {
				if depth >= listMaxDepth {
					truncated = true
					n.Children = append(n.Children, &dirNode{Type: "directory", Name: e.Name(), Children: []*dirNode{}})
					continue
				}
				n.Children = append(n.Children, walk(filepath.Join(dir, e.Name()), depth+1))
				continue
			}
			n.Children = append(n.Children, &dirNode{Type: "file", Name: e.Name()})
		}
		return n
	}
	root := walk(p, 0)
	root.Truncated = truncated
	writeJSON(w, http.StatusOK, map[string]any{"directory_tree": root})
	return nil
}

// openRegular opens a file a caller named and refuses anything but a
// regular file: a FIFO would block the open (O_NONBLOCK prevents that) or
// the read for ever, and a device such as /dev/zero never ends. It is
// serverkit/boundedread's Open, written out here because the guest module
// depends on nothing of the mesh.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, errorf(http.StatusNotFound, "File not found: %s", path)
		}
		return nil, nil, errorf(http.StatusForbidden, "open %s: %v", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, nil, badRequest("%s is a directory", path)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, badRequest("%s is not a regular file (%s)", path, st.Mode().Type())
	}
	return f, st, nil
}

// sendFile streams a file as an attachment, as Flask's send_file does.
func sendFile(w http.ResponseWriter, r *http.Request, path, contentType string) error {
	f, st, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if contentType == "" {
		contentType = mime.TypeByExtension(filepath.Ext(path))
		if contentType == "" {
			contentType = "application/octet-stream"
		}
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(path)}))
	w.WriteHeader(http.StatusOK)
	// Never more than Content-Length promised: a file that grows while it
	// is sent (a log) is cut at its size when it was opened.
	_, _ = io.CopyN(w, f, st.Size())
	return nil
}

func (s *Server) file(w http.ResponseWriter, r *http.Request) error {
	p, err := formValue(r, "file_path")
	if err != nil {
		return err
	}
	if p == "" {
		return badRequest("form field file_path is required")
	}
	return sendFile(w, r, s.run.ExpandPath(p), "")
}

// stagingDir is the directory nearest to dir that exists: a file is
// written there first and renamed into place once complete, so that a
// refused or failed write leaves neither the file nor the parent
// directories it would have created (they are created only then). A new
// directory lies on its existing ancestor's file system, so the rename
// stays within one.
func stagingDir(dir string) (string, error) {
	for {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return "", fmt.Errorf("%s is not a directory", dir)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", err
		}
		dir = parent
	}
}

// upload stores multipart field file_data at file_path, streaming it to
// a temporary file near the target and renaming it into place, so a
// failed upload never leaves a partial file or new directories.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return badBody(err, "multipart/form-data body with file_path and file_data required")
	}
	var target, tmp string
	var size int64
	pathSeen := false
	defer func() {
		if tmp != "" {
			os.Remove(tmp)
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return badBody(err, "bad multipart body")
		}
		switch part.FormName() {
		case "file_path":
			// OSWorld's server reads the first file_path, a last-wins
			// reader the second: refuse the ambiguity.
			if pathSeen {
				return badRequest("more than one file_path part")
			}
			pathSeen = true
			b, err := io.ReadAll(io.LimitReader(part, 4097))
			if err != nil {
				return badBody(err, "read file_path")
			}
			if len(b) > 4096 {
				return badRequest("file_path too long")
			}
			target = s.run.ExpandPath(string(b))
		case "file_data":
			if tmp != "" {
				return badRequest("more than one file_data part")
			}
			dir := os.TempDir()
			if target != "" {
				if dir, err = stagingDir(filepath.Dir(target)); err != nil {
					return errorf(http.StatusInternalServerError, "create %s: %v", filepath.Dir(target), err)
				}
			}
			f, err := os.CreateTemp(dir, ".upload-*")
			if err != nil {
				return errorf(http.StatusInternalServerError, "create temporary file: %v", err)
			}
			tmp = f.Name()
			size, err = io.Copy(f, io.LimitReader(part, s.cfg.MaxUpload+1))
			cerr := f.Close()
			if err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					return errorf(http.StatusRequestEntityTooLarge, "upload larger than %d bytes", s.cfg.MaxUpload)
				}
				return badBody(err, "read file_data")
			}
			if cerr != nil {
				return errorf(http.StatusInternalServerError, "write upload: %v", cerr)
			}
			if size > s.cfg.MaxUpload {
				return errorf(http.StatusRequestEntityTooLarge, "upload larger than %d bytes", s.cfg.MaxUpload)
			}
		}
		part.Close()
	}
	if target == "" || tmp == "" {
		return badRequest("file_path and file_data are required")
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return errorf(http.StatusInternalServerError, "create %s: %v", filepath.Dir(target), err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		// Across file systems (the part came before file_path): copy.
		if err := copyFile(tmp, target); err != nil {
			return errorf(http.StatusInternalServerError, "store %s: %v", target, err)
		}
	}
	tmp = ""
	writeText(w, http.StatusOK, fmt.Sprintf("File Uploaded: %d bytes", size))
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// downloadFile fetches url into path: 3 attempts, 300 s each, bounded by
// the upload size limit.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		URL  string `json:"url"`
		Path string `json:"path"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.URL == "" || req.Path == "" {
		return badRequest("Path or URL not supplied!")
	}
	u, err := url.Parse(req.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return badRequest("url must be http or https")
	}
	target := s.run.ExpandPath(req.Path)
	stage, err := stagingDir(filepath.Dir(target))
	if err != nil {
		return errorf(http.StatusInternalServerError, "create %s: %v", filepath.Dir(target), err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-r.Context().Done():
				return r.Context().Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		lastErr = s.fetch(r.Context(), req.URL, stage, target)
		if lastErr == nil {
			writeText(w, http.StatusOK, "File downloaded successfully")
			return nil
		}
	}
	return errorf(http.StatusInternalServerError, "Failed to download %s: %v", req.URL, lastErr)
}

// fetch downloads rawURL into a temporary file in stage, then moves it to
// target, creating target's parent directories only then.
func (s *Server) fetch(ctx context.Context, rawURL, stage, target string) error {
	ctx, cancel := context.WithTimeout(ctx, 300*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	if resp.ContentLength > s.cfg.MaxUpload {
		return fmt.Errorf("file of %d bytes exceeds the %d byte limit", resp.ContentLength, s.cfg.MaxUpload)
	}
	f, err := os.CreateTemp(stage, ".download-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, io.LimitReader(resp.Body, s.cfg.MaxUpload+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > s.cfg.MaxUpload {
		return fmt.Errorf("file exceeds the %d byte limit", s.cfg.MaxUpload)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("got %d of %d bytes", n, resp.ContentLength)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.Rename(f.Name(), target)
}
