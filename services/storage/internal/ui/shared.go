package ui

import (
	"context"
	"fmt"
	"time"
)

// sharedTimeout bounds work that concurrent viewers share (a rollout's
// statistics, a thumbnail).
const sharedTimeout = 30 * time.Second

// shared runs fn once for all the callers asking for key at the same
// time. fn runs on a context of its own, detached from the first caller's
// request and bounded by sharedTimeout: a viewer that closes its tab must
// not fail the call for the others waiting on it. A caller that goes away
// stops waiting (ctx.Err()); the call goes on for the rest, and fn should
// keep what it made (a cache) so that it is not lost when nobody waits.
func (h *Handler) shared(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	ch := h.flight.DoChan(key, func() (v any, err error) {
		// DoChan runs fn on a goroutine of its own, where a panic would
		// end the process rather than one request.
		defer func() {
			if p := recover(); p != nil {
				v, err = nil, fmt.Errorf("viewer work %s panicked: %v", key, p)
			}
		}()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
		defer cancel()
		return fn(sctx)
	})
	if h.sharedWait != nil {
		h.sharedWait(key)
	}
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
