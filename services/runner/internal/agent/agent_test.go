package agent

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

func imageMsg(text string) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: "user", Content: []*rmv1.ContentPart{
		{Part: &rmv1.ContentPart_Text{Text: text}},
		{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: []byte("png"), MediaType: "image/png"}}},
	}}
}

// TestRequestKeepsRecentImages: only the last HistoryImages screenshots go
// out as images; older turns keep their text, and the conversation itself is
// not changed.
func TestRequestKeepsRecentImages(t *testing.T) {
	tests := []struct {
		keep int
		want []bool // per observation message: image kept
	}{
		{keep: 1, want: []bool{false, false, false, true}},
		{keep: 3, want: []bool{false, true, true, true}},
		{keep: 9, want: []bool{true, true, true, true}},
	}
	for _, tt := range tests {
		l := &loop{cfg: Config{HistoryImages: tt.keep, EpisodeID: "ep"}}
		l.conv = []*rmv1.ChatMessage{textMsg("system", "sys")}
		for i := 0; i < 4; i++ {
			l.conv = append(l.conv, imageMsg("obs"), textMsg("assistant", "act"))
		}
		req := l.request()
		if req.GetRoutingKey() != "ep" {
			t.Errorf("routing key = %q, want the episode id", req.GetRoutingKey())
		}
		for i, want := range tt.want {
			m := req.GetMessages()[1+2*i]
			got := m.GetContent()[1].GetImage() != nil
			if got != want || m.GetContent()[0].GetText() != "obs" {
				t.Errorf("keep %d: observation %d image kept = %v, want %v", tt.keep, i, got, want)
			}
			if l.conv[1+2*i].GetContent()[1].GetImage() == nil {
				t.Errorf("keep %d: request() changed the conversation", tt.keep)
			}
		}
	}
}

func TestScalePNG(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 2560, 1440))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	out, err := scalePNG(buf.Bytes(), action.Screen{Width: 1280, Height: 720})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(out))
	if err != nil || cfg.Width != 1280 || cfg.Height != 720 {
		t.Errorf("scaled image %dx%d, %v; want 1280x720", cfg.Width, cfg.Height, err)
	}
	if _, err := scalePNG([]byte("not an image"), action.Screen{Width: 1, Height: 1}); err == nil {
		t.Error("scalePNG of garbage gave no error")
	}
}
