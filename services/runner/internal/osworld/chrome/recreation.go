package chrome

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Recreation is gotoRecreationPage_and_get_html_content's scripted visit
// of recreation.gov: search "Diamond", open the first highlighted result
// (a popup), try its "next available" button, and read a class's text
// there.
type Recreation struct {
	// Class and Order name the element read: the Order-th element of
	// Class, or the first without an order (HasOrder false).
	Class    string
	Order    string
	HasOrder bool
	// Sleep waits d; OSWorld's fixed pauses (10 s, 30 s...) go through it,
	// so a test can shorten them.
	Sleep func(ctx context.Context, d time.Duration) error
}

// recreationFailed is OSWorld's stand-in for a text it could not read.
const recreationFailed = "__EVALUATION_FAILED__"

// recreationURLs are the home page variants OSWorld tries in turn.
var recreationURLs = []string{"https://www.recreation.gov/", "http://www.recreation.gov/", "https://recreation.gov/"}

// nextAvailable are the selectors tried for the campsite's "next
// available" button.
var nextAvailable = []string{"button.next-available", "button[class*='next-available']", "button[class*='next']", ".next-available", "[data-testid*='next']"}

var searchURL = regexp.MustCompile(`recreation\.gov/search`)

// RunRecreation performs the visit once in a tab of a new browser context and
// returns {"expected": {class: text}}; an error means the visit failed
// before the reading, which the caller retries.
func (c *Client) RunRecreation(ctx context.Context, r Recreation) (_ map[string]any, err error) {
	defer c.explain(&err)
	sleep := r.Sleep
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				return nil
			}
		}
	}
	id, cleanup, err := c.newContextTab(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	loaded := false
	for _, u := range recreationURLs {
		if err := c.Navigate(ctx, id, u, PageTimeout); err == nil {
			loaded = true
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if !loaded {
		return nil, fmt.Errorf("chrome: recreation.gov did not load")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	c.WaitLoaded(wctx, id, idleQuiet) // OSWorld goes on when the network stays busy
	cancel()
	if err := c.waitVisible(ctx, id, "input#hero-search-input", PageTimeout); err != nil {
		return nil, err
	}
	if err := c.fill(ctx, id, "input#hero-search-input", "Diamond"); err != nil {
		return nil, err
	}
	if err := c.click(ctx, id, "button.nav-search-button", PageTimeout); err != nil {
		return nil, err
	}
	if err := sleep(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	if err := c.waitURL(ctx, id, searchURL, 20*time.Second); err != nil {
		return nil, err
	}
	if err := sleep(ctx, 3*time.Second); err != nil {
		return nil, err
	}
	const result = ".search-result-highlight--success"
	if err := c.waitVisible(ctx, id, result, 25*time.Second); err != nil {
		return nil, err
	}
	before, err := c.allPages(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.click(ctx, id, result, 30*time.Second); err != nil {
		return nil, err
	}
	popup, err := c.waitPopup(ctx, before, 30*time.Second)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
	err = c.WaitLoaded(lctx, popup, 0)
	lcancel()
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, 4*time.Second); err != nil {
		return nil, err
	}
	for _, sel := range nextAvailable {
		if c.waitVisible(ctx, popup, sel, 30*time.Second) == nil && c.click(ctx, popup, sel, 30*time.Second) == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	text := recreationFailed
	texts, err := c.Query(ctx, popup, "text", "."+r.Class)
	if err == nil {
		idx := 0
		ok := true
		if r.HasOrder {
			idx, err = strconv.Atoi(strings.TrimSpace(r.Order))
			ok = err == nil
			if idx < 0 {
				idx += len(texts) // Python's negative index
				ok = ok && idx >= 0
			}
		}
		if ok && idx < len(texts) {
			text = texts[idx]
		}
	}
	return map[string]any{"expected": map[string]any{r.Class: text}}, nil
}

// allPages lists every page target, of any browser context.
func (c *Client) allPages(ctx context.Context) ([]target.ID, error) {
	res, err := call(ctx, c, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		return nil, err
	}
	var out []target.ID
	for _, t := range res.TargetInfos {
		if t.Type == "page" {
			out = append(out, t.TargetID)
		}
	}
	return out, nil
}

// waitPopup waits for a page that was not in before (Playwright's
// expect_popup).
func (c *Client) waitPopup(ctx context.Context, before []target.ID, timeout time.Duration) (target.ID, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		now, err := c.allPages(ctx)
		if err == nil {
			for _, id := range now {
				if !slices.Contains(before, id) {
					return id, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("chrome: no popup opened within %s", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// visibleJS is Playwright's visible state: a box with a size, not hidden.
const visibleJS = `(sel) => { const e = document.querySelector(sel); if (!e) return false;
  const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden'; }`

// waitVisible polls until sel matches a visible element.
func (c *Client) waitVisible(ctx context.Context, id target.ID, sel string, timeout time.Duration) error {
	s, err := json.Marshal(sel)
	if err != nil {
		return err
	}
	if !c.pollTrue(ctx, id, "("+visibleJS+")("+string(s)+")", timeout) {
		return fmt.Errorf("chrome: no visible element matches %s within %s", sel, timeout)
	}
	return nil
}

// click sends a real mouse click to the element sel matches, as
// Playwright's click does (scrolled into view, at its centre).
func (c *Client) click(ctx context.Context, id target.ID, sel string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tctx, done := c.attach(ctx, id)
	defer done()
	if err := chromedp.Do(tctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		return fmt.Errorf("chrome: click %s: %w", sel, err)
	}
	return nil
}

// fill is Playwright's fill: the field focused, its text selected and
// replaced by typed-in text, so that the page's input handlers run.
func (c *Client) fill(ctx context.Context, id target.ID, sel, text string) error {
	ctx, cancel := context.WithTimeout(ctx, infoTimeout)
	defer cancel()
	tctx, done := c.attach(ctx, id)
	defer done()
	s, err := json.Marshal(sel)
	if err != nil {
		return err
	}
	focus := `(() => { const e = document.querySelector(` + string(s) + `); e.focus(); e.select && e.select(); return true; })()`
	if _, err := chromedp.Run(tctx, chromedp.Evaluate[bool](focus)); err != nil {
		return fmt.Errorf("chrome: fill %s: %w", sel, err)
	}
	if _, err := chromedp.Call(tctx, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
		return fmt.Errorf("chrome: fill %s: %w", sel, err)
	}
	return nil
}

// waitURL polls until the tab's URL matches re.
func (c *Client) waitURL(ctx context.Context, id target.ID, re *regexp.Regexp, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		p, err := c.Info(ctx, id, false)
		if err == nil && re.MatchString(p.URL) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chrome: the tab did not reach %s within %s", re, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
