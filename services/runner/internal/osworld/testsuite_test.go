package osworld

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env/py/sandboxtest"
)

// TestTestSuiteTaskLayout evaluates check_python_file_by_test_suite as
// the published tetris and snake tasks do: a multi vm_file saves the
// agent's four modules to the episode's cache folder but gives only the
// first as the result, and the suite imports the others from its own
// folder, as OSWorld's does.
func TestTestSuiteTaskLayout(t *testing.T) {
	sandboxtest.Need(t)
	g, gc := newTestGuest(t)
	g.files["/home/user/Desktop/snake/food.py"] = []byte("FOOD = (1, 1)\n")
	g.files["/home/user/Desktop/snake/settings.py"] = []byte("WIDTH = 20\n")
	g.files["/home/user/Desktop/snake/snake.py"] = []byte("import settings\nclass Snake:\n    width = settings.WIDTH\n")
	cache := t.TempDir()
	suite := "from snake import Snake\nfrom food import FOOD\n\ndef test():\n    return Snake.width == 20 and FOOD == (1, 1)\n"
	if err := os.WriteFile(filepath.Join(cache, "test_suite.py"), []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	task, err := ParseTask([]byte(`{"instruction": "x", "evaluator": {"func": "check_python_file_by_test_suite",
		"result": {"type": "vm_file", "multi": true,
			"path": ["/home/user/Desktop/snake/food.py", "/home/user/Desktop/snake/settings.py", "/home/user/Desktop/snake/snake.py"],
			"dest": ["food.py", "settings.py", "snake.py"]},
		"expected": {"type": "cache_file", "path": "test_suite.py"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := (&Session{Guest: gc, CacheDir: cache}).Evaluate(context.Background(), task, env.EvalInput{})
	if err != nil || ev.Score != 1 {
		t.Errorf("score %v, %v (details %v); want 1", ev.Score, err, ev.Details)
	}
}
