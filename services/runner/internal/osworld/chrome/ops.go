package chrome

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Timeouts of OSWorld's Playwright calls.
const (
	// OpenTimeout bounds one tab's load in chrome_open_tabs (page.goto's
	// 60 s).
	OpenTimeout = 60 * time.Second
	// TabsTimeout bounds one tab's wait in open_tabs_info.
	TabsTimeout = 30 * time.Second
	// PageTimeout bounds a page load of page_info and active_tab_info.
	PageTimeout = 60 * time.Second
	// idleQuiet approximates networkidle's 500 ms without requests.
	idleQuiet = 500 * time.Millisecond
)

// OpenTabs is chrome_open_tabs: each URL in a new tab, loaded up to
// OpenTimeout (a slow page is left loading, as OSWorld only logs it); after
// the first, the tab Chrome started with is closed.
func (c *Client) OpenTabs(ctx context.Context, urls []string) (err error) {
	defer c.explain(&err)
	for i, u := range urls {
		before, err := c.Tabs(ctx)
		if err != nil {
			return err
		}
		id, err := c.NewTab(ctx)
		if err != nil {
			return err
		}
		if err := c.Navigate(ctx, id, u, OpenTimeout); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		if i == 0 && len(before) > 0 {
			// Playwright's context.pages[0]: the oldest tab.
			if err := c.CloseTab(ctx, before[0].ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// CloseTabs is chrome_close_tabs: for each URL, the first open tab whose URL
// matches under same (OSWorld's compare_urls) is closed.
func (c *Client) CloseTabs(ctx context.Context, urls []string, same func(a, b string) bool) (err error) {
	defer c.explain(&err)
	for _, u := range urls {
		tabs, err := c.Tabs(ctx)
		if err != nil {
			return err
		}
		for _, t := range tabs {
			if same(t.URL, u) {
				if err := c.CloseTab(ctx, t.ID); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}

// OpenTabsInfo is open_tabs_info's list: each tab's title and URL once it
// has loaded, or the title "Load timeout" after TabsTimeout and "Error
// encountered" when the tab cannot be read, as OSWorld records them.
func (c *Client) OpenTabsInfo(ctx context.Context) (_ []map[string]any, err error) {
	defer c.explain(&err)
	tabs, err := c.Tabs(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, t := range tabs {
		wctx, cancel := context.WithTimeout(ctx, TabsTimeout)
		err := c.WaitLoaded(wctx, t.ID, idleQuiet)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			out = append(out, map[string]any{"title": "Load timeout", "url": t.URL})
			continue
		}
		p, err := c.Info(ctx, t.ID, false)
		if err != nil {
			out = append(out, map[string]any{"title": "Error encountered", "url": t.URL})
			continue
		}
		out = append(out, map[string]any{"title": p.Title, "url": p.URL})
	}
	return out, nil
}

// ErrLoadTimeout marks a page that did not load in time; Visit still
// returns what the tab shows.
var ErrLoadTimeout = errors.New("chrome: page load timed out")

// VisitOptions say how Visit opens and leaves its tab.
type VisitOptions struct {
	// Idle also waits for the network to settle (Playwright's
	// networkidle), not only for the load event.
	Idle bool
	// Isolated opens the tab in a new browser context that is disposed of
	// afterwards (browser.new_page()); otherwise the tab is in the default
	// context (contexts[0].new_page()).
	Isolated bool
	// Close closes a default-context tab afterwards; without it the tab
	// stays, as after info_from_website.
	Close bool
}

// Visit opens u in a new tab, waits for it up to PageTimeout, and returns
// the tab's title, URL and HTML. A load that times out returns the tab's
// state with ErrLoadTimeout.
func (c *Client) Visit(ctx context.Context, u string, o VisitOptions) (_ PageInfo, err error) {
	defer c.explain(&err)
	id, cleanup, err := c.visitTab(ctx, o)
	if err != nil {
		return PageInfo{}, err
	}
	defer cleanup()
	timedOut, err := c.load(ctx, id, u, o.Idle)
	if err != nil {
		return PageInfo{}, err
	}
	p, err := c.Info(ctx, id, true)
	if err != nil {
		return PageInfo{}, err
	}
	if timedOut {
		return p, ErrLoadTimeout
	}
	return p, nil
}

// visitTab opens the tab of a visit and returns what ends it.
func (c *Client) visitTab(ctx context.Context, o VisitOptions) (target.ID, func(), error) {
	if o.Isolated {
		return c.newContextTab(ctx)
	}
	id, err := c.NewTab(ctx)
	if err != nil {
		return "", nil, err
	}
	if !o.Close {
		return id, func() {}, nil
	}
	return id, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		c.CloseTab(cctx, id)
	}, nil
}

// load navigates tab id to u within PageTimeout; timedOut reports a load
// that did not finish, which is not an error.
func (c *Client) load(ctx context.Context, id target.ID, u string, idle bool) (timedOut bool, err error) {
	lctx, cancel := context.WithTimeout(ctx, PageTimeout)
	defer cancel()
	err = c.Navigate(lctx, id, u, PageTimeout)
	if err == nil && idle {
		err = c.WaitLoaded(lctx, id, idleQuiet)
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if lctx.Err() != nil {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("chrome: visit %s: %w", u, err)
	}
	return false, nil
}

// PDF prints u as Playwright's page.pdf() does with its defaults (Letter
// paper, no margins, no backgrounds, scale 1) in a tab of a new browser
// context, after the network settles and 3 s more, as pdf_from_url waits.
func (c *Client) PDF(ctx context.Context, u string) (_ []byte, err error) {
	defer c.explain(&err)
	id, cleanup, err := c.newContextTab(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	timedOut, err := c.load(ctx, id, u, true)
	if err != nil {
		return nil, err
	}
	if timedOut {
		return nil, ErrLoadTimeout
	}
	t := time.NewTimer(3 * time.Second)
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, ctx.Err()
	case <-t.C:
	}
	pctx, cancel := context.WithTimeout(ctx, PageTimeout)
	defer cancel()
	tctx, done := c.attach(pctx, id)
	defer done()
	zero := 0.0
	no := false
	res, err := chromedp.Call(tctx, page.PrintToPDF, page.PrintToPDFParams{
		PaperWidth: 8.5, PaperHeight: 11, Scale: 1,
		MarginTop: &zero, MarginBottom: &zero, MarginLeft: &zero, MarginRight: &zero,
		PrintBackground: &no, PreferCSSPageSize: &no, DisplayHeaderFooter: &no,
	})
	if err != nil {
		return nil, fmt.Errorf("chrome: print %s: %w", u, err)
	}
	return res.Data, nil
}

// appearanceProbe reads the appearance prefs as the settings page sees
// them (chrome.settingsPrivate exists only on chrome://settings) and
// answers "light", "dark" or "system" with the precedence OSWorld's probe
// has: any sign of light, then of dark, then system; null without prefs.
const appearanceProbe = `new Promise((resolve) => {
  const sp = window.chrome && chrome.settingsPrivate;
  if (!sp) { resolve(null); return; }
  sp.getAllPrefs((prefs) => {
    const seen = new Set();
    const low = (v) => String(v).toLowerCase();
    for (const p of prefs || []) {
      const v = p.value;
      if (p.key === 'browser.theme.color_scheme' || p.key === 'browser.theme.color_scheme2') {
        if (v === 1 || low(v) === '1' || low(v) === 'light') seen.add('light');
        if (v === 2 || low(v) === '2' || low(v) === 'dark') seen.add('dark');
        if (v === 0 || ['0', 'system', 'default', 'device'].includes(low(v))) seen.add('system');
      } else if (p.key === 'extensions.theme.system_theme') {
        if (v === 0 || v === '0' || v === false) seen.add('light');
        if (v === 1 || v === '1' || v === true) seen.add('dark');
      }
    }
    for (const m of ['light', 'dark', 'system']) if (seen.has(m)) { resolve(m); return; }
    resolve(null);
  });
})`

// AppearanceMode opens chrome://settings/appearance in a new tab (left
// open, as OSWorld's getter leaves it), lets it settle 2.5 s, and reads the
// mode; "" when the page shows none, for the caller's file fallback.
func (c *Client) AppearanceMode(ctx context.Context) (_ string, err error) {
	defer c.explain(&err)
	id, err := c.NewTab(ctx)
	if err != nil {
		return "", err
	}
	if err := c.Navigate(ctx, id, "chrome://settings/appearance", 30*time.Second); err != nil {
		return "", err
	}
	t := time.NewTimer(2500 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Stop()
		return "", ctx.Err()
	case <-t.C:
	}
	ectx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	tctx, done := c.attach(ectx, id)
	defer done()
	mode, err := chromedp.Run(tctx, chromedp.Evaluate[*string](appearanceProbe, chromedp.EvalAwaitPromise))
	if err != nil {
		return "", fmt.Errorf("chrome: read the appearance settings: %w", err)
	}
	if mode == nil {
		return "", nil
	}
	return *mode, nil
}
