package osworld

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/chrome"
)

// stepLogin is OSWorld's _login_setup: Chrome, reached over the DevTools
// protocol, signs in to Google Drive with the account of google/settings.json.
// As in OSWorld, a sign-in page whose fields do not appear in time ends
// the step without an error (the profile may be signed in already); the
// log says so.
func stepLogin(ctx context.Context, s *Session, p map[string]any) error {
	if platform := str(p, "platform"); platform != "googledrive" {
		return fmt.Errorf("platform %q is not supported (OSWorld implements googledrive only)", platform)
	}
	if s.Google == nil || s.Google.Account == nil {
		return &env.UnsupportedError{Kind: "step", Name: "login", Why: "needs a Google account login: give the runner --google-settings with google/settings.json"}
	}
	u := s.Google.LoginURL
	if u == "" {
		u = defaultLoginURL
	}
	c, err := connectChrome(ctx, s, chrome.DefaultReady)
	if err != nil {
		return err
	}
	defer c.Close()
	out, err := c.Login(ctx, chrome.Login{URL: u, Email: s.Google.Account.Email, Password: s.Google.Account.Password})
	if err != nil {
		return err
	}
	if out != chrome.LoginDone {
		s.log().Warn("login: gave up as OSWorld does", zap.String("url", u), zap.String("outcome", string(out)))
	}
	return nil
}
