package osworld

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/chrome"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric/browser"
)

// chromeSteps and chromeGetters are the steps and getters that drive Chrome
// over the DevTools protocol or read its profile.
var (
	chromeSteps = map[string]stepFunc{
		"chrome_open_tabs":      stepChromeOpenTabs,
		"chrome_close_tabs":     stepChromeCloseTabs,
		"update_browse_history": stepUpdateBrowseHistory,
	}
	chromeGetters = map[string]getterFunc{
		"bookmarks":                               getBookmarks,
		"cookie_data":                             getProfileRows(chrome.CookiesFile, chrome.CookiesQuery),
		"history":                                 getProfileRows(chrome.HistoryFile, chrome.HistoryQuery),
		"profile_name":                            getPreference(chrome.ProfileName),
		"default_search_engine":                   getPreference(chrome.DefaultSearchEngine),
		"chrome_font_size":                        getPreference(chrome.FontSize),
		"enable_do_not_track":                     getPreference(chrome.DoNotTrack),
		"enable_safe_browsing":                    getPreference(chrome.SafeBrowsing),
		"new_startup_page":                        getPreference(chrome.NewStartupPage),
		"data_delete_automacally":                 getPreference(chrome.DataDeleteAutomatically),
		"find_unpacked_extension_path":            getPreference(chrome.UnpackedExtensionPaths),
		"find_installed_extension_name":           getPreference(chrome.InstalledExtensionNames),
		"open_tabs_info":                          getOpenTabsInfo,
		"page_info":                               getPageInfo,
		"active_url_from_accessTree":              getActiveURL,
		"active_tab_info":                         getActiveTabInfo,
		"active_tab_url_parse":                    getActiveTabURLParse,
		"url_dashPart":                            getURLDashPart,
		"url_path_parse":                          getURLPathParse,
		"active_tab_html_parse":                   getActiveTabHTMLParse,
		"pdf_from_url":                            getPDFFromURL,
		"info_from_website":                       getInfoFromWebsite,
		"chrome_appearance_mode_ui":               getAppearanceModeUI,
		"gotoRecreationPage_and_get_html_content": getRecreationPage,
	}
)

// compare_archive scores unpacked files with the other families' metrics,
// which only this package joins.
func init() {
	browser.SetPeers(func(name string) (metric.Func, bool) {
		s, ok := metrics[name]
		return s.Fn, ok
	})
}

// chromiumPort is OSWorld's chromium_port: the guest forwards it to the
// --remote-debugging-port=1337 that tasks start Chrome with.
const chromiumPort = "9222"

// chromeAddr is the guest's DevTools endpoint as host:port. A guest that
// knows it (a port mapped elsewhere) says so with ChromeAddr; otherwise it
// is the guest server's host with OSWorld's port.
func chromeAddr(s *Session) (string, error) {
	if g, ok := s.Guest.(interface{ ChromeAddr() string }); ok && g.ChromeAddr() != "" {
		return g.ChromeAddr(), nil
	}
	if g, ok := s.Guest.(interface{ Endpoint() string }); ok {
		u, err := url.Parse(g.Endpoint())
		if err == nil && u.Hostname() != "" {
			return net.JoinHostPort(u.Hostname(), chromiumPort), nil
		}
	}
	return "", errors.New("chrome: the guest has no DevTools address")
}

// connectChrome attaches to the guest's Chrome, waiting up to ready for its
// DevTools port.
func connectChrome(ctx context.Context, s *Session, ready time.Duration) (*chrome.Client, error) {
	addr, err := chromeAddr(s)
	if err != nil {
		return nil, err
	}
	return chrome.Connect(ctx, chrome.Config{Addr: addr, Ready: ready})
}

// connectOrLaunch is the getters' connection: when Chrome does not answer
// (the agent closed it), OSWorld launches it with the debugging port,
// waits 5 s and tries once more.
func connectOrLaunch(ctx context.Context, s *Session) (*chrome.Client, error) {
	c, err := connectChrome(ctx, s, 5*time.Second)
	if err == nil {
		return c, nil
	}
	if lerr := s.Guest.Launch(ctx, []string{"google-chrome", "--remote-debugging-port=1337"}, false); lerr != nil {
		return nil, fmt.Errorf("%v; launching Chrome: %w", err, lerr)
	}
	if err := s.sleep(ctx, 5*time.Second); err != nil {
		return nil, err
	}
	return connectChrome(ctx, s, 10*time.Second)
}

func urlList(p map[string]any, key string) ([]string, error) {
	l, ok := p[key].([]any)
	if !ok {
		return nil, fmt.Errorf("%s must be a list of URLs", key)
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		u, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s entries must be strings", key)
		}
		out = append(out, u)
	}
	return out, nil
}

func stepChromeOpenTabs(ctx context.Context, s *Session, p map[string]any) error {
	urls, err := urlList(p, "urls_to_open")
	if err != nil {
		return err
	}
	c, err := connectChrome(ctx, s, chrome.DefaultReady)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.OpenTabs(ctx, urls)
}

func stepChromeCloseTabs(ctx context.Context, s *Session, p map[string]any) error {
	urls, err := urlList(p, "urls_to_close")
	if err != nil {
		return err
	}
	// OSWorld waits for Chrome to finish launching.
	if err := s.sleep(ctx, 5*time.Second); err != nil {
		return err
	}
	c, err := connectChrome(ctx, s, chrome.DefaultReady)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.CloseTabs(ctx, urls, browser.CompareURLs)
}

// emptyHistoryURL is the empty History database update_browse_history
// fills; a file cache/history_new.sqlite (OSWorld's cache name) is used
// instead when present, as for an offline mirror.
const emptyHistoryURL = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/chrome/44ee5668-ecd5-4366-a6ce-c1c9b8d4e938/history_empty.sqlite?download=true"

func stepUpdateBrowseHistory(ctx context.Context, s *Session, p map[string]any) error {
	raw, ok := p["history"].([]any)
	if !ok {
		return errors.New("history must be a list")
	}
	var items []chrome.HistoryItem
	for _, e := range raw {
		m, ok := e.(map[string]any)
		if !ok {
			return errors.New("history entries must be objects")
		}
		u, _ := m["url"].(string)
		title, _ := m["title"].(string)
		ago, ok := m["visit_time_from_now_in_seconds"].(float64)
		if u == "" || !ok {
			return errors.New("history entries need url and visit_time_from_now_in_seconds")
		}
		items = append(items, chrome.HistoryItem{URL: u, Title: title, Ago: time.Duration(ago * float64(time.Second))})
	}
	base, err := s.cachePath("history_new.sqlite")
	if err != nil {
		return err
	}
	if err := s.fetch(ctx, emptyHistoryURL, base); err != nil {
		return fmt.Errorf("update_browse_history: %w", err)
	}
	data, err := chrome.AddHistory(ctx, base, items, time.Now())
	if err != nil {
		return err
	}
	dir, err := profileDir(ctx, s)
	if err != nil {
		return err
	}
	dst := dir + "/" + chrome.HistoryFile
	if err := s.Guest.Upload(ctx, dst, data); err != nil {
		return fmt.Errorf("update_browse_history: upload: %w", err)
	}
	// OSWorld hands the file back to the desktop user; its result is not
	// checked there either.
	_, err = s.Guest.Execute(ctx, []string{"sudo chown -R user:user " + dst}, true, true)
	return err
}

// chromeGuestInfo runs Python in the guest, as OSWorld's getters do to learn the
// home directory and the machine.
func chromeGuestInfo(ctx context.Context, s *Session) (home, machine string, err error) {
	res, err := s.Guest.Execute(ctx, []string{"python3", "-c", "import os, platform; print(os.path.expanduser('~')); print(platform.machine())"}, false, false)
	if err != nil {
		return "", "", fmt.Errorf("chrome: guest home: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(res.Output), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "/") {
		return "", "", fmt.Errorf("chrome: guest home: unexpected output %q", res.Output)
	}
	return strings.TrimSpace(lines[0]), strings.ToLower(strings.TrimSpace(lines[1])), nil
}

// profileDir is the guest's Chrome profile directory: google-chrome's, or
// the snap Chromium's on ARM, as OSWorld chooses.
func profileDir(ctx context.Context, s *Session) (string, error) {
	home, machine, err := chromeGuestInfo(ctx, s)
	if err != nil {
		return "", err
	}
	if strings.Contains(machine, "arm") || strings.Contains(machine, "aarch") {
		return home + "/snap/chromium/common/chromium", nil
	}
	return home + "/.config/google-chrome", nil
}

// noProfileFile notes that the guest has no profile file name: Chrome has
// not written it (not started, or a fresh profile).
func noProfileFile(ctx context.Context, name string) {
	metric.Notef(ctx, "the guest has no Chrome profile file %s", name)
}

// profileFile fetches a profile file; nil when the guest has none.
func profileFile(ctx context.Context, s *Session, name string) ([]byte, error) {
	dir, err := profileDir(ctx, s)
	if err != nil {
		return nil, err
	}
	data, err := s.Guest.File(ctx, dir+"/"+name)
	var he *guest.HTTPError
	if errors.As(err, &he) && he.Status == http.StatusNotFound {
		return nil, nil
	}
	return data, err
}

func getPreference(read func([]byte) (any, string)) getterFunc {
	return func(ctx context.Context, s *Session, _ map[string]any) (any, error) {
		data, err := profileFile(ctx, s, chrome.PreferencesFile)
		if err != nil {
			return nil, err
		}
		v, why := read(data)
		if data == nil {
			noProfileFile(ctx, chrome.PreferencesFile)
		} else if why != "" {
			metric.Notef(ctx, "Chrome's %s: %s; OSWorld's fallback %s stands in", chrome.PreferencesFile, why, metric.PyStr(v))
		}
		return v, nil
	}
}

func getBookmarks(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	data, err := profileFile(ctx, s, chrome.BookmarksFile)
	if err != nil {
		return nil, err
	}
	if data == nil {
		noProfileFile(ctx, chrome.BookmarksFile)
	}
	return chrome.Bookmarks(data)
}

// getProfileRows copies a profile database to cache/<dest> and returns the
// query's rows; nil (None) when it is missing or unreadable, as OSWorld's
// getter answers any failure.
func getProfileRows(file, query string) getterFunc {
	return func(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
		dest := str(cfg, "dest")
		if dest == "" {
			return nil, errors.New("dest is required")
		}
		data, err := profileFile(ctx, s, file)
		if err != nil {
			return nil, err
		}
		if data == nil {
			noProfileFile(ctx, file)
			return nil, nil
		}
		if err := s.writeCache(dest, data); err != nil {
			return nil, err
		}
		local, err := s.cachePath(dest)
		if err != nil {
			return nil, err
		}
		rows, err := chrome.QueryRows(ctx, local, query)
		if err != nil {
			return noneBecause(ctx, "Chrome's %s does not read: %v", file, err)
		}
		return rows, nil
	}
}

// getOpenTabsInfo lists the open tabs' titles and URLs; an empty list when
// Chrome cannot be reached, as OSWorld answers.
func getOpenTabsInfo(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	c, err := connectOrLaunch(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome did not answer: %v", err)
		return []any{}, nil
	}
	defer c.Close()
	tabs, err := c.OpenTabsInfo(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome did not list its tabs: %v", err)
		return []any{}, nil
	}
	out := make([]any, len(tabs))
	for i, t := range tabs {
		out[i] = t
	}
	return out, nil
}

// getPageInfo loads config url in a new tab and returns its title, URL and
// HTML, with OSWorld's stand-ins when the load times out or Chrome cannot
// be reached.
func getPageInfo(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u := str(cfg, "url")
	if u == "" {
		return nil, errors.New("url is required")
	}
	failed := map[string]any{"title": "Connection failed", "url": u, "content": ""}
	c, err := connectOrLaunch(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome did not answer: %v", err)
		return failed, nil
	}
	defer c.Close()
	p, err := c.Visit(ctx, u, chrome.VisitOptions{Idle: true, Close: true})
	switch {
	case errors.Is(err, chrome.ErrLoadTimeout):
		p.Title = "Load timeout"
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome could not load %s: %v", u, err)
		return failed, nil
	}
	return p.Map(), nil
}

// addressBarName names the element OSWorld reads the active URL from:
// application[name=Google Chrome] entry[name=Address and search bar]
// (Chromium on ARM guests).
const addressBarName = "Address and search bar"

// activeURL reads the address bar's text from the guest's accessibility
// tree and prefixes goto_prefix (default "https://"), as
// get_active_url_from_accessTree; ok is false (None) when there is no
// tree, no address bar, or an empty one. A truncated tree is an error
// (ErrPartial): the address bar may be in the part not read.
func activeURL(ctx context.Context, s *Session, cfg map[string]any) (string, bool, error) {
	g, ok := s.Guest.(accessibilityReader)
	if !ok {
		return "", false, errors.New("the guest has no accessibility tree")
	}
	tree, err := accessibilityTree(ctx, g)
	if err != nil {
		return "", false, err
	}
	if tree == "" {
		metric.Notef(ctx, "the guest's accessibility tree is empty")
		return "", false, nil
	}
	texts := addressBarTexts(tree)
	if len(texts) == 0 {
		metric.Notef(ctx, "the accessibility tree has no Chrome window with an address bar")
		return "", false, nil
	}
	if texts[len(texts)-1] == "" {
		metric.Notef(ctx, "Chrome's address bar is empty")
		return "", false, nil
	}
	prefix := "https://"
	if v, ok := cfg["goto_prefix"]; ok {
		prefix = metric.PyStr(v) // an f-string: str() of any value
	}
	return prefix + texts[0], true, nil
}

// addressBarTexts returns the text (lxml's .text: before the first child)
// of every entry named "Address and search bar" inside an application
// named "Google Chrome", in document order; without one, those inside
// "Chromium" (OSWorld picks by the guest's architecture).
func addressBarTexts(tree string) []string {
	byApp := map[string][]string{}
	dec := xml.NewDecoder(strings.NewReader(tree))
	dec.Strict = false
	type frame struct {
		app     string // the enclosing application's name, if any
		entry   int    // index in byApp[app] of this entry's text, or -1
		started bool   // a child element has begun: no more .text
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			f := frame{entry: -1}
			if n := len(stack); n > 0 {
				stack[n-1].started = true
				f.app = stack[n-1].app
			}
			name := ""
			for _, a := range t.Attr {
				if a.Name.Local == "name" && a.Name.Space == "" {
					name = a.Value
				}
			}
			switch {
			case t.Name.Local == "application" && (name == "Google Chrome" || name == "Chromium"):
				f.app = name
			case t.Name.Local == "entry" && name == addressBarName && f.app != "":
				byApp[f.app] = append(byApp[f.app], "")
				f.entry = len(byApp[f.app]) - 1
			}
			stack = append(stack, f)
		case xml.CharData:
			if n := len(stack); n > 0 && stack[n-1].entry >= 0 && !stack[n-1].started {
				f := stack[n-1]
				byApp[f.app][f.entry] += string(t)
			}
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if l, ok := byApp["Google Chrome"]; ok {
		return l
	}
	return byApp["Chromium"]
}

func getActiveURL(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	return u, nil
}

// getActiveTabInfo loads the active tab's URL again in a tab of a new
// browser context (no cookies; closed afterwards) and returns its title, URL and HTML; nil when there is no
// active URL or Chrome cannot be reached, as OSWorld answers.
func getActiveTabInfo(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	c, err := connectChrome(ctx, s, 5*time.Second)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return noneBecause(ctx, "Chrome did not answer: %v", err)
	}
	defer c.Close()
	p, err := c.Visit(ctx, u, chrome.VisitOptions{Isolated: true})
	switch {
	case errors.Is(err, chrome.ErrLoadTimeout):
		p.Title = "Load timeout"
	case err != nil:
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return noneBecause(ctx, "Chrome could not load %s: %v", u, err)
	}
	return p.Map(), nil
}

// pyUnquote is urllib.parse.unquote: %XX escapes decoded as UTF-8, each
// maximal invalid sequence replaced by one U+FFFD, malformed escapes
// kept.
func pyUnquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return metric.PyDecodeUTF8(b)
}

// parseQS is urllib.parse.parse_qs with its defaults: "&"-separated
// pairs, "+" as space, blank values and pairs without "=" dropped.
func parseQS(q string) map[string][]string {
	out := map[string][]string{}
	for _, pair := range strings.Split(q, "&") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || v == "" {
			continue
		}
		k = pyUnquote(strings.ReplaceAll(k, "+", " "))
		out[k] = append(out[k], pyUnquote(strings.ReplaceAll(v, "+", " ")))
	}
	return out
}

// urlQuery and urlPath are urlparse(u).query and .path.
func urlQuery(u string) string { return browser.URLParse(u).Query }

func urlPath(u string) string { return browser.URLParse(u).Path }

// getActiveTabURLParse extracts parse_keys from the active URL's query
// (the first value, "" when absent), renames them by replace, and splits
// them on commas with split_list.
func getActiveTabURLParse(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	return urlQueryFacts(u, cfg)
}

// urlQueryFacts is active_tab_url_parse's answer for the URL u.
func urlQueryFacts(u string, cfg map[string]any) (any, error) {
	keys, ok := cfg["parse_keys"].([]any)
	if !ok {
		return nil, errors.New("parse_keys must be a list")
	}
	q := parseQS(urlQuery(u))
	out := map[string]any{}
	for _, k := range keys {
		ks, _ := k.(string)
		v := ""
		if l := q[ks]; len(l) > 0 {
			v = l[0]
		}
		out[ks] = v
	}
	if rep, ok := cfg["replace"].(map[string]any); ok {
		for from, to := range rep {
			v, present := out[from]
			if !present {
				return nil, fmt.Errorf("replace names %q, which is not in parse_keys", from)
			}
			delete(out, from)
			ts, _ := to.(string)
			out[ts] = v
		}
	}
	if split, _ := cfg["split_list"].(bool); split {
		for k, v := range out {
			l := []any{}
			for _, p := range strings.Split(v.(string), ",") {
				l = append(l, p)
			}
			out[k] = l
		}
	}
	return out, nil
}

// getURLDashPart returns the partIndex-th "/"-separated part of the active
// URL (Python indexing: negative counts from the end), without its query
// with needDeleteId, as a string or as {key: part}.
func getURLDashPart(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	return urlDashPart(ctx, u, cfg)
}

// urlDashPart is url_dashPart's answer for the URL u.
func urlDashPart(ctx context.Context, u string, cfg map[string]any) (any, error) {
	// int(config["partIndex"]): a missing key raises there; a value int()
	// refuses gives None.
	var idx int
	switch v := cfg["partIndex"].(type) {
	case float64:
		idx = int(v)
	case bool:
		if v {
			idx = 1
		}
	case string:
		n, err := metric.PyInt(v, 10)
		if err != nil {
			return noneBecause(ctx, "partIndex %q is not an integer int() reads", v)
		}
		idx = int(n)
	default:
		if _, present := cfg["partIndex"]; !present {
			return nil, errors.New("partIndex is required")
		}
		return noneBecause(ctx, "partIndex %s is not an integer int() reads", metric.PyStr(cfg["partIndex"]))
	}
	parts := strings.Split(u, "/")
	if idx >= len(parts) {
		return noneBecause(ctx, "%s has no part %d", u, idx)
	}
	if idx < 0 {
		idx += len(parts)
		if idx < 0 {
			return nil, fmt.Errorf("partIndex %d is out of range", idx-len(parts))
		}
	}
	part := parts[idx]
	if del, _ := cfg["needDeleteId"].(bool); del {
		part, _, _ = strings.Cut(part, "?")
	}
	switch str(cfg, "returnType") {
	case "string":
		return part, nil
	case "json":
		return map[string]any{str(cfg, "key"): part}, nil
	}
	return noneBecause(ctx, "returnType %s is neither \"string\" nor \"json\"", metric.PyStr(cfg["returnType"]))
}

// getURLPathParse is get_macys_product_url_parse (url_path_parse): facts
// read from a Macy's listing URL's path, where filters are a
// "key1,key2/value1,value2" pair of segments.
func getURLPathParse(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	return macysPathFacts(u, cfg)
}

func macysPathFacts(u string, cfg map[string]any) (any, error) {
	p := pyUnquote(urlPath(u))
	out := map[string]any{"mens_clothing": nil}
	if strings.Contains(p, "mens-clothing") {
		out["mens_clothing"] = true
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	kv := map[string]any{}
	shirts := strings.Contains(p, "shirts")
	shortSleeve := strings.Contains(p, "short-sleeve")
	for i := 0; i+1 < len(parts); i++ {
		if !strings.Contains(parts[i], ",") || !strings.Contains(parts[i+1], ",") {
			continue
		}
		keys, vals := strings.Split(parts[i], ","), strings.Split(parts[i+1], ",")
		for j := 0; j < len(keys) && j < len(vals); j++ {
			k, v := strings.TrimSpace(keys[j]), strings.TrimSpace(vals[j])
			switch {
			case k == "Price_discount_range" && v != "":
				var l []any
				for _, it := range strings.Split(v, "|") {
					l = append(l, strings.TrimSpace(it))
				}
				kv[k] = l
			case v != "":
				kv[k] = v
			default:
				kv[k] = nil
			}
			if k == "Product_department" && (v == "shirts" || v == "Shirts" || v == "Shirt") {
				shirts = true
			}
			if k == "Sleeve_length" && (v == "short-sleeve" || v == "Short Sleeve") {
				shortSleeve = true
			}
		}
		break
	}
	for _, f := range []string{"Men_regular_size_t", "Price_discount_range"} {
		if _, ok := kv[f]; !ok {
			kv[f] = nil
		}
	}
	out["shirts"], out["short_sleeve"] = nil, nil
	if shirts {
		out["shirts"] = true
	}
	if shortSleeve {
		out["short_sleeve"] = true
	}
	keys, ok := cfg["parse_keys"].([]any)
	if !ok {
		return nil, errors.New("parse_keys must be a list")
	}
	for _, k := range keys {
		ks, _ := k.(string)
		v, present := kv[ks]
		if !present {
			continue
		}
		if ks == "Price_discount_range" {
			l, _ := v.([]any)
			has := func(s string) bool {
				for _, e := range l {
					if e == s {
						return true
					}
				}
				return false
			}
			if v != nil && has("50_PERCENT_ off & more") && !has("30_PERCENT_ off & more") && !has("20_PERCENT_ off & more") {
				out[ks] = "50_PERCENT_ off & more"
			} else {
				out[ks] = "not_50_PERCENT_ off & more"
			}
			continue
		}
		out[ks] = v
	}
	return out, nil
}

// htmlParsePageWait bounds the wait for each tab's network to settle
// while active_tab_html_parse looks for the active one.
const htmlParsePageWait = 60 * time.Second

// getActiveTabHTMLParse is active_tab_html_parse: it finds the open tab
// showing the active URL (compared unquoted, without trailing slashes) and
// reads texts from it by category (class, xpath, input, label, class&url);
// {} when no tab shows it, nil when there is no active URL.
func getActiveTabHTMLParse(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	active, ok, err := activeURL(ctx, s, cfg)
	if err != nil || !ok {
		return nil, err
	}
	c, err := connectOrLaunch(ctx, s)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	tabs, err := c.Tabs(ctx)
	if err != nil {
		return nil, err
	}
	norm := func(u string) string { return strings.TrimRight(pyUnquote(u), "/") }
	var tab *chrome.Tab
	for i := range tabs {
		wctx, cancel := context.WithTimeout(ctx, htmlParsePageWait)
		err := c.WaitLoaded(wctx, tabs[i].ID, 500*time.Millisecond)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			continue // OSWorld skips a tab that does not settle
		}
		p, err := c.Info(ctx, tabs[i].ID, false)
		if err != nil {
			continue
		}
		if norm(p.URL) == norm(active) {
			tabs[i].URL = p.URL
			tab = &tabs[i]
			break
		}
	}
	if tab == nil {
		metric.Notef(ctx, "no open tab that settled shows %s", active)
		return map[string]any{}, nil
	}
	q := func(op, sel string) []string {
		l, err := c.Query(ctx, tab.ID, op, sel)
		if err != nil {
			return nil
		}
		return l
	}
	out := map[string]any{}
	// byIndex stores texts[i] under each {"i": key} of obj ("" past the end).
	byIndex := func(texts []string, obj any) error {
		m, _ := obj.(map[string]any)
		for order, key := range m {
			i, err := strconv.Atoi(order)
			if err != nil {
				return fmt.Errorf("index %q is not a number", order)
			}
			ks, _ := key.(string)
			if i >= 0 && i < len(texts) {
				out[ks] = texts[i]
			} else {
				out[ks] = ""
			}
		}
		return nil
	}
	objects := func(key string) map[string]any {
		m, _ := cfg[key].(map[string]any)
		return m
	}
	// othersAndMatches is class&url's check of a list of expected texts.
	othersAndMatches := func(texts []string, want []string) {
		for _, k := range want {
			for _, t := range texts {
				if strings.EqualFold(strings.ToLower(k), strings.ToLower(t)) {
					out[strings.ToLower(k)] = true
					break
				}
			}
		}
		for _, t := range texts {
			other := true
			for _, w := range want {
				if strings.Contains(strings.ToLower(w), strings.ToLower(t)) {
					other = false
					break
				}
			}
			if other {
				out["is_other_exist"] = true
				break
			}
		}
		if _, ok := out["is_other_exist"]; !ok {
			out["is_other_exist"] = false
		}
	}
	switch str(cfg, "category") {
	case "class":
		for cls, obj := range objects("class_multiObject") {
			if err := byIndex(q("text", "."+cls), obj); err != nil {
				return nil, err
			}
		}
		for cls, obj := range objects("class_multiObject_child") {
			if err := byIndex(q("direct", "."+cls), obj); err != nil {
				return nil, err
			}
		}
		for cls, obj := range objects("class_multiObject_only_child") {
			if err := byIndex(q("h3", "."+cls), obj); err != nil {
				return nil, err
			}
		}
		for cls, obj := range objects("class_multiObject_search_exist") {
			texts := q("text", "."+cls)
			want := metric.Strings(obj)
			for _, w := range want {
				if w != "is_other_exist" {
					out[w] = slices.Contains(texts, w)
				}
			}
			if slices.Contains(want, "is_other_exist") {
				for _, t := range texts {
					if !slices.Contains(want, t) {
						out["is_other_exist"] = true
					}
				}
				if _, ok := out["is_other_exist"]; !ok {
					out["is_other_exist"] = false
				}
			}
		}
		for cls, key := range objects("class_singleObject") {
			ks, _ := key.(string)
			out[ks] = ""
			if texts := q("text", "."+cls); len(texts) > 0 {
				out[ks] = texts[0]
			}
		}
	case "label":
		for label, key := range objects("labelObject") {
			ks, _ := key.(string)
			out[ks] = ""
			if l := q("label", label); len(l) > 0 {
				out[ks] = strings.TrimSpace(l[0])
			}
		}
	case "xpath":
		for xp, key := range objects("xpathObject") {
			ks, _ := key.(string)
			out[ks] = ""
			if l := q("xpath", xp); len(l) == 2 {
				out[ks] = strings.TrimSpace(l[1])
			}
		}
	case "input":
		for xp, key := range objects("inputObject") {
			ks, _ := key.(string)
			out[ks] = ""
			if l := q("value", xp); len(l) == 2 {
				out[ks] = strings.TrimSpace(l[1])
			}
		}
	case "class&url":
		for cls, obj := range objects("class_multiObject") {
			othersAndMatches(q("text", "."+cls), metric.Strings(obj))
		}
		for cls, obj := range objects("class_multiObject_li") {
			othersAndMatches(q("li", "."+cls), metric.Strings(obj))
		}
		pageURL := strings.ToLower(tab.URL)
		for _, k := range metric.Strings(cfg["url_include_expected"]) {
			lk := strings.ToLower(k)
			if _, ok := out[lk]; !ok {
				out[lk] = strings.Contains(pageURL, lk)
			}
		}
		for k, v := range objects("url_include_expected_multichoice") {
			vs, _ := v.(string)
			lv := strings.ToLower(vs)
			if _, ok := out[lv]; !ok {
				out[lv] = strings.Contains(pageURL, strings.ToLower(k))
			}
		}
	}
	// Another category reads nothing: OSWorld answers {} then.
	return out, nil
}

// pdfPlaceholder is what pdf_from_url leaves when every attempt failed: an
// empty PDF, which compare_pdfs scores against the agent's file.
const pdfPlaceholder = "%PDF-1.4\n%EOF\n"

// getPDFFromURL prints config path (a URL) to cache/<dest>: three
// attempts 5 s apart, then OSWorld's placeholder.
func getPDFFromURL(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u, dest := str(cfg, "path"), str(cfg, "dest")
	if u == "" || dest == "" {
		return nil, errors.New("path and dest are required")
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			if err := s.sleep(ctx, 5*time.Second); err != nil {
				return nil, err
			}
		}
		data, err := func() ([]byte, error) {
			c, err := connectOrLaunch(ctx, s)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.PDF(ctx, u)
		}()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			if err := s.writeCache(dest, data); err != nil {
				return nil, err
			}
			return local, nil
		}
		last = err
	}
	metric.Notef(ctx, "Chrome could not print %s in 3 attempts (%v); an empty PDF stands in", u, last)
	if err := s.writeCache(dest, []byte(pdfPlaceholder)); err != nil {
		return nil, err
	}
	return local, nil
}

// getInfoFromWebsite reads texts and attributes from config url; on any
// failure it answers config backups, as OSWorld does.
func getInfoFromWebsite(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	u := str(cfg, "url")
	backups := cfg["backups"]
	raw, _ := cfg["infos"].([]any)
	var infos []chrome.WebsiteInfo
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			metric.Notef(ctx, "an entry of infos is not an object; the task's backups stand in")
			return backups, nil
		}
		in := chrome.WebsiteInfo{Action: "inner_text", Attribute: str(m, "attribute")}
		if a, ok := m["action"].(string); ok {
			in.Action = a
		}
		switch sel := m["selector"].(type) {
		case string:
			in.Selectors = []string{sel}
		case []any:
			in.Selectors = metric.Strings(sel)
		}
		infos = append(infos, in)
	}
	c, err := connectOrLaunch(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome did not answer (%v); the task's backups stand in", err)
		return backups, nil
	}
	defer c.Close()
	out, err := c.WebsiteInfos(ctx, u, infos)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		metric.Notef(ctx, "Chrome could not read %s (%v); the task's backups stand in", u, err)
		return backups, nil
	}
	return out, nil
}

// getAppearanceModeUI is chrome_appearance_mode_ui: the mode the settings
// page shows, or, when Chrome or the page cannot tell, the one in
// Preferences.
func getAppearanceModeUI(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	c, err := connectChrome(ctx, s, 5*time.Second)
	if err == nil {
		mode, err := c.AppearanceMode(ctx)
		c.Close()
		if err == nil && mode != "" {
			return mode, nil
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return colorSchemeFromFile(ctx, s)
}

// colorSchemeFromFile reads the mode from Preferences up to five times a
// second apart, as OSWorld does because Chrome writes the file a moment
// after the settings change: light ends the wait, and the last mode read
// (system if none) is the answer. When no read gave a mode, a note says
// why OSWorld's fallback stands in.
func colorSchemeFromFile(ctx context.Context, s *Session) (any, error) {
	final, read := "system", false
	var data []byte
	why := ""
	for i := 0; i < 5; i++ {
		var err error
		data, err = profileFile(ctx, s, chrome.PreferencesFile)
		if err != nil {
			return nil, err
		}
		var mode string
		if mode, why = chrome.ColorScheme(data); why == "" {
			if mode == "light" {
				return mode, nil
			}
			final, read = mode, true
		}
		if err := s.sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
	switch {
	case read:
	case data == nil:
		noProfileFile(ctx, chrome.PreferencesFile)
	default:
		metric.Notef(ctx, "Chrome's %s: %s; OSWorld's fallback %s stands in", chrome.PreferencesFile, why, final)
	}
	return final, nil
}

// getRecreationPage is gotoRecreationPage_and_get_html_content: the
// scripted recreation.gov visit, three attempts 5 s apart, then OSWorld's
// failure object (which no result matches).
func getRecreationPage(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	order, hasOrder := cfg["order"]
	r := chrome.Recreation{Class: str(cfg, "class"), HasOrder: hasOrder, Sleep: s.sleep}
	switch o := order.(type) {
	case string:
		r.Order = o
	case float64:
		r.Order = strconv.FormatFloat(o, 'f', -1, 64)
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			if err := s.sleep(ctx, 5*time.Second); err != nil {
				return nil, err
			}
		}
		res, err := func() (map[string]any, error) {
			c, err := connectOrLaunch(ctx, s)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.RunRecreation(ctx, r)
		}()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			if str(cfg, "selector") != "class" {
				res["expected"] = map[string]any{}
			}
			return res, nil
		}
		last = err
	}
	return map[string]any{"expected": map[string]any{
		"error":         "__EVALUATION_FAILED__",
		"error_message": fmt.Sprintf("Failed after 3 attempts: %v", last),
	}}, nil
}
