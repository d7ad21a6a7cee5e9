package ui_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image/jpeg"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

const token = "s3cret-viewer-token"

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func TestViewerRequiresToken(t *testing.T) {
	v := startViewer(t, token)
	fill(t, v)
	c := &http.Client{CheckRedirect: noRedirect}
	get := func(path string, hdr http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, v.url+path, nil)
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, path string
		hdr        http.Header
		want       int
		location   string
	}{
		{"page without token goes to the login", "/ui/rollouts/r-base?domain=os", nil, http.StatusSeeOther, "/ui/login?next=%2Fui%2Frollouts%2Fr-base%3Fdomain%3Dos"},
		{"blob without token", "/ui/blobs/" + strings.Repeat("a", 64), nil, http.StatusUnauthorized, ""},
		{"step JSON without token", "/ui/episodes/ep-long/steps/0.json", nil, http.StatusUnauthorized, ""},
		{"wrong bearer", "/ui/", http.Header{"Authorization": {"Bearer nope"}}, http.StatusSeeOther, "/ui/login?next=%2Fui%2F"},
		{"bearer", "/ui/", http.Header{"Authorization": {"Bearer " + token}}, http.StatusOK, ""},
		{"token in the query string is no token", "/ui/?token=" + token, nil, http.StatusSeeOther, ""},
		{"login form is open", "/ui/login", nil, http.StatusOK, ""},
		{"static assets are open", "/ui/static/app.css", nil, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(tc.path, tc.hdr)
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s = %d, want %d", tc.path, resp.StatusCode, tc.want)
			}
			if tc.location != "" && resp.Header.Get("Location") != tc.location {
				t.Errorf("Location = %q, want %q", resp.Header.Get("Location"), tc.location)
			}
		})
	}

	t.Run("login sets a strict HttpOnly cookie that is not the token", func(t *testing.T) {
		resp, err := c.PostForm(v.url+"/ui/login", url.Values{"token": {"wrong"}, "next": {"/ui/episodes/ep-long"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
			t.Errorf("wrong token: %d with %d cookies, want 401 and none", resp.StatusCode, len(resp.Cookies()))
		}
		resp, err = c.PostForm(v.url+"/ui/login", url.Values{"token": {token}, "next": {"https://evil.example/"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); loc != "/ui/" {
			t.Errorf("login redirect to an outside next = %q, want /ui/", loc)
		}
		cookies := resp.Cookies()
		if len(cookies) != 1 {
			t.Fatalf("cookies = %d, want 1", len(cookies))
		}
		ck := cookies[0]
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui/" || strings.Contains(ck.Value, token) {
			t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path /ui/, and not the token", ck)
		}
		if got := get("/ui/episodes/ep-long", http.Header{"Cookie": {ck.Name + "=" + ck.Value}}); got.StatusCode != http.StatusOK {
			t.Errorf("with the cookie: %d, want 200", got.StatusCode)
		}
	})

	t.Run("login in the browser", func(t *testing.T) {
		ctx := browser(t)
		navigate(t, ctx, v.url+"/ui/rollouts/r-base")
		waitFor(t, ctx, `location.pathname === "/ui/login"`)
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#token`), token),
			chromedp.Submit(chromedp.CSS(`form.login`)),
		); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, `location.pathname === "/ui/rollouts/r-base" && document.querySelectorAll("tr.episode-row").length === 5`)
		if cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || cookie != "" {
			t.Errorf("document.cookie = %q (%v): the session cookie must be HttpOnly", cookie, err)
		}
	})

	// Nothing the viewer logged holds the token (it never goes into a URL).
	for _, e := range v.logs.All() {
		if line := fmt.Sprint(e.Message, e.ContextMap()); strings.Contains(line, token) {
			t.Errorf("log line %q holds the token", line)
		}
	}
}

func shaOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestScreenshotsAreCachedThumbnails(t *testing.T) {
	v := startViewer(t, "")
	fill(t, v)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	sha := shaOf(screenshot(t, 0))
	resp, err := c.Get(v.url + "/ui/blobs/" + sha + "?scale=2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("thumbnail: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != shotW/2 || cfg.Height != shotH/2 {
		t.Errorf("thumbnail %dx%d, want %dx%d", cfg.Width, cfg.Height, shotW/2, shotH/2)
	}
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") || !strings.Contains(cc, "max-age=31536000") {
		t.Errorf("Cache-Control = %q, want a year and immutable", cc)
	}
	if got := thumbsServed(t, v); got["made"] != 1 || got["cache"] != 0 {
		t.Errorf("after the first request: thumbnails %v, want 1 made and none from the cache", got)
	}
	// A second request without If-None-Match (another browser, a cleared
	// cache) is answered from the server's LRU: nothing is shrunk again.
	second, err := c.Get(v.url + "/ui/blobs/" + sha + "?scale=2")
	if err != nil {
		t.Fatal(err)
	}
	body2, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusOK || !bytes.Equal(body2, body) {
		t.Errorf("second request: %d, %d bytes; want 200 and the same %d bytes", second.StatusCode, len(body2), len(body))
	}
	if got := thumbsServed(t, v); got["made"] != 1 || got["cache"] != 1 {
		t.Errorf("after the second request: thumbnails %v, want 1 made and 1 from the cache", got)
	}
	req, _ := http.NewRequest(http.MethodGet, v.url+"/ui/blobs/"+sha+"?scale=2", nil)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	again, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation = %d, want 304", again.StatusCode)
	}
	full, err := c.Get(v.url + "/ui/blobs/" + sha)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := io.ReadAll(full.Body)
	full.Body.Close()
	if full.Header.Get("Content-Type") != "image/png" || !bytes.Equal(orig, screenshot(t, 0)) {
		t.Errorf("original: %s, %d bytes; want the stored PNG", full.Header.Get("Content-Type"), len(orig))
	}
	for _, bad := range []string{"3", "0", "x", "-2"} {
		r, err := c.Get(v.url + "/ui/blobs/" + sha + "?scale=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("scale=%s: %d, want 400", bad, r.StatusCode)
		}
	}
	// An accessibility tree is served as text: its markup never runs here.
	tree := shaOf([]byte(`<desktop><button name="OK"/><script>alert(1)</script></desktop>`))
	r, err := c.Get(v.url + "/ui/blobs/" + tree)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || r.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("tree served as %q, nosniff %q; want text/plain with nosniff", ct, r.Header.Get("X-Content-Type-Options"))
	}
	r, err = c.Get(v.url + "/ui/blobs/" + tree + "?scale=2")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnprocessableEntity || r.Header.Get("Cache-Control") != "" {
		t.Errorf("thumbnail of a tree: %d, Cache-Control %q; want 422, not cached", r.StatusCode, r.Header.Get("Cache-Control"))
	}
}

// thumbsServed reads rolloutmesh_storage_viewer_thumbnails_total from the
// service's registry, by source.
func thumbsServed(t *testing.T, v *viewer) map[string]float64 {
	t.Helper()
	mfs, err := v.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "rolloutmesh_storage_viewer_thumbnails_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
