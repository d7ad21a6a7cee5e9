package a11y

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/x11"
)

func TestRenderIsValidNamespacedXML(t *testing.T) {
	n := &Node{Role: "push button", Text: "a < b & \x01c\ufffc"}
	n.add("name", `say "hi"`+"\n")
	n.add("st:enabled", "true")
	n.add("attr:weird key!", "v")
	apps := []*Node{{Role: "application", Attrs: []Attr{{"name", "app"}}, Children: []*Node{n}}}
	out := Render("atspi", false, apps)
	var doc struct {
		XMLName xml.Name
		Source  string `xml:"source,attr"`
		App     struct {
			Button struct {
				Name    string `xml:"name,attr"`
				Enabled string `xml:"https://accessibility.ubuntu.example.org/ns/state enabled,attr"`
				Text    string `xml:",chardata"`
			} `xml:"push-button"`
		} `xml:"application"`
	}
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("Render output does not parse: %v\n%s", err, out)
	}
	if doc.XMLName.Local != "desktop-frame" || doc.Source != "atspi" {
		t.Errorf("root got %v source %q", doc.XMLName, doc.Source)
	}
	b := doc.App.Button
	if b.Name != "say \"hi\"\n" || b.Enabled != "true" || b.Text != "a < b & c" {
		t.Errorf("button got %+v", b)
	}
	if !strings.Contains(out, `attr:weird-key_="v"`) {
		t.Errorf("invalid attribute name not sanitised: %s", out)
	}
}

func TestFromWindows(t *testing.T) {
	apps := FromWindows(t.Context(), []x11.Window{
		{ID: 1, Title: "a.txt - Mousepad", Class: "Mousepad", Instance: "mousepad", Mapped: true, Active: true, X: 1, Y: 2, Width: 30, Height: 40},
		{ID: 2, Title: "xterm", Class: "XTerm", Instance: "xterm", Mapped: true},
		{ID: 3, Title: "b.txt - Mousepad", Class: "Mousepad", Instance: "mousepad"},
	})
	if len(apps) != 2 || len(apps[0].Children) != 2 {
		t.Fatalf("got %d applications (%d mousepad windows), want 2 (2)", len(apps), len(apps[0].Children))
	}
	out := Render("x11", false, apps)
	for _, want := range []string{`<application name="Mousepad">`, `cp:screencoord="(1, 2)"`, `cp:size="(30, 40)"`, `st:active="true"`, `source="x11"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s: %s", want, out)
		}
	}
}
