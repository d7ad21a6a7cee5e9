package chrome

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// WebsiteInfo is one entry of info_from_website's infos.
type WebsiteInfo struct {
	// Action is inner_text, attribute, click_and_inner_text or
	// click_and_attribute.
	Action string
	// Selectors is the CSS selector, or for the click actions the
	// selectors to click in turn and then read.
	Selectors []string
	Attribute string
}

// selectorTimeout is Playwright's wait_for_selector timeout in the getter;
// websiteTimeout is Playwright's default, which its page loads keep.
const (
	selectorTimeout = 10 * time.Second
	websiteTimeout  = 30 * time.Second
)

// WebsiteInfos is info_from_website's extraction: u in a new tab of the
// default context (left open, as OSWorld leaves it), each info read from
// the page after returning to u if a click moved away. Inner texts are
// strings; a missing attribute is nil. Any failure is an error, on which
// the getter answers the task's backups.
func (c *Client) WebsiteInfos(ctx context.Context, u string, infos []WebsiteInfo) (_ []any, err error) {
	defer c.explain(&err)
	id, err := c.NewTab(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.Navigate(ctx, id, u, websiteTimeout); err != nil {
		return nil, err
	}
	out := []any{}
	for _, in := range infos {
		p, err := c.Info(ctx, id, false)
		if err != nil {
			return nil, err
		}
		if p.URL != u {
			if err := c.Navigate(ctx, id, u, websiteTimeout); err != nil {
				return nil, err
			}
		}
		if len(in.Selectors) == 0 {
			return nil, fmt.Errorf("chrome: info %s has no selector", in.Action)
		}
		var read string
		switch in.Action {
		case "inner_text", "click_and_inner_text":
			read = `el => el.innerText`
		case "attribute", "click_and_attribute":
			a, err := json.Marshal(in.Attribute)
			if err != nil {
				return nil, err
			}
			read = `el => el.getAttribute(` + string(a) + `)`
		default:
			return nil, fmt.Errorf("chrome: action %q is not supported", in.Action)
		}
		sels := in.Selectors
		if in.Action == "inner_text" || in.Action == "attribute" {
			sels = sels[:1]
		}
		for i, sel := range sels {
			wait := selectorTimeout
			if i == len(sels)-1 && in.Action == "click_and_attribute" {
				wait = websiteTimeout // the getter sets no timeout for this one
			}
			if err := c.waitSelector(ctx, id, sel, wait); err != nil {
				return nil, err
			}
			if i < len(sels)-1 {
				if _, err := c.onElement(ctx, id, sel, `el => { el.click(); return null; }`); err != nil {
					return nil, err
				}
				// Playwright's wait_for_load_state('load') after the click
				// returns at once while the old document is still shown; the
				// next wait_for_selector is what waits for the new page.
				continue
			}
			v, err := c.onElement(ctx, id, sel, read)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// onElement calls fn (a JavaScript function of one element) on the first
// element sel matches and returns its result (a string or nil).
func (c *Client) onElement(ctx context.Context, id target.ID, sel, fn string) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	tctx, done := c.attach(ctx, id)
	defer done()
	s, err := json.Marshal(sel)
	if err != nil {
		return nil, err
	}
	expr := `(() => { const el = document.querySelector(` + string(s) + `); if (!el) throw new Error('no element matches'); const v = (` + fn + `)(el); return v == null ? null : String(v); })()`
	v, err := chromedp.Run(tctx, chromedp.Evaluate[*string](expr))
	if err != nil {
		return nil, fmt.Errorf("chrome: element %s: %w", sel, err)
	}
	if v == nil {
		return nil, nil
	}
	return *v, nil
}

// waitSelector polls until sel matches an element, across navigations, for
// at most timeout.
func (c *Client) waitSelector(ctx context.Context, id target.ID, sel string, timeout time.Duration) error {
	s, err := json.Marshal(sel)
	if err != nil {
		return err
	}
	if !c.pollTrue(ctx, id, `document.querySelector(`+string(s)+`) !== null`, timeout) {
		return fmt.Errorf("chrome: no element matches %s within %s", sel, timeout)
	}
	return nil
}

// pollTrue evaluates a boolean expression in the page every 100 ms until
// it gives true (a failed evaluation counts as false: the page may be
// navigating), and tells whether it did within timeout.
func (c *Client) pollTrue(ctx context.Context, id target.ID, expr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := func() (bool, error) {
			tctx, done := c.attach(ctx, id)
			defer done()
			return chromedp.Run(tctx, chromedp.Evaluate[bool](expr))
		}()
		if err == nil && ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}
