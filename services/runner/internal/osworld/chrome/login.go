package chrome

import (
	"context"
	"fmt"
	"time"
)

// Login is a sign-in through a page shaped as Google's: an email field
// with a Next button, then a password field with its own.
type Login struct {
	URL      string
	Email    string
	Password string
}

// The selectors and waits of OSWorld's _login_setup (Playwright).
const (
	loginEmailSel    = `input[type="email"]`
	loginEmailNext   = `#identifierNext > div > button`
	loginPassSel     = `input[type="password"]`
	loginPassNext    = `#passwordNext > div > button`
	loginPageTimeout = 60 * time.Second
	loginEmailWait   = 3 * time.Second
	loginPassWait    = 5 * time.Second
	loginClickWait   = 30 * time.Second // Playwright's default
	loginLoadWait    = 5 * time.Second
)

// LoginOutcome says how far a sign-in went.
type LoginOutcome string

// Outcomes of Login: OSWorld gives up without an error when a field does
// not appear in time (a profile already signed in shows no email field),
// so these are not errors either; the caller logs them.
const (
	LoginDone       LoginOutcome = "signed in"
	LoginNoEmail    LoginOutcome = "no email field appeared"
	LoginNoPassword LoginOutcome = "no password field appeared after the email"
)

// Login opens l.URL in a new tab of the browser's default context (the
// user's profile, so the session cookies stay) and signs in as OSWorld's
// login step does: fill the email, Next, fill the password, Next, wait for
// the load. The tab stays open.
func (c *Client) Login(ctx context.Context, l Login) (_ LoginOutcome, err error) {
	defer c.explain(&err)
	id, err := c.NewTab(ctx)
	if err != nil {
		return "", err
	}
	// OSWorld only logs a page that takes longer than its 60 s.
	_ = c.Navigate(ctx, id, l.URL, loginPageTimeout)
	if err := c.waitVisible(ctx, id, loginEmailSel, loginEmailWait); err != nil {
		return LoginNoEmail, ctx.Err()
	}
	if err := c.fill(ctx, id, loginEmailSel, l.Email); err != nil {
		return "", fmt.Errorf("chrome: login: %w", err)
	}
	if err := c.click(ctx, id, loginEmailNext, loginClickWait); err != nil {
		return "", fmt.Errorf("chrome: login: %w", err)
	}
	if err := c.waitVisible(ctx, id, loginPassSel, loginPassWait); err != nil {
		return LoginNoPassword, ctx.Err()
	}
	if err := c.fill(ctx, id, loginPassSel, l.Password); err != nil {
		return "", fmt.Errorf("chrome: login: %w", err)
	}
	if err := c.click(ctx, id, loginPassNext, loginClickWait); err != nil {
		return "", fmt.Errorf("chrome: login: %w", err)
	}
	lctx, cancel := context.WithTimeout(ctx, loginLoadWait)
	defer cancel()
	_ = c.WaitLoaded(lctx, id, 0)
	return LoginDone, ctx.Err()
}
