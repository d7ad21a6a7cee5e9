package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/command"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/pyautogui"
	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

var lookPath = exec.LookPath

func commandSpec(argv []string) command.Spec { return command.Spec{Argv: argv} }

// commandField decodes OSWorld's "command": a string or a list of strings.
func commandField(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("command required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, badRequest("command must be a string or a list of strings")
	}
	return l, nil
}

type execRequest struct {
	Command json.RawMessage `json:"command"`
	Shell   bool            `json:"shell"`
	Timeout *float64        `json:"timeout"`
}

// DefaultExecTimeout is OSWorld's subprocess timeout for /execute.
const DefaultExecTimeout = 120 * time.Second

func (req *execRequest) timeout() (time.Duration, error) {
	if req.Timeout == nil {
		return DefaultExecTimeout, nil
	}
	if *req.Timeout <= 0 || *req.Timeout > 3600 {
		return 0, badRequest("timeout must be in (0, 3600] seconds")
	}
	return time.Duration(*req.Timeout * float64(time.Second)), nil
}

type execResult struct {
	Status     string `json:"status"`
	Output     string `json:"output"`
	Error      string `json:"error"`
	Returncode int    `json:"returncode"`
}

// runExec runs an /execute request: interpreted pyautogui code, or a
// command. A non-nil error is an HTTP error answer.
func (s *Server) runExec(ctx context.Context, req execRequest) (execResult, error) {
	cmd, err := commandField(req.Command)
	if err != nil {
		return execResult{}, err
	}
	timeout, err := req.timeout()
	if err != nil {
		return execResult{}, err
	}
	var unsupported error
	if argv, ok := cmd.([]string); ok && !req.Shell {
		if code, ok := pyautogui.CodeFromCommand(argv); ok {
			res, handled, err := s.runPyautogui(ctx, code, timeout)
			if handled {
				return res, err
			}
			unsupported = err
		}
	}
	argv, err := s.run.Argv(cmd, req.Shell)
	if err != nil {
		return execResult{}, badRequest("%v", err)
	}
	out, err := s.run.Run(ctx, command.Spec{Argv: argv, Timeout: timeout})
	if errors.Is(err, command.ErrTimeout) {
		return execResult{}, errorf(http.StatusInternalServerError, "Command '%s' timed out after %v", strings.Join(argv, " "), timeout)
	}
	if err != nil {
		if unsupported != nil {
			return execResult{}, errorf(http.StatusInternalServerError, "%v; and it cannot run as a command: %v", unsupported, err)
		}
		return execResult{}, errorf(http.StatusInternalServerError, "%v", err)
	}
	// OSWorld's server reads the output as text (subprocess.run with
	// text=True): output that is not UTF-8 raises there, which it answers
	// with 500, and line ends are universal newlines.
	stdout, err := command.PyText(out.RawStdout)
	if err != nil {
		return execResult{}, errorf(http.StatusInternalServerError, "%v", err)
	}
	stderr, err := command.PyText(out.RawStderr)
	if err != nil {
		return execResult{}, errorf(http.StatusInternalServerError, "%v", err)
	}
	return execResult{Status: "success", Output: stdout, Error: stderr, Returncode: out.Code}, nil
}

// runPyautogui interprets code; handled is false when the code is outside
// the subset and should run as a command (err then says why).
func (s *Server) runPyautogui(ctx context.Context, code string, timeout time.Duration) (execResult, bool, error) {
	prog, err := pyautogui.Compile(code)
	if pyautogui.IsUnsupported(err) {
		return execResult{}, false, err
	}
	if err != nil {
		// What Python would do: exit status 1 with the error on stderr.
		return execResult{Status: "success", Error: err.Error() + "\n", Returncode: 1}, true, nil
	}
	d, derr := s.display()
	if derr != nil {
		return execResult{}, true, derr
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := prog.Run(ctx, d.in, d.d)
	if err != nil {
		return execResult{Status: "success", Output: res.Output, Error: res.Warnings + err.Error() + "\n", Returncode: 1}, true, nil
	}
	return execResult{Status: "success", Output: res.Output, Error: res.Warnings, Returncode: 0}, true, nil
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) error {
	var req execRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	res, err := s.runExec(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) executeWithVerification(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		execRequest
		Verification struct {
			WindowExists   string          `json:"window_exists"`
			CommandSuccess json.RawMessage `json:"command_success"`
		} `json:"verification"`
		MaxWaitTime   *float64 `json:"max_wait_time"`
		CheckInterval *float64 `json:"check_interval"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	maxWait, interval := 10.0, 1.0
	if req.MaxWaitTime != nil {
		maxWait = *req.MaxWaitTime
	}
	if req.CheckInterval != nil {
		interval = *req.CheckInterval
	}
	if maxWait < 0 || maxWait > 600 || interval <= 0 || interval > 60 {
		return badRequest("max_wait_time must be in [0, 600] and check_interval in (0, 60] seconds")
	}
	var check any
	if len(req.Verification.CommandSuccess) > 0 && string(req.Verification.CommandSuccess) != "null" {
		c, err := commandField(req.Verification.CommandSuccess)
		if err != nil {
			return badRequest("verification.command_success must be a string or a list of strings")
		}
		check = c
	}
	var disp *desktop
	if req.Verification.WindowExists != "" {
		d, err := s.display()
		if err != nil {
			return err
		}
		disp = d
	}
	res, err := s.runExec(r.Context(), req.execRequest)
	if err != nil {
		return err
	}
	start := time.Now()
	// The checks and the waits between them share one deadline,
	// max_wait_time from now: a check started just before it is cut by the
	// time left, not by its own 30 s timeout, and so is the wait for the
	// next check.
	vctx, cancel := context.WithTimeout(r.Context(), time.Duration(maxWait*float64(time.Second)))
	defer cancel()
	verified := func(ctx context.Context) bool {
		if disp != nil {
			wins, err := disp.d.Windows(ctx)
			if err != nil {
				return false
			}
			found := false
			for _, win := range wins {
				if x11.Match(win, req.Verification.WindowExists, false, false) {
					found = true
				}
			}
			if !found {
				return false
			}
		}
		if check != nil {
			argv, err := s.run.Argv(check, req.Shell || isString(check))
			if err != nil {
				return false
			}
			out, err := s.run.Run(ctx, command.Spec{Argv: argv, Timeout: 30 * time.Second})
			if err != nil || out.Code != 0 {
				return false
			}
		}
		return true
	}
	for vctx.Err() == nil {
		if verified(vctx) {
			writeJSON(w, http.StatusOK, map[string]any{"status": "success", "output": res.Output, "error": res.Error,
				"returncode": res.Returncode, "verification": "passed", "wait_time": time.Since(start).Seconds()})
			return nil
		}
		t := time.NewTimer(time.Duration(interval * float64(time.Second)))
		select {
		case <-vctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	if err := r.Context().Err(); err != nil {
		return err
	}
	writeJSON(w, http.StatusInternalServerError, map[string]any{"status": "verification_failed", "output": res.Output,
		"error": res.Error, "returncode": res.Returncode, "verification": "failed",
		"message": fmt.Sprintf("verification did not pass within %v s", maxWait), "wait_time": time.Since(start).Seconds()})
	return nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

// launch starts a command without waiting, as OSWorld's Popen does.
func (s *Server) launch(w http.ResponseWriter, r *http.Request) error {
	var req execRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	cmd, err := commandField(req.Command)
	if err != nil {
		return err
	}
	argv, err := s.run.Argv(cmd, req.Shell)
	if err != nil {
		return badRequest("%v", err)
	}
	if err := s.run.Launch(command.Spec{Argv: argv}); err != nil {
		return errorf(http.StatusInternalServerError, "%v", err)
	}
	display := strings.Join(argv, " ")
	if c, ok := cmd.(string); ok {
		display = c
	}
	writeText(w, http.StatusOK, display+" launched successfully")
	return nil
}

// pythonBinary prefers Debian's interpreter, as OSWorld's server does.
func pythonBinary() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

func (s *Server) runPython(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Code string `json:"code"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Code == "" {
		return badRequest("code required")
	}
	f, err := os.CreateTemp("", "python_exec_*.py")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(req.Code); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := s.run.Run(r.Context(), command.Spec{Argv: []string{pythonBinary(), f.Name()}, Timeout: 30 * time.Second})
	if errors.Is(err, command.ErrTimeout) {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"status": "error", "message": "Execution timeout: code took more than 30 seconds",
			"need_more": false, "output": out.Stdout, "error": "Execution timeout", "return_code": -1})
		return nil
	}
	if err != nil {
		return errorf(http.StatusInternalServerError, "%v", err)
	}
	status := "success"
	if out.Code != 0 {
		status = "error"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "message": out.Stdout + out.Stderr, "need_more": false,
		"output": out.Stdout, "error": out.Stderr, "return_code": out.Code})
	return nil
}

// runBashScript runs a script with bash. OSWorld's handler (at f6cee71)
// calls an undefined _append_event and always answers 500; this does what
// it evidently meant, as the later osworld-server does.
func (s *Server) runBashScript(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Script     string   `json:"script"`
		Timeout    *float64 `json:"timeout"`
		WorkingDir string   `json:"working_dir"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Script == "" {
		return badRequest("script required")
	}
	timeout := 100.0
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout <= 0 || timeout > 3600 {
		return badRequest("timeout must be in (0, 3600] seconds")
	}
	dir := ""
	if req.WorkingDir != "" {
		dir = s.run.ExpandPath(req.WorkingDir)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return badRequest("working_dir %s is not a directory", dir)
		}
	}
	script := req.Script
	if !strings.HasPrefix(script, "#!") {
		script = "#!/bin/bash\n" + script
	}
	f, err := os.CreateTemp("", "bash_script_*.sh")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return err
	}
	f.Close()
	out, err := s.run.Run(r.Context(), command.Spec{Argv: []string{"/bin/bash", f.Name()}, Dir: dir,
		Timeout: time.Duration(timeout * float64(time.Second))})
	if errors.Is(err, command.ErrTimeout) {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"status": "error",
			"output": fmt.Sprintf("Script execution timed out after %v seconds", timeout), "error": "", "returncode": -1})
		return nil
	}
	if err != nil {
		return errorf(http.StatusInternalServerError, "%v", err)
	}
	status := "success"
	if out.Code != 0 {
		status = "error"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": status, "output": out.Stdout + out.Stderr, "error": "", "returncode": out.Code})
	return nil
}
