package a11y

import (
	"context"
	"fmt"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

// FromWindows builds the tree from the window manager's client list: one
// application per WM_CLASS, one frame per window.
func FromWindows(ctx context.Context, wins []x11.Window) []*Node {
	var apps []*Node
	byClass := map[string]*Node{}
	for _, w := range wins {
		cls := w.Class
		if cls == "" {
			cls = w.Instance
		}
		app := byClass[cls]
		if app == nil {
			app = &Node{Role: "application"}
			app.add("name", cls)
			byClass[cls] = app
			apps = append(apps, app)
		}
		f := &Node{Role: "frame"}
		f.add("name", w.Title)
		f.add("st:enabled", "true")
		f.add("st:sensitive", "true")
		if w.Mapped {
			f.add("st:showing", "true")
			f.add("st:visible", "true")
		}
		if w.Active {
			f.add("st:active", "true")
			f.add("st:focused", "true")
		}
		f.add("attr:window-id", fmt.Sprintf("0x%x", w.ID))
		f.add("attr:class", w.Class)
		f.add("attr:instance", w.Instance)
		if w.PID > 0 {
			f.add("attr:pid", fmt.Sprint(w.PID))
		}
		if w.Mapped {
			f.add("cp:screencoord", fmt.Sprintf("(%d, %d)", w.X, w.Y))
			f.add("cp:size", fmt.Sprintf("(%d, %d)", w.Width, w.Height))
		}
		app.Children = append(app.Children, f)
	}
	return apps
}
