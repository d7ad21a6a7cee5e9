package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// modelCheckTimeout bounds the model server check: a server that does not
// list its models within it will not answer an agent either.
const modelCheckTimeout = 15 * time.Second

// checkModelServer lists the models of the OpenAI-compatible server at base
// (GET {base}/models, as vLLM, SGLang and OpenAI serve it) before anything
// starts, so that an unreachable server or a wrong model name stops the
// command with what failed rather than failing every episode. It returns
// the model to use: model itself when the server lists it, or the server's
// only model when model is empty.
func checkModelServer(ctx context.Context, base, apiKey, model string) (string, error) {
	models, err := listModels(ctx, base, apiKey)
	if err != nil {
		return "", fmt.Errorf("model server %s: %s", base, err)
	}
	switch {
	case model != "" && (len(models) == 0 || slices.Contains(models, model)):
		// Some servers list nothing and serve what they are asked for.
		return model, nil
	case model != "":
		return "", fmt.Errorf("model server %s does not serve --model %q; it serves %s", base, model, quoteList(models))
	case len(models) == 1:
		return models[0], nil
	case len(models) == 0:
		return "", fmt.Errorf("model server %s lists no models: give --model", base)
	}
	return "", fmt.Errorf("model server %s serves %d models, so give --model with one of %s", base, len(models), quoteList(models))
}

// listModels returns the ids the server lists, or why it could not.
func listModels(ctx context.Context, base, apiKey string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, modelCheckTimeout)
	defer cancel()
	// The gateway accepts the base URL with or without /v1; so does this.
	u := strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1") + "/v1/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, errors.New(transportProblem(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %s", u, transportProblem(err))
	}
	if resp.StatusCode != http.StatusOK {
		msg := serverMessage(body)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += " (is OPENAI_API_KEY set to a key of this server?)"
		}
		return nil, fmt.Errorf("GET %s answered %s%s", u, resp.Status, msg)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET %s: not an OpenAI model list (is this an OpenAI-compatible server?)", u)
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids, nil
}

// transportProblem names what went wrong on the way to the server in the
// words of the system ("connection refused", "no such host", "i/o
// timeout"), without the URL and operation that wrap them.
func transportProblem(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", modelCheckTimeout)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsNotFound {
			return "no such host " + dnsErr.Name
		}
		return "cannot resolve " + dnsErr.Name + ": " + dnsErr.Err
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		// The innermost error: "connect: connection refused" reads
		// "connection refused".
		inner := opErr.Err
		for {
			next := errors.Unwrap(inner)
			if next == nil {
				break
			}
			inner = next
		}
		return inner.Error()
	}
	var uErr *url.Error
	if errors.As(err, &uErr) {
		return uErr.Err.Error()
	}
	return err.Error()
}

// serverMessage is the message of an OpenAI error body, or its first bytes.
func serverMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func quoteList(ss []string) string {
	const show = 10
	q := make([]string, 0, min(len(ss), show))
	for i, s := range ss {
		if i == show {
			break
		}
		q = append(q, fmt.Sprintf("%q", s))
	}
	out := strings.Join(q, ", ")
	if len(ss) > show {
		out += fmt.Sprintf(" and %d more", len(ss)-show)
	}
	return out
}
