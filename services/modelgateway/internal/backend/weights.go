package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// BeginUpdate takes the backend out of routing for a weight update.
func (b *Backend) BeginUpdate() {
	b.updating.Store(true)
	b.epoch.Add(1)
}

// EndUpdate returns it to routing; ok records the new version.
func (b *Backend) EndUpdate(version int64, ok bool) {
	if ok {
		b.version.Store(version)
	}
	b.epoch.Add(1)
	b.updating.Store(false)
}

// Pause stops the backend from generating: vLLM's /pause, SGLang's
// /pause_generation; a generic server is drained instead (the gateway
// already stopped routing to it) unless abort is set.
func (b *Backend) Pause(ctx context.Context, abort bool) error {
	switch b.cfg.Kind {
	case KindVLLM:
		mode := "wait"
		if abort {
			mode = "abort"
		}
		return b.call(ctx, "/pause?mode="+mode, nil)
	case KindSGLang:
		mode := "in_place"
		if abort {
			mode = "abort"
		}
		return b.call(ctx, "/pause_generation", map[string]any{"mode": mode})
	}
	if abort {
		return nil
	}
	for b.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %d requests still in flight: %w", b.Load(), ctx.Err())
		case <-b.clk.After(10 * time.Millisecond):
		}
	}
	return nil
}

// LoadWeights loads weights from source (when set) and records version on
// the server: vLLM reloads through /collective_rpc and commits the version
// with /update_weight_version; SGLang uses /update_weights_from_disk. A
// generic server has nothing to call: the weights were synced out of band.
func (b *Backend) LoadWeights(ctx context.Context, version int64, source string) error {
	v := strconv.FormatInt(version, 10)
	switch b.cfg.Kind {
	case KindVLLM:
		if source != "" {
			if err := b.call(ctx, "/collective_rpc", map[string]any{
				"method": "reload_weights", "kwargs": map[string]any{"weights_path": source},
			}); err != nil {
				return err
			}
		}
		return b.call(ctx, "/update_weight_version", map[string]any{"weight_version": v})
	case KindSGLang:
		if source == "" {
			return b.call(ctx, "/update_weight_version", map[string]any{"new_version": v, "weight_version": v})
		}
		return b.call(ctx, "/update_weights_from_disk", map[string]any{
			"model_path": source, "weight_version": v, "flush_cache": true,
		})
	}
	return nil
}

// Resume lets the backend generate again.
func (b *Backend) Resume(ctx context.Context) error {
	switch b.cfg.Kind {
	case KindVLLM:
		return b.call(ctx, "/resume", nil)
	case KindSGLang:
		return b.call(ctx, "/continue_generation", map[string]any{})
	}
	return nil
}

// call posts a small JSON control request and checks for 2xx.
func (b *Backend) call(ctx context.Context, path string, body any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s: encode: %w", path, err)
		}
	}
	resp, err := b.Send(ctx, path, raw, "")
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: status %d: %s", path, resp.StatusCode, msg)
	}
	return nil
}
