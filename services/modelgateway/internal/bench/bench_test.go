package bench

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestTurnWithScreenshot wants both fronts' requests to carry the same
// screenshot, and the HTTP body to be JSON.
func TestTurnWithScreenshot(t *testing.T) {
	img := screenshot(1000)
	if len(img) != 1000 || !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot: %d bytes, prefix %q", len(img), img[:8])
	}
	var body struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(chatBody(img), &body); err != nil {
		t.Fatal(err)
	}
	var parts []struct {
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(body.Messages[1].Content, &parts); err != nil {
		t.Fatal(err)
	}
	url, ok := strings.CutPrefix(parts[1].ImageURL.URL, "data:image/png;base64,")
	if got, err := base64.StdEncoding.DecodeString(url); !ok || err != nil || !bytes.Equal(got, img) {
		t.Errorf("HTTP body's image does not decode to the screenshot (ok %v, err %v)", ok, err)
	}
	if got := chatRequest(img).GetMessages()[1].GetContent()[1].GetImage().GetData(); !bytes.Equal(got, img) {
		t.Error("gRPC request's image is not the screenshot")
	}
	if err := json.Unmarshal(chatBody(nil), &body); err != nil || len(chatRequest(nil).GetMessages()[1].GetContent()) != 1 {
		t.Errorf("text-only turn: %v", err)
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{131662, 557693, 132111}, 132111}, // one run thrown off by the sweeper
		{[]float64{-428303, 131257, 130990}, 130990},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		in := append([]float64(nil), tt.in...)
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median reordered its input: %v, was %v", tt.in, in)
		}
	}
}
