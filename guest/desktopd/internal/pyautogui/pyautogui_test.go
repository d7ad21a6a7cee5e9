package pyautogui

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCompile(t *testing.T) {
	const prefix = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
	tests := []struct {
		name    string
		code    string
		wantOps []string // function names in order
		wantErr string   // "syntax", "unsupported", or a Python error kind
	}{
		{"osworld click", prefix + "pyautogui.click(100, 200)", []string{"pyautogui.click"}, ""},
		{"multi line", prefix + "\npyautogui.moveTo(10, 20)\npyautogui.typewrite('hi\\n', interval=0.05)\ntime.sleep(0.5)\n", []string{"pyautogui.moveTo", "pyautogui.typewrite", "time.sleep"}, ""},
		{"hotkey and press", prefix + "pyautogui.hotkey('ctrl', 'shift', 't'); pyautogui.press(['enter', 'tab'], presses=2)", []string{"pyautogui.hotkey", "pyautogui.press"}, ""},
		{"clipboard paste", "import pyautogui, pyperclip\npyperclip.copy('héllo')\npyautogui.hotkey('ctrl', 'v')", []string{"pyperclip.copy", "pyautogui.hotkey"}, ""},
		{"variables and arithmetic", prefix + "x, y = 960 / 2, 540 // 2 + 1\npyautogui.click(x=x, y=y, button='right')", []string{"pyautogui.click"}, ""},
		{"tuple point", prefix + "pyautogui.click((10, 20)); pyautogui.dragTo(30, 40, duration=1.0, button='left')", []string{"pyautogui.click", "pyautogui.dragTo"}, ""},
		{"scrolls", prefix + "pyautogui.scroll(-5, x=100, y=100); pyautogui.hscroll(3)", []string{"pyautogui.scroll", "pyautogui.hscroll"}, ""},
		{"aliased import and print", "import pyautogui as pag\npag.write(\"a\" \"b\")\nprint('done', 1)", []string{"pyautogui.write", "print"}, ""},
		{"triple quoted", prefix + "pyautogui.write('''line1\nline2''')", []string{"pyautogui.write"}, ""},
		{"comment and continuation", prefix + "pyautogui.click(1, \\\n 2)  # click\n", []string{"pyautogui.click"}, ""},
		{"pause setting", prefix + "pyautogui.PAUSE = 0.5\npyautogui.press('a')", []string{"pyautogui.press"}, ""},
		{"unterminated string", prefix + "pyautogui.write('abc)", nil, "syntax"},
		{"unclosed paren", prefix + "pyautogui.click(1, 2", nil, "syntax"},
		{"missing comma", prefix + "pyautogui.click(1 2)", nil, "syntax"},
		{"stray char", prefix + "pyautogui.click(1, 2) $", nil, "syntax"},
		{"unexpected indent", "  pyautogui.click(1, 2)", nil, "syntax"},
		{"positional after keyword", prefix + "pyautogui.click(x=1, 2)", nil, "syntax"},
		{"for loop", prefix + "for i in range(3): pyautogui.press('a')", nil, "unsupported"},
		{"locate", prefix + "pyautogui.click(pyautogui.locateCenterOnScreen('x.png'))", nil, "unsupported"},
		{"other module", "import os\nos.system('ls')", nil, "unsupported"},
		{"subprocess", "import pyautogui, subprocess; subprocess.run(['ls'])", nil, "unsupported"},
		{"undefined name", prefix + "pyautogui.click(x, 2)", nil, "NameError"},
		{"bad keyword", prefix + "pyautogui.click(1, 2, foo=3)", nil, "TypeError"},
		{"bad button", prefix + "pyautogui.click(1, 2, button='thumb')", nil, "ValueError"},
		{"missing arg", prefix + "pyautogui.write()", nil, "TypeError"},
		{"zero division", prefix + "pyautogui.click(1/0, 2)", nil, "ZeroDivisionError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog, err := Compile(tt.code)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Compile(%q) error %v, want none", tt.code, err)
				}
				var got []string
				for _, o := range prog.ops {
					got = append(got, o.fn)
				}
				if strings.Join(got, ",") != strings.Join(tt.wantOps, ",") {
					t.Errorf("ops got %v, want %v", got, tt.wantOps)
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile(%q) succeeded, want %s error", tt.code, tt.wantErr)
			}
			var se *SyntaxError
			var pe *pythonError
			switch {
			case tt.wantErr == "syntax" && !errors.As(err, &se),
				tt.wantErr == "unsupported" && !IsUnsupported(err),
				tt.wantErr != "syntax" && tt.wantErr != "unsupported" && (!errors.As(err, &pe) || pe.Kind != tt.wantErr):
				t.Errorf("Compile(%q) error %v (%T), want %s", tt.code, err, err, tt.wantErr)
			}
		})
	}
}

func TestStringLiterals(t *testing.T) {
	tests := []struct{ src, want string }{
		{`'a\nb'`, "a\nb"},
		{`"tab\there"`, "tab\there"},
		{`r'C:\new'`, `C:\new`},
		{`'\x41\u00e9\U0001F600'`, "Aé😀"},
		{`'\101'`, "A"},
		{`'it\'s'`, "it's"},
		{`'<'`, "<"},
		{`'a' "b" '''c'''`, "abc"},
		{`'\q'`, `\q`},
	}
	for _, tt := range tests {
		prog, err := Compile("import pyautogui\npyautogui.write(" + tt.src + ")")
		if err != nil {
			t.Errorf("Compile(%s): %v", tt.src, err)
			continue
		}
		if got := prog.ops[0].args["message"]; got != tt.want {
			t.Errorf("literal %s got %q, want %q", tt.src, got, tt.want)
		}
	}
}

func TestPauseFollowsAssignments(t *testing.T) {
	prog, err := Compile("import pyautogui\npyautogui.press('a')\npyautogui.PAUSE = 0\npyautogui.press('b')\npyautogui.press('c', _pause=False)")
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{100 * time.Millisecond, 0, 0}
	for i, o := range prog.ops {
		if o.pause != want[i] {
			t.Errorf("op %d pause got %v, want %v", i, o.pause, want[i])
		}
	}
}

func TestCodeFromCommand(t *testing.T) {
	tests := []struct {
		argv []string
		ok   bool
	}{
		{[]string{"python", "-c", "import pyautogui; pyautogui.click()"}, true},
		{[]string{"/usr/bin/python3", "-c", "import pyautogui"}, true},
		{[]string{"python3.11", "-c", "import pyautogui"}, true},
		{[]string{"python", "-c", "print(1)"}, false},
		{[]string{"bash", "-c", "pyautogui"}, false},
		{[]string{"python", "script.py"}, false},
	}
	for _, tt := range tests {
		if _, ok := CodeFromCommand(tt.argv); ok != tt.ok {
			t.Errorf("CodeFromCommand(%q) got %v, want %v", tt.argv, ok, tt.ok)
		}
	}
}

func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		"import pyautogui; pyautogui.click(1, 2)",
		"pyautogui.write('a\\nb', interval=0.1)\ntime.sleep(1)",
		"x, y = (1, 2)\npyautogui.moveTo(x*2, -y)",
		"pyautogui.hotkey(*['ctrl', 'c'])",
		"r'''abc\\'''' + f'x'",
		"0x1F + 0b10 - 1_000 // 3 ** 2 % 7 | 1 & 2 ^ ~3",
		"(1,)[0]",
		"\\\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		prog, err := Compile(src)
		if err == nil && prog == nil {
			t.Fatal("nil program without error")
		}
		if err != nil && err.Error() == "" {
			t.Fatal("empty error message")
		}
	})
}
