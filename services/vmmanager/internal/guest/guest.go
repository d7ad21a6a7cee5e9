// Package guest talks to a VM's guest server (desktopd, or OSWorld's own
// in-VM server) over its HTTP API: readiness probes and shell commands.
package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client reaches guest servers.
type Client struct {
	// HTTP, when nil, is a client shared by every guest.Client whose pool
	// keeps an idle connection to each guest (see pooled).
	HTTP *http.Client
}

// pooled is the client a Client with no HTTP of its own uses. Go's default
// transport keeps at most 100 idle connections in all, so with more guests
// than that (a vmmanager serves pools of up to 256 VMs, and many pools) each
// readiness probe and command dialled anew: a connect for vmmanager and an
// accept for the guest on every reset. With no total bound the pool keeps one
// per guest (at most two), bounded by the guests there are; a connection a
// guest's restart closed is retried on a new one by net/http for idempotent
// requests, and dropped after IdleConnTimeout.
var pooled = &http.Client{Transport: pooledTransport()}

func pooledTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no bound in all; MaxIdleConnsPerHost (2) still holds
	return t
}

// maxBody bounds what is read from a guest answer.
const maxBody = 1 << 20

func (c *Client) do(ctx context.Context, method, url, token string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = pooled
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, b, err
}

// Probe GETs endpoint+path once and wants a 200.
func (c *Client) Probe(ctx context.Context, endpoint, path, token string) error {
	code, body, err := c.do(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+path, token, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %.200s", path, code, body)
	}
	return nil
}

// WaitReady probes every interval until the guest answers 200 or ctx ends.
// alive, when set, is consulted between probes so that a guest process that
// died is reported at once instead of after the whole boot timeout.
func (c *Client) WaitReady(ctx context.Context, endpoint, path, token string, alive func() error) error {
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = c.Probe(pctx, endpoint, path, token)
		cancel()
		if last == nil {
			return nil
		}
		if alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest not ready: %v (%w)", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Execute runs a command in the guest through POST /execute and fails on a
// non-zero exit status.
func (c *Client) Execute(ctx context.Context, endpoint, token string, command []string) (string, error) {
	code, body, err := c.do(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/execute", token,
		map[string]any{"command": command, "shell": false})
	if err != nil {
		return "", fmt.Errorf("POST /execute: %w", err)
	}
	var out struct {
		Output     string `json:"output"`
		Error      string `json:"error"`
		ReturnCode int    `json:"returncode"`
		Message    string `json:"message"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", fmt.Errorf("POST /execute: status %d: undecodable answer %.200q", code, body)
	}
	if code != http.StatusOK || out.ReturnCode != 0 {
		return out.Output, fmt.Errorf("POST /execute: status %d, exit %d: %.200s%.200s", code, out.ReturnCode, out.Error, out.Message)
	}
	return out.Output, nil
}
