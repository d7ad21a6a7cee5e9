package osworld

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// vlcStatusScript fetches VLC's HTTP interface status from inside the
// guest, where VLC listens (port 8080, password "password", as OSWorld's
// image configures it), and prints it as base64 so that any bytes survive
// /execute's text output. Going through the guest avoids depending on the
// host reaching the guest's port 8080, which Docker setups remap.
const vlcStatusScript = `import base64, sys, urllib.request
req = urllib.request.Request("http://localhost:%d/requests/status.xml", headers={"Authorization": "Basic " + base64.b64encode(b":password").decode()})
try:
    body = urllib.request.urlopen(req, timeout=20).read()
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(1)
sys.stdout.write(base64.b64encode(body).decode())
`

// vlcPort is VLC's HTTP port in the guest; tests point it elsewhere.
var vlcPort = 8080

// getVLCPlayingInfo is vlc_playing_info: VLC's status.xml saved to
// cache/<dest>, nil when VLC does not answer 200.
func getVLCPlayingInfo(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	dest := str(cfg, "dest")
	if dest == "" {
		return nil, fmt.Errorf("vlc_playing_info: dest is required")
	}
	res, err := s.Guest.Execute(ctx, []string{"python3", "-c", fmt.Sprintf(vlcStatusScript, vlcPort)}, false, false)
	if refused(err) {
		return noneBecause(ctx, "%s", refusal(err))
	}
	if err != nil {
		return nil, err
	}
	if res.ReturnCode != 0 {
		return noneBecause(ctx, "VLC's HTTP interface did not answer: %s", strings.TrimSpace(res.Error))
	}
	body, err := base64.StdEncoding.DecodeString(strings.TrimSpace(res.Output))
	if err != nil {
		return nil, fmt.Errorf("vlc_playing_info: the guest's answer is not base64: %v", err)
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, fmt.Errorf("vlc_playing_info: %w", err)
	}
	if err := s.writeCache(dest, body); err != nil {
		return nil, fmt.Errorf("vlc_playing_info: %w", err)
	}
	return local, nil
}

// homeFile saves the guest file ~/<rel> to cache/<dest>; ok is false when
// the guest does not give it. OSWorld finds the path with
// os.path.expanduser in the guest; the guest server expands "~" in /file
// paths the same way, without needing a Python in the guest.
func (s *Session) homeFile(ctx context.Context, rel, dest string) (local string, ok bool, err error) {
	data, ok, err := s.guestFile(ctx, "~/"+rel)
	if err != nil || !ok {
		return "", false, err
	}
	if local, err = s.cachePath(dest); err != nil {
		return "", false, err
	}
	if err := s.writeCache(dest, data); err != nil {
		return "", false, err
	}
	return local, true, nil
}

// getVLCConfig is vlc_config: ~/.config/vlc/vlcrc saved to cache/<dest>.
// OSWorld fails when the file is missing (it writes None), so that is an
// error here too, not a score.
func getVLCConfig(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	dest := str(cfg, "dest")
	if dest == "" {
		return nil, fmt.Errorf("vlc_config: dest is required")
	}
	local, ok, err := s.homeFile(ctx, ".config/vlc/vlcrc", dest)
	if err != nil {
		return nil, fmt.Errorf("vlc_config: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("vlc_config: the guest has no ~/.config/vlc/vlcrc")
	}
	return local, nil
}

// getGIMPConfigFile is gimp_config_file: ~/.config/GIMP/2.10/<file_name>
// saved to cache/<dest>, nil when missing or empty.
func getGIMPConfigFile(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	name, dest := str(cfg, "file_name"), str(cfg, "dest")
	if name == "" || dest == "" {
		return nil, fmt.Errorf("gimp_config_file: file_name and dest are required")
	}
	data, ok, err := s.guestFile(ctx, "~/.config/GIMP/2.10/"+name)
	if err != nil {
		return nil, fmt.Errorf("gimp_config_file: %w", err)
	}
	if !ok {
		return noneBecause(ctx, "the guest has no ~/.config/GIMP/2.10/%s", name)
	}
	if len(data) == 0 {
		return noneBecause(ctx, "~/.config/GIMP/2.10/%s is empty", name)
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, fmt.Errorf("gimp_config_file: %w", err)
	}
	if err := s.writeCache(dest, data); err != nil {
		return nil, fmt.Errorf("gimp_config_file: %w", err)
	}
	return local, nil
}

// videoTypes are the video/<type> MIME types OSWorld's
// get_default_video_player asks xdg-mime about, duplicates included: they
// weigh in the vote.
var videoTypes = []string{"3gp", "3gp", "3gpp", "3gpp", "3gpp2", "3gpp2", "avi", "avi", "divx", "divx", "dv", "dv", "fli", "fli", "flv", "flv", "mp2t", "mp2t", "mp4", "mp4", "mp4v-es", "mp4v-es", "mpeg", "mpeg", "mpeg-system", "mpeg-system", "msvideo", "msvideo", "ogg", "ogg", "quicktime", "quicktime", "vnd.divx", "vnd.divx", "vnd.mpegurl", "vnd.mpegurl", "vnd.rn-realvideo", "vnd.rn-realvideo", "webm", "webm", "x-anim", "x-anim", "x-avi", "x-avi", "x-flc", "x-flc", "x-fli", "x-fli", "x-flv", "x-flv", "x-m4v", "x-m4v", "x-matroska", "x-matroska", "x-mpeg", "x-mpeg", "x-mpeg-system", "x-mpeg-system", "x-mpeg2", "x-mpeg2", "x-ms-asf", "x-ms-asf", "x-ms-asf-plugin", "x-ms-asf-plugin", "x-ms-asx", "x-ms-asx", "x-ms-wm", "x-ms-wm", "x-ms-wmv", "x-ms-wmv", "x-ms-wmx", "x-ms-wmx", "x-ms-wvx", "x-ms-wvx", "x-msvideo", "x-msvideo", "x-nsv", "x-nsv", "x-ogm", "x-ogm", "x-ogm+ogg", "x-theora", "x-theora", "x-theora+ogg", "x-theora+ogg"}

// getDefaultVideoPlayer is default_video_player: the answer of
// `xdg-mime query default video/<type>` most types give (its output as is,
// newline included; the first seen wins a tie, as Counter.most_common),
// "unknown" when none answers.
func getDefaultVideoPlayer(ctx context.Context, s *Session, _ map[string]any) (any, error) {
	votes := map[string]int{}
	var order []string
	for _, typ := range videoTypes {
		res, err := s.Guest.Execute(ctx, []string{"xdg-mime", "query", "default", "video/" + typ}, false, false)
		if refused(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if res.Output == "" {
			continue
		}
		if votes[res.Output] == 0 {
			order = append(order, res.Output)
		}
		votes[res.Output]++
	}
	best := "unknown"
	for _, app := range order {
		if best == "unknown" || votes[app] > votes[best] {
			best = app
		}
	}
	return best, nil
}

// vscodeWorkspaceScan is OSWorld's fallback when the file an extension
// command should write is missing: every workspace.json VS Code keeps.
const vscodeWorkspaceScan = "/bin/bash -lc 'find /home/user/.config/Code/User/workspaceStorage -name workspace.json -exec cat {} \\; 2>/dev/null'"

// getVSCodeConfig is vscode_config: run a command of the VS Code command
// palette (the extension writes its answer to a file), then fetch that
// file; when it is missing, the workspaces VS Code knows, as OSWorld does.
func getVSCodeConfig(ctx context.Context, s *Session, cfg map[string]any) (any, error) {
	command, p, dest := str(cfg, "vscode_extension_command"), str(cfg, "path"), str(cfg, "dest")
	if command == "" || p == "" || dest == "" {
		return nil, fmt.Errorf("vscode_config: vscode_extension_command, path and dest are required")
	}
	// OSWorld only logs a failed activation.
	_ = s.Guest.Window(ctx, "activate", "Visual Studio Code", false, false)
	if err := s.sleep(ctx, 500*time.Millisecond); err != nil {
		return nil, err
	}
	// get_replay's three actions, each its own python call, with the text
	// quoted as OSWorld quotes it.
	for _, code := range []string{
		"pyautogui.hotkey('ctrl', 'shift', 'p')",
		"pyautogui.typewrite('" + command + "')",
		"pyautogui.press('enter')",
	} {
		if _, err := s.runPython(ctx, code); err != nil && !refused(err) {
			return nil, fmt.Errorf("vscode_config: %w", err)
		}
	}
	if err := s.sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	v, err := s.vmFile(ctx, p, dest)
	if err != nil {
		return nil, fmt.Errorf("vscode_config: %w", err)
	}
	if v != nil {
		return v, nil
	}
	res, err := s.Guest.Execute(ctx, vscodeWorkspaceScan, true, false)
	if err != nil && !refused(err) {
		return nil, fmt.Errorf("vscode_config: %w", err)
	}
	if err != nil || res.Output == "" {
		return "", nil
	}
	local, err := s.cachePath(dest)
	if err != nil {
		return nil, fmt.Errorf("vscode_config: %w", err)
	}
	if err := s.writeCache(dest, []byte(res.Output)); err != nil {
		return nil, fmt.Errorf("vscode_config: %w", err)
	}
	return local, nil
}
