package agent

import (
	"bytes"
	"fmt"
	"image"
	"image/png"

	"golang.org/x/image/draw"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

// maxShotPixels bounds a screenshot the runner decodes (an 8K screen):
// decoders allocate the pixels the header declares before reading them,
// and a guest's PNG of a few bytes may declare gigabytes.
const maxShotPixels = 7680 * 4320

// scalePNG rescales a screenshot to the screen the model reasons in
// (Claude's 1280×720), as OSWorld's Claude agent does.
func scalePNG(b []byte, to action.Screen) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decode screenshot header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > maxShotPixels || cfg.Height > maxShotPixels || cfg.Width*cfg.Height > maxShotPixels {
		return nil, fmt.Errorf("screenshot of %dx%d pixels is out of bounds", cfg.Width, cfg.Height)
	}
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("decode screenshot: %w", err)
	}
	if src.Bounds().Dx() == to.Width && src.Bounds().Dy() == to.Height {
		return b, nil
	}
	dst := image.NewRGBA(image.Rect(0, 0, to.Width, to.Height))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&out, dst); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
