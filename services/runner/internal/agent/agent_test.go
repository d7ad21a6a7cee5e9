package agent

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"runtime"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

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

// TestShedImages: once recorded, images older than the HistoryImages
// window lose their bytes but keep media type and size; images in the
// window or not yet recorded keep their bytes; the messages the sinks
// were given are not changed; requests are the same as before.
func TestShedImages(t *testing.T) {
	tests := []struct {
		name string
		keep int
		mark int    // messages recorded
		want []bool // per observation message: bytes kept
	}{
		{name: "all recorded", keep: 2, mark: 9, want: []bool{false, false, true, true}},
		{name: "the last two not recorded", keep: 1, mark: 5, want: []bool{false, false, true, true}},
		{name: "window covers all", keep: 4, mark: 9, want: []bool{true, true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &loop{cfg: Config{HistoryImages: tt.keep, EpisodeID: "ep"}, mark: tt.mark}
			l.conv = []*rmv1.ChatMessage{textMsg("system", "sys")}
			for i := 0; i < 4; i++ {
				l.conv = append(l.conv, imageMsg("obs"), textMsg("assistant", "act"))
			}
			given := slices.Clone(l.conv) // what the sinks hold
			before := l.request()
			l.shedImages()
			l.shedImages() // a second pass changes nothing
			for i, want := range tt.want {
				img := l.conv[1+2*i].GetContent()[1].GetImage()
				if got := len(img.GetData()) > 0; got != want {
					t.Errorf("observation %d: bytes kept = %v, want %v", i, got, want)
				}
				if !want && (img.GetMediaType() != "image/png" || img.GetBlob().GetSize() != 3 || img.GetBlob().GetMediaType() != "image/png") {
					t.Errorf("observation %d: shed image %v, want its media type and size 3", i, img)
				}
				if given[1+2*i].GetContent()[1].GetImage().GetData() == nil {
					t.Errorf("observation %d: the message the sinks hold lost its bytes", i)
				}
				if got := l.conv[1+2*i].GetContent()[0].GetText(); got != "obs" {
					t.Errorf("observation %d: text %q, want obs", i, got)
				}
			}
			if after := l.request(); !proto.Equal(before, after) {
				t.Errorf("request after shedding differs:\n%v\nbefore:\n%v", after, before)
			}
		})
	}
}

// hugePNG is a valid PNG header declaring w×h 8-bit gray pixels, with the
// data of one row: a decoder that trusts the header allocates w×h bytes.
func hugePNG(t *testing.T, w, h uint32) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// IHDR's data starts after the 8-byte signature and the chunk's length
	// and type; its CRC covers type and data.
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// TestScalePNGRefusesHugeImages: a screenshot's header is checked before
// its pixels are allocated. A guest's PNG of a few bytes declaring
// 20000×20000 pixels made the runner allocate 400 MB (65535×65535 RGBA
// would be 17 GB, which kills the process) before the data ran out.
func TestScalePNGRefusesHugeImages(t *testing.T) {
	bomb := hugePNG(t, 20000, 20000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := scalePNG(bomb, action.Screen{Width: 1280, Height: 720})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Error("scalePNG of a 20000x20000 header gave no error")
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("scalePNG allocated %d MB for an image it refused, want under 16 MB", got>>20)
	}
}
