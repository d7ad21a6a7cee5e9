package chrome

import (
	"context"
	"errors"
	"fmt"
	"time"
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
func (c *Client) OpenTabs(ctx context.Context, urls []string) error {
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
func (c *Client) CloseTabs(ctx context.Context, urls []string, same func(a, b string) bool) error {
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
func (c *Client) OpenTabsInfo(ctx context.Context) ([]map[string]any, error) {
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

// Visit opens u in a new tab, waits for its load (and, with idle, for the
// network to settle) up to PageTimeout, and returns the tab's title, URL
// and HTML. A load that times out returns the tab's state with
// ErrLoadTimeout. With closeTab the tab is closed afterwards (page_info);
// otherwise it stays, as after active_tab_info.
func (c *Client) Visit(ctx context.Context, u string, idle, closeTab bool) (PageInfo, error) {
	id, err := c.NewTab(ctx)
	if err != nil {
		return PageInfo{}, err
	}
	if closeTab {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			c.CloseTab(cctx, id)
		}()
	}
	lctx, cancel := context.WithTimeout(ctx, PageTimeout)
	err = c.Navigate(lctx, id, u, PageTimeout)
	if err == nil && idle {
		err = c.WaitLoaded(lctx, id, idleQuiet)
	}
	timedOut := lctx.Err() != nil
	cancel()
	if ctx.Err() != nil {
		return PageInfo{}, ctx.Err()
	}
	if err != nil && !timedOut {
		return PageInfo{}, fmt.Errorf("chrome: visit %s: %w", u, err)
	}
	p, ierr := c.Info(ctx, id, true)
	if ierr != nil {
		return PageInfo{}, ierr
	}
	if timedOut {
		return p, ErrLoadTimeout
	}
	return p, nil
}
