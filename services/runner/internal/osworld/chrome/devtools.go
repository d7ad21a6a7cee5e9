// Package chrome drives the guest's Chrome for OSWorld's Chrome steps and
// getters: a DevTools-protocol client (over chromedp) that opens, lists,
// reads and closes tabs as OSWorld's Playwright code does, and readers of
// the profile files (Preferences, Bookmarks, History, Cookies) that the
// getters fetch from the guest.
//
// OSWorld reaches Chrome at http://<vm>:9222, a socat forward to the
// --remote-debugging-port=1337 that its tasks start Chrome with. Config.Addr
// is that endpoint as the runner reaches it.
package chrome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// Config says where the guest's DevTools endpoint is.
type Config struct {
	// Addr is host:port of the DevTools HTTP endpoint (OSWorld's
	// chromium_port, 9222 in the guest). Chrome refuses DevTools requests
	// whose Host is a name other than localhost, so give an IP address.
	Addr string
	// Ready bounds the wait for the endpoint to answer; default
	// DefaultReady.
	Ready time.Duration
}

// DefaultReady is how long Connect waits for the DevTools endpoint: OSWorld
// tries 15 times, 5 s apart, before a step gives up.
const DefaultReady = 75 * time.Second

// maxVersionBody bounds /json/version's answer.
const maxVersionBody = 1 << 20

// maxMessage bounds one DevTools message read from the guest's browser
// (see wsconn.go). The largest that getters need are a page's HTML and a
// printed PDF in base64, a few megabytes for real pages. A variable so
// that a test can lower it.
var maxMessage int64 = 32 << 20

// WaitReady polls http://addr/json/version until Chrome answers with its
// browser websocket URL, rewritten to addr (Chrome names the host and port
// it listens on, which a forward or a container mapping changes), or until
// the timeout, which is then an error naming addr.
func WaitReady(ctx context.Context, addr string, timeout time.Duration) (string, error) {
	if addr == "" {
		return "", errors.New("chrome: no DevTools address configured")
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("chrome: DevTools address %q is not host:port: %v", addr, err)
	}
	if timeout <= 0 {
		timeout = DefaultReady
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	var last error
	for {
		ws, err := version(ctx, hc, addr)
		if err == nil {
			return ws, nil
		}
		last = err
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("chrome: DevTools at %s did not answer within %s: %v", addr, timeout, last)
		case <-t.C:
		}
	}
}

func version(ctx context.Context, hc *http.Client, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/json/version", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := boundedread.ReadAll(resp.Body, maxVersionBody)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/json/version: HTTP %d", resp.StatusCode)
	}
	var v struct {
		WS string `json:"webSocketDebuggerUrl"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.WS == "" {
		return "", fmt.Errorf("/json/version: no webSocketDebuggerUrl")
	}
	u, err := url.Parse(v.WS)
	if err != nil {
		return "", fmt.Errorf("/json/version: %v", err)
	}
	u.Host = addr
	return u.String(), nil
}

// Client is a connection to the guest's browser.
type Client struct {
	addr        string
	alloc       *allocator
	cancelAlloc context.CancelFunc
	ctx         context.Context
	cancel      context.CancelFunc
}

// Connect waits until the DevTools endpoint answers, then attaches to the
// browser. Close detaches; the browser and its tabs stay, as after
// OSWorld's Playwright session.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	ws, err := WaitReady(ctx, cfg.Addr, cfg.Ready)
	if err != nil {
		return nil, err
	}
	// The browser context lives until Close: chromedp stops the connection
	// when the context of its first call ends.
	alloc := &allocator{wsURL: ws}
	allocCtx, cancelAlloc := chromedp.NewAllocatorContext(context.WithoutCancel(ctx), alloc)
	bctx, cancel := chromedp.NewContext(allocCtx)
	c := &Client{addr: cfg.Addr, alloc: alloc, cancelAlloc: cancelAlloc, ctx: bctx, cancel: cancel}
	// The first call dials; bound it by the caller's context.
	stop := context.AfterFunc(ctx, cancel)
	_, err = chromedp.CallBrowser(bctx, target.GetTargets, target.GetTargetsParams{})
	stop()
	if err != nil {
		c.explain(&err)
		c.Close()
		return nil, fmt.Errorf("chrome: attach to %s: %w", cfg.Addr, err)
	}
	return c, nil
}

// explain adds to *err why the connection to the browser was dropped,
// when this side dropped it (a message over maxMessage): chromedp fails
// the calls of a lost connection with its context's cancellation, which
// does not say.
func (c *Client) explain(err *error) {
	if *err == nil {
		return
	}
	if why := c.alloc.dropped(); why != nil && !errors.Is(*err, why) {
		*err = fmt.Errorf("%w (%w)", *err, why)
	}
}

// Close detaches from the browser.
func (c *Client) Close() {
	c.cancel()
	c.cancelAlloc()
}

// call runs a browser-level command under ctx's deadline.
func call[P, R any](ctx context.Context, c *Client, cmd cdp.Command[P, R], p P) (R, error) {
	cctx, cancel := c.bound(ctx)
	defer cancel()
	return chromedp.CallBrowser(cctx, cmd, p)
}

// bound returns a child of the browser context that also ends with ctx.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(c.ctx)
	if d, ok := ctx.Deadline(); ok {
		cctx, cancel = context.WithDeadline(c.ctx, d)
	}
	stop := context.AfterFunc(ctx, cancel)
	return cctx, func() { stop(); cancel() }
}

// Tab is one page target.
type Tab struct {
	ID    target.ID
	URL   string
	Title string
}

// Tabs lists the page targets of the default browser context, as
// Playwright's browser.contexts[0].pages: tabs, not extension pages,
// workers, DevTools windows or the pages of other (incognito) contexts.
func (c *Client) Tabs(ctx context.Context) (_ []Tab, err error) {
	defer c.explain(&err)
	res, err := call(ctx, c, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return nil, fmt.Errorf("chrome: list targets: %w", err)
	}
	bc, err := call(ctx, c, target.GetBrowserContexts, cdp.Empty{})
	if err != nil {
		return nil, fmt.Errorf("chrome: list browser contexts: %w", err)
	}
	var out []Tab
	for _, t := range res.TargetInfos {
		if t.Type != "page" || strings.HasPrefix(t.URL, "devtools://") {
			continue
		}
		if bc.DefaultBrowserContextID != "" && t.BrowserContextID != "" && t.BrowserContextID != bc.DefaultBrowserContextID ||
			slices.Contains(bc.BrowserContextIDs, t.BrowserContextID) {
			continue
		}
		out = append(out, Tab{ID: t.TargetID, URL: t.URL, Title: t.Title})
	}
	// The order is Chrome's, as Playwright's pages are in the order Chrome
	// announces them; it is not the tab strip's.
	return out, nil
}

// attach returns a context running in tab id that detaches, leaving the tab
// open, when cancelled.
func (c *Client) attach(ctx context.Context, id target.ID) (context.Context, context.CancelFunc) {
	bctx, cancelBound := c.bound(ctx)
	tctx, cancel := chromedp.NewContext(bctx, chromedp.WithTargetID(id), chromedp.WithDetachOnCancel())
	return tctx, func() { cancel(); cancelBound() }
}

// NewTab opens a blank tab in the default context and returns its id.
func (c *Client) NewTab(ctx context.Context) (_ target.ID, err error) {
	defer c.explain(&err)
	return c.newTab(ctx, "")
}

func (c *Client) newTab(ctx context.Context, bc cdp.BrowserContextID) (target.ID, error) {
	res, err := call(ctx, c, target.CreateTarget, target.CreateTargetParams{URL: "about:blank", BrowserContextID: bc})
	if err != nil {
		return "", fmt.Errorf("chrome: open a tab: %w", err)
	}
	return res.TargetID, nil
}

// newContextTab opens a tab in a new browser context, as Playwright's
// browser.new_page() does: no cookies or cache of the user's profile. The
// returned func disposes of the context and its tab, as Playwright's
// disconnect does with the contexts it made.
func (c *Client) newContextTab(ctx context.Context) (target.ID, func(), error) {
	bc, err := call(ctx, c, target.CreateBrowserContext, target.CreateBrowserContextParams{})
	if err != nil {
		return "", nil, fmt.Errorf("chrome: create a browser context: %w", err)
	}
	dispose := func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		call(dctx, c, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: bc.BrowserContextID})
	}
	id, err := c.newTab(ctx, bc.BrowserContextID)
	if err != nil {
		dispose()
		return "", nil, err
	}
	return id, dispose, nil
}

// CloseTab closes a tab.
func (c *Client) CloseTab(ctx context.Context, id target.ID) (err error) {
	defer c.explain(&err)
	if _, err := call(ctx, c, target.CloseTarget, target.CloseTargetParams{TargetID: id}); err != nil {
		return fmt.Errorf("chrome: close tab %s: %w", id, err)
	}
	// Chrome answers before the tab is gone; a listing right after would
	// still show it. A tab that lingers (an unload handler) is left after a
	// short wait, as Playwright's close does not wait for it either.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		res, err := call(ctx, c, target.GetTargets, target.GetTargetsParams{})
		if err != nil {
			return nil
		}
		if !slices.ContainsFunc(res.TargetInfos, func(t *target.Info) bool { return t.TargetID == id }) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Navigate loads u in tab id and waits for its load event, at most
// timeout. A load that times out is stopped, so that the tab settles on
// what it shows: left pending, it stays between two documents, where
// reading it blocks (Playwright's page is readable after a goto timeout).
func (c *Client) Navigate(ctx context.Context, id target.ID, u string, timeout time.Duration) (err error) {
	defer c.explain(&err)
	// The attachment outlives the load's timeout by the time the stop
	// needs.
	actx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	tctx, done := c.attach(actx, id)
	defer done()
	if err := chromedp.Do(tctx); err != nil {
		return fmt.Errorf("chrome: attach to tab %s: %w", id, err)
	}
	lctx, lcancel := context.WithTimeout(tctx, timeout)
	defer lcancel()
	err = chromedp.Do(lctx, chromedp.Navigate(u))
	if err == nil {
		return nil
	}
	if lctx.Err() != nil && ctx.Err() == nil {
		sctx, scancel := context.WithTimeout(tctx, 5*time.Second)
		chromedp.Call(sctx, page.StopLoading, cdp.Empty{})
		scancel()
	}
	return fmt.Errorf("chrome: load %s: %w", u, err)
}

// contentJS is Playwright's page.content(): the doctype and the document
// element's outer HTML.
const contentJS = `(() => {
  let s = '';
  if (document.doctype) s = new XMLSerializer().serializeToString(document.doctype);
  if (document.documentElement) s += document.documentElement.outerHTML;
  return s;
})()`

// infoTimeout bounds the reading of one tab: a renderer that hangs must
// not stop the getter.
const infoTimeout = 20 * time.Second

// PageInfo is a tab's title, URL and HTML, as OSWorld's page getters
// return them.
type PageInfo struct {
	Title, URL, Content string
}

// Map is the getters' {"title", "url", "content"} object.
func (p PageInfo) Map() map[string]any {
	return map[string]any{"title": p.Title, "url": p.URL, "content": p.Content}
}

// Info reads tab id's title, URL and, with content, its HTML.
func (c *Client) Info(ctx context.Context, id target.ID, content bool) (_ PageInfo, err error) {
	defer c.explain(&err)
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	tctx, done := c.attach(ctx, id)
	defer done()
	var p PageInfo
	if p.Title, err = chromedp.Run(tctx, chromedp.Evaluate[string](`document.title`)); err != nil {
		return p, fmt.Errorf("chrome: read tab %s: %w", id, err)
	}
	if p.URL, err = chromedp.Run(tctx, chromedp.Evaluate[string](`location.href`)); err != nil {
		return p, fmt.Errorf("chrome: read tab %s: %w", id, err)
	}
	if content {
		if p.Content, err = chromedp.Run(tctx, chromedp.Evaluate[string](contentJS)); err != nil {
			return p, fmt.Errorf("chrome: read tab %s: %w", id, err)
		}
	}
	return p, nil
}

// WaitLoaded waits until tab id's document has loaded (readyState
// complete), then quiet more: Playwright's networkidle waits for 500 ms
// without requests, which the page does not expose, so it is approximated
// by the load plus that pause.
func (c *Client) WaitLoaded(ctx context.Context, id target.ID, quiet time.Duration) (err error) {
	defer c.explain(&err)
	tctx, done := c.attach(ctx, id)
	defer done()
	for {
		state, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.readyState`))
		if err == nil && state == "complete" {
			break
		}
		select {
		case <-tctx.Done():
			return fmt.Errorf("chrome: tab %s did not load: %w", id, context.Cause(tctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-tctx.Done():
		return tctx.Err()
	case <-time.After(quiet):
		return nil
	}
}

// queryJS runs one of the element queries of OSWorld's html-parse getters
// in the page, as its Playwright calls do: every query answers a list of
// strings, and an invalid selector answers an empty list (the getter's
// safely_* helpers swallow the exception).
const queryJS = `(function(op, sel) {
  const all = (s) => Array.from(document.querySelectorAll(s));
  const xp = (x) => {
    const r = document.evaluate(x, document, null, XPathResult.ORDERED_NODE_SNAPSHOT_TYPE, null);
    const out = [];
    for (let i = 0; i < r.snapshotLength; i++) out.push(r.snapshotItem(i));
    return out;
  };
  try {
    switch (op) {
    case 'text':
      return all(sel).map(e => (e.textContent || '').trim());
    case 'direct': {
      const els = all(sel);
      if (!els.length) return [];
      return Array.from(els[0].childNodes).filter(n => n.nodeType === Node.TEXT_NODE)
        .map(n => n.textContent.trim()).filter(Boolean);
    }
    case 'h3':
      return all(sel).map(e => e.querySelector('h3')).filter(Boolean).map(h => (h.textContent || '').trim());
    case 'li':
      return all(sel + ' li.catAllProducts').map(e => e.querySelector('span')).filter(Boolean).map(s => s.innerText.trim());
    case 'xpath': {
      const els = xp(sel);
      return els.length ? [String(els.length), els[0].textContent == null ? '' : els[0].textContent] : ['0'];
    }
    case 'value': {
      const els = xp(sel);
      return els.length ? [String(els.length), els[0].value == null ? '' : String(els[0].value)] : ['0'];
    }
    case 'label': {
      // Playwright's text= engine: the smallest element whose text holds
      // sel, case-insensitively, whitespace collapsed.
      const want = sel.toLowerCase().replace(/\s+/g, ' ').trim();
      const norm = (e) => (e.textContent || '').toLowerCase().replace(/\s+/g, ' ');
      let found = null;
      for (const e of all('body, body *')) {
        if (e.tagName === 'SCRIPT' || e.tagName === 'STYLE') continue;
        if (norm(e).includes(want) && !Array.from(e.children).some(c => norm(c).includes(want))) { found = e; break; }
      }
      return found ? [found.textContent || ''] : [];
    }
    }
  } catch (e) {}
  return [];
})`

// Query runs an element query (op: text, direct, h3, li, xpath, value,
// label) in tab id; see queryJS.
func (c *Client) Query(ctx context.Context, id target.ID, op, sel string) (_ []string, err error) {
	defer c.explain(&err)
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	tctx, done := c.attach(ctx, id)
	defer done()
	args, err := json.Marshal([]string{op, sel})
	if err != nil {
		return nil, err
	}
	expr := queryJS + "(" + strings.Trim(string(args), "[]") + ")"
	out, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](expr))
	if err != nil {
		return nil, fmt.Errorf("chrome: query tab %s: %w", id, err)
	}
	return out, nil
}
