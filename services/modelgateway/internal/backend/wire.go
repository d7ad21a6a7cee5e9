package backend

import (
	"net"
	"net/url"
)

// Wire is what a caller that writes chat requests itself (the event-loop
// HTTP front) needs of a plain-HTTP backend: where to connect and the
// start of every request's head, up to the per-request lines (routing
// key, Content-Length). The API key is in Head: it must not be logged.
type Wire struct {
	Addr string
	Head []byte
}

// newWire makes the chat Wire of a base URL, or nil for one that is not
// plain HTTP (TLS stays with the fasthttp client).
func newWire(base, apiKey string) *Wire {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.User != nil {
		return nil
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	head := "POST " + u.EscapedPath() + chatPathOnWire + " HTTP/1.1\r\nHost: " + u.Host +
		"\r\nUser-Agent: rolloutmesh-modelgateway\r\nContent-Type: application/json\r\n"
	if apiKey != "" {
		head += "Authorization: Bearer " + apiKey + "\r\n"
	}
	return &Wire{Addr: addr, Head: []byte(head)}
}

// chatPathOnWire is the chat path Wire's head posts to (the gateway's
// chatPath).
const chatPathOnWire = "/v1/chat/completions"

// Wire returns the backend's chat Wire, or nil when it is not plain HTTP.
func (b *Backend) Wire() *Wire { return b.wire }
