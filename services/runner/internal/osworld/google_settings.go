package osworld

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/oauth2"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// GoogleSettings are the Google account settings OSWorld reads from its
// evaluation_examples/settings folder, loaded from a folder of the same
// shape:
//
//	googledrive/settings.yml   PyDrive's settings: client_config_file (or
//	                           client_config) and save_credentials_file
//	googledrive/credentials.json  the saved credentials it names, with a
//	                           refresh token (oauth2client's shape)
//	google/settings.json       {"email": ..., "password": ...} for login
//
// The googledrive step and getter need the first two, the login step the
// last. A task's own settings_file parameter is not read: it names a path
// in OSWorld's checkout, and the folder given to the runner stands for it.
type GoogleSettings struct {
	// Dir is the folder the settings were read from.
	Dir string
	// Drive is nil when the folder has no googledrive/settings.yml.
	Drive *DriveAuth
	// Account is nil when the folder has no google/settings.json.
	Account *GoogleAccount

	// DriveURL and UploadURL are the Drive v3 API's bases; empty is
	// Google's. Tests point them at a local stand-in.
	DriveURL, UploadURL string
	// LoginURL is the page the login step opens; empty is Google Drive's
	// (which redirects to the sign-in page when signed out).
	LoginURL string
	// HTTP makes the Drive and token requests; nil is a client with a
	// timeout.
	HTTP *http.Client

	tokensOnce sync.Once
	tokens     oauth2.TokenSource
}

// DriveAuth is what the Drive requests authenticate with: an OAuth client
// and a refresh token from saved credentials.
type DriveAuth struct {
	// SettingsFile and CredentialsFile are the files read, for messages.
	SettingsFile, CredentialsFile string
	ClientID, ClientSecret        string
	RefreshToken                  string
	TokenURL                      string
	Scopes                        []string
	// AccessToken and Expiry are the saved access token, used until it
	// expires.
	AccessToken string
	Expiry      time.Time
}

// GoogleAccount is the account the login step signs Chrome into.
type GoogleAccount struct {
	File     string
	Email    string
	Password string
}

// Google's endpoints.
const (
	defaultDriveURL  = "https://www.googleapis.com/drive/v3"
	defaultUploadURL = "https://www.googleapis.com/upload/drive/v3"
	defaultTokenURL  = "https://oauth2.googleapis.com/token"
	defaultLoginURL  = "https://drive.google.com/drive/my-drive"
)

// maxSettingsFile bounds each settings file.
const maxSettingsFile = 1 << 20

// osworldSettingsPrefix is where OSWorld's settings files name each
// other; such a path is read from the folder given instead.
const osworldSettingsPrefix = "evaluation_examples/settings/"

// LoadGoogleSettings reads the folder dir. A folder with neither
// googledrive/settings.yml nor google/settings.json, and any file that is
// there but unreadable or missing a field, is an error naming the file and
// the field.
func LoadGoogleSettings(dir string) (*GoogleSettings, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("google settings: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("google settings: %s is not a folder", dir)
	}
	g := &GoogleSettings{Dir: dir}
	drive := filepath.Join(dir, "googledrive", "settings.yml")
	if _, err := os.Stat(drive); err == nil {
		if g.Drive, err = loadDriveAuth(dir, drive); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("google settings: %w", err)
	}
	account := filepath.Join(dir, "google", "settings.json")
	if _, err := os.Stat(account); err == nil {
		if g.Account, err = loadAccount(account); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("google settings: %w", err)
	}
	if g.Drive == nil && g.Account == nil {
		return nil, fmt.Errorf("google settings: %s has neither googledrive/settings.yml nor google/settings.json", dir)
	}
	return g, nil
}

// pydriveSettings are the keys of PyDrive's settings.yml this reads.
type pydriveSettings struct {
	ClientConfigBackend string         `yaml:"client_config_backend"`
	ClientConfigFile    string         `yaml:"client_config_file"`
	ClientConfig        map[string]any `yaml:"client_config"`
	SaveCredentialsFile string         `yaml:"save_credentials_file"`
	OAuthScope          []string       `yaml:"oauth_scope"`
}

// savedCredentials is oauth2client's saved OAuth2Credentials (what PyDrive
// writes), or google-auth's authorized_user file (token, expiry).
type savedCredentials struct {
	AccessToken  string `json:"access_token"`
	Token        string `json:"token"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	RefreshToken string `json:"refresh_token"`
	TokenExpiry  string `json:"token_expiry"`
	Expiry       string `json:"expiry"`
	TokenURI     string `json:"token_uri"`
	Scopes       any    `json:"scopes"`
}

func loadDriveAuth(dir, file string) (*DriveAuth, error) {
	data, err := boundedread.ReadFile(file, maxSettingsFile)
	if err != nil {
		return nil, fmt.Errorf("google settings: %w", err)
	}
	var s pydriveSettings
	if err := yaml.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("google settings: %s: %v", file, err)
	}
	if s.SaveCredentialsFile == "" {
		return nil, fmt.Errorf("google settings: %s: save_credentials_file is required (the runner cannot sign in through a browser, so it needs saved credentials with a refresh token)", file)
	}
	a := &DriveAuth{SettingsFile: file, Scopes: s.OAuthScope}
	a.CredentialsFile = resolveSetting(dir, filepath.Dir(file), s.SaveCredentialsFile)
	data, err = boundedread.ReadFile(a.CredentialsFile, maxSettingsFile)
	if err != nil {
		return nil, fmt.Errorf("google settings: %s: save_credentials_file: %w", file, err)
	}
	var c savedCredentials
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("google settings: %s: %v", a.CredentialsFile, err)
	}
	if c.RefreshToken == "" {
		return nil, fmt.Errorf("google settings: %s: refresh_token is missing", a.CredentialsFile)
	}
	a.RefreshToken, a.ClientID, a.ClientSecret, a.TokenURL = c.RefreshToken, c.ClientID, c.ClientSecret, c.TokenURI
	a.AccessToken = c.AccessToken
	if a.AccessToken == "" {
		a.AccessToken = c.Token
	}
	for _, e := range []string{c.TokenExpiry, c.Expiry} {
		if e == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, e)
		if err != nil {
			// oauth2client writes "2024-01-02T03:04:05Z"; google-auth
			// writes no zone.
			t, err = time.Parse("2006-01-02T15:04:05.999999", e)
		}
		if err != nil {
			return nil, fmt.Errorf("google settings: %s: token_expiry %q is not a time", a.CredentialsFile, e)
		}
		a.Expiry = t
	}
	if a.Expiry.IsZero() {
		// oauth2 keeps a token without an expiry for ever; a saved one of
		// unknown age is better refreshed.
		a.AccessToken = ""
	}
	if len(a.Scopes) == 0 {
		switch v := c.Scopes.(type) {
		case string:
			a.Scopes = strings.Fields(v)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					a.Scopes = append(a.Scopes, s)
				}
			}
		}
	}
	if a.ClientID == "" || a.ClientSecret == "" {
		client, where, err := clientConfig(dir, file, s)
		if err != nil {
			return nil, err
		}
		if a.ClientID == "" {
			a.ClientID, _ = client["client_id"].(string)
		}
		if a.ClientSecret == "" {
			a.ClientSecret, _ = client["client_secret"].(string)
		}
		if a.TokenURL == "" {
			a.TokenURL, _ = client["token_uri"].(string)
		}
		for k, v := range map[string]string{"client_id": a.ClientID, "client_secret": a.ClientSecret} {
			if v == "" {
				return nil, fmt.Errorf("google settings: %s: %s is missing (and from %s too)", where, k, a.CredentialsFile)
			}
		}
	}
	if a.TokenURL == "" {
		a.TokenURL = defaultTokenURL
	}
	if u, err := url.Parse(a.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("google settings: %s: token_uri %q is not an http(s) URL", a.CredentialsFile, a.TokenURL)
	}
	return a, nil
}

// clientConfig is the OAuth client of PyDrive's settings: inline
// (client_config_backend: settings) or the client_secrets.json it names,
// whose client sits under "installed" or "web". where names its source.
func clientConfig(dir, file string, s pydriveSettings) (map[string]any, string, error) {
	if s.ClientConfigBackend == "settings" {
		if s.ClientConfig == nil {
			return nil, "", fmt.Errorf("google settings: %s: client_config is required with client_config_backend: settings", file)
		}
		return s.ClientConfig, file + " client_config", nil
	}
	name := s.ClientConfigFile
	if name == "" {
		name = "client_secrets.json" // PyDrive's default
	}
	p := resolveSetting(dir, filepath.Dir(file), name)
	data, err := boundedread.ReadFile(p, maxSettingsFile)
	if err != nil {
		return nil, "", fmt.Errorf("google settings: %s: client_config_file: %w", file, err)
	}
	var c map[string]map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, "", fmt.Errorf("google settings: %s: %v", p, err)
	}
	for _, k := range []string{"installed", "web"} {
		if m, ok := c[k]; ok {
			return m, p, nil
		}
	}
	return nil, "", fmt.Errorf("google settings: %s: no \"installed\" or \"web\" client", p)
}

// resolveSetting reads a path named in a settings file: absolute as is,
// evaluation_examples/settings/... (OSWorld's own files, which name paths
// in its checkout) under dir, anything else next to the naming file.
func resolveSetting(dir, base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	if rest, ok := strings.CutPrefix(filepath.ToSlash(p), osworldSettingsPrefix); ok {
		return filepath.Join(dir, filepath.FromSlash(rest))
	}
	return filepath.Join(base, p)
}

func loadAccount(file string) (*GoogleAccount, error) {
	data, err := boundedread.ReadFile(file, maxSettingsFile)
	if err != nil {
		return nil, fmt.Errorf("google settings: %w", err)
	}
	var a struct {
		Email    *string `json:"email"`
		Password *string `json:"password"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("google settings: %s: %v", file, err)
	}
	if a.Email == nil || *a.Email == "" {
		return nil, fmt.Errorf("google settings: %s: email is missing", file)
	}
	if a.Password == nil || *a.Password == "" {
		return nil, fmt.Errorf("google settings: %s: password is missing", file)
	}
	return &GoogleAccount{File: file, Email: *a.Email, Password: *a.Password}, nil
}

// httpClient is the client of Drive and token requests.
func (g *GoogleSettings) httpClient() *http.Client {
	if g.HTTP != nil {
		return g.HTTP
	}
	return &http.Client{Timeout: 2 * time.Minute}
}

// tokenSource is the access token source, made once and shared by every
// session: a refreshed token serves every episode until it expires.
func (g *GoogleSettings) tokenSource() oauth2.TokenSource {
	g.tokensOnce.Do(g.makeTokenSource)
	return g.tokens
}

func (g *GoogleSettings) makeTokenSource() {
	a := g.Drive
	cfg := oauth2.Config{
		ClientID:     a.ClientID,
		ClientSecret: a.ClientSecret,
		// Google's token endpoint takes the client in the body, as
		// oauth2client sends it.
		Endpoint: oauth2.Endpoint{TokenURL: a.TokenURL, AuthStyle: oauth2.AuthStyleInParams},
		Scopes:   a.Scopes,
	}
	// The context only carries the HTTP client: a refresh outlives the
	// step that started it, and the client's timeout bounds it.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, g.httpClient())
	g.tokens = cfg.TokenSource(ctx, &oauth2.Token{AccessToken: a.AccessToken, RefreshToken: a.RefreshToken, Expiry: a.Expiry})
}
