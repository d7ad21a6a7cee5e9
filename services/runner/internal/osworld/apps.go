package osworld

import (
	"context"
	"errors"
	"fmt"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
)

// appSteps and appGetters are the steps and getters for the desktop
// applications other than Chrome (VLC, GIMP, LibreOffice, VS Code, the OS
// itself): OSWorld's desktop_env/evaluators/getters other than chrome.py,
// plus shortcuts_on_desktop, which lives there but reads the OS. The
// Google Drive getter and steps are in google_drive.go.
var (
	appSteps   = map[string]stepFunc{}
	appGetters = map[string]getterFunc{
		"content_from_vm_file":      getContentFromVMFile,
		"vm_command_error":          getVMCommandError,
		"vm_terminal_output":        getVMTerminalOutput,
		"list_directory":            getListDirectory,
		"vm_screen_size":            getVMScreenSize,
		"vm_window_size":            getVMWindowSize,
		"vm_wallpaper":              getVMWallpaper,
		"accessibility_tree":        getAccessibilityTree,
		"shortcuts_on_desktop":      getShortcutsOnDesktop,
		"rule_relativeTime":         getRuleRelativeTime,
		"vlc_playing_info":          getVLCPlayingInfo,
		"vlc_config":                getVLCConfig,
		"default_video_player":      getDefaultVideoPlayer,
		"gimp_config_file":          getGIMPConfigFile,
		"vscode_config":             getVSCodeConfig,
		"audio_in_slide":            getAudioInSlide,
		"background_image_in_slide": getBackgroundImageInSlide,
	}
)

// guestInfo is what the OS getters need of the guest beyond guestAPI: the
// read-only endpoints of OSWorld's server, implemented by *guest.Client.
type guestInfo interface {
	TerminalOutput(ctx context.Context) (*string, error)
	Accessibility(ctx context.Context) (string, error)
	ScreenSize(ctx context.Context) (int, int, error)
	WindowSize(ctx context.Context, appClass string) (int, int, error)
	Wallpaper(ctx context.Context) ([]byte, error)
	DesktopPath(ctx context.Context) (string, error)
	ListDirectory(ctx context.Context, path string) (map[string]any, error)
}

var _ guestInfo = (*guest.Client)(nil)

func (s *Session) info(getter string) (guestInfo, error) {
	gi, ok := s.Guest.(guestInfo)
	if !ok {
		return nil, fmt.Errorf("%s: the guest client cannot read the guest's state", getter)
	}
	return gi, nil
}

// refused reports whether err is the guest answering with a failure
// status. OSWorld's controller turns any failed answer into None (after
// its retries), which metrics score 0; a guest that does not answer at all
// stays an error, so the episode fails with env_error instead of scoring a
// broken environment 0.
func refused(err error) bool {
	var he *guest.HTTPError
	return errors.As(err, &he)
}

// refusal says what the guest answered when it refused: the status and
// its message.
func refusal(err error) string {
	var he *guest.HTTPError
	if !errors.As(err, &he) {
		return err.Error()
	}
	return fmt.Sprintf("the guest answered %s with %d: %s", he.Path, he.Status, he.Message())
}

// pyPrefix is what OSWorld's PythonController.execute_python_command puts
// before the code it runs in the guest.
const pyPrefix = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

// runPython runs code in the guest as execute_python_command does and
// returns its stdout.
func (s *Session) runPython(ctx context.Context, code string) (string, error) {
	res, err := s.Guest.Execute(ctx, []string{"python", "-c", pyPrefix + code}, false, false)
	if err != nil {
		return "", err
	}
	return res.Output, nil
}

// guestFile fetches a guest file; ok is false (Python's None) when the
// guest refuses, as get_file answers.
func (s *Session) guestFile(ctx context.Context, p string) (data []byte, ok bool, err error) {
	data, err = s.Guest.File(ctx, p)
	if refused(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
