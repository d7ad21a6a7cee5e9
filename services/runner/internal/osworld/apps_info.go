package osworld

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// getVMCommandError is vm_command_error: the stderr of a command run in
// the guest (POST /execute, the command as given, no placeholders).
func getVMCommandError(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	cmd, ok := cfg["command"]
	if !ok {
		return nil, fmt.Errorf("vm_command_error: command is required")
	}
	res, err := s.Guest.Execute(ctx, cmd, metric.Truthy(cfg["shell"]), false)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	return res.Error, nil
}

// getVMTerminalOutput is vm_terminal_output: the focused terminal's text,
// nil when the guest has none.
func getVMTerminalOutput(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	gi, err := s.info("vm_terminal_output")
	if err != nil {
		return nil, err
	}
	out, err := gi.TerminalOutput(ctx)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err == nil && out == nil {
		return noneBecause(ctx, "the guest reports no terminal text")
	}
	if err != nil {
		return nil, err
	}
	return *out, nil
}

// getListDirectory is list_directory: the guest's directory tree under
// path ({"type", "name", "children"}), nil when the guest refuses (no such
// directory).
func getListDirectory(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	p := str(cfg, "path")
	if p == "" {
		return nil, fmt.Errorf("list_directory: path is required")
	}
	gi, err := s.info("list_directory")
	if err != nil {
		return nil, err
	}
	tree, err := gi.ListDirectory(ctx, p)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	if err := listingTruncated(p, tree); err != nil {
		return nil, fmt.Errorf("list_directory: %w", err)
	}
	return tree, nil
}

// size is the {"width", "height"} dict of /screen_size and /window_size,
// with JSON's float64 numbers.
func size(w, h int) map[string]any {
	return map[string]any{"width": float64(w), "height": float64(h)}
}

func getVMScreenSize(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	gi, err := s.info("vm_screen_size")
	if err != nil {
		return nil, err
	}
	w, h, err := gi.ScreenSize(ctx)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	return size(w, h), nil
}

// getVMWindowSize is vm_window_size: the size of the window of WM_CLASS
// app_class_name, nil when there is none (OSWorld's server fails, and its
// controller answers None).
func getVMWindowSize(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	name := str(cfg, "app_class_name")
	if name == "" {
		return nil, fmt.Errorf("vm_window_size: app_class_name is required")
	}
	gi, err := s.info("vm_window_size")
	if err != nil {
		return nil, err
	}
	w, h, err := gi.WindowSize(ctx, name)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	return size(w, h), nil
}

// getVMWallpaper is vm_wallpaper: the wallpaper image saved to
// cache/<dest>. When the guest has none, OSWorld writes an empty file and
// returns its path all the same (its image metrics then score 0).
func getVMWallpaper(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	dest := str(cfg, "dest")
	if dest == "" {
		return nil, fmt.Errorf("vm_wallpaper: dest is required")
	}
	gi, err := s.info("vm_wallpaper")
	if err != nil {
		return nil, err
	}
	img, err := gi.Wallpaper(ctx)
	if refused(err) {
		img, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, fmt.Errorf("vm_wallpaper: %w", err)
	}
	if err := s.writeCache(dest, img); err != nil {
		return nil, fmt.Errorf("vm_wallpaper: %w", err)
	}
	return local, nil
}

// getAccessibilityTree is accessibility_tree: the guest's accessibility
// tree XML; a truncated one is an error (ErrPartial), never scored.
func getAccessibilityTree(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	gi, err := s.info("accessibility_tree")
	if err != nil {
		return nil, err
	}
	tree, err := accessibilityTree(ctx, gi)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	return tree, nil
}

// getShortcutsOnDesktop is shortcuts_on_desktop (chrome.py): the .desktop
// files directly on the guest's desktop, file name to content. As in
// OSWorld, the names come from the directory /desktop_path reports and the
// contents from ~/Desktop.
func getShortcutsOnDesktop(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	gi, err := s.info("shortcuts_on_desktop")
	if err != nil {
		return nil, err
	}
	desk, err := gi.DesktopPath(ctx)
	if err != nil {
		return nil, fmt.Errorf("shortcuts_on_desktop: desktop path: %w", err)
	}
	tree, err := gi.ListDirectory(ctx, desk)
	if err == nil {
		err = listingTruncated(desk, tree)
	}
	if err != nil {
		return nil, fmt.Errorf("shortcuts_on_desktop: %w", err)
	}
	children, _ := tree["children"].([]any)
	out := map[string]any{}
	for _, c := range children {
		node, _ := c.(map[string]any)
		name, _ := node["name"].(string)
		if !strings.HasSuffix(name, ".desktop") {
			continue
		}
		// OSWorld joins os.path.expanduser('~') in the guest; the guest
		// server expands "~" in /file paths the same way.
		p := "~/Desktop/" + name
		data, ok, err := s.guestFile(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("shortcuts_on_desktop: %w", err)
		}
		// OSWorld decodes the bytes as UTF-8 and fails on a missing file
		// or bad bytes; there is no score to give then.
		if !ok {
			return nil, fmt.Errorf("shortcuts_on_desktop: %s could not be read from the guest", p)
		}
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("shortcuts_on_desktop: %s is not UTF-8", p)
		}
		out[name] = string(data)
	}
	return out, nil
}
