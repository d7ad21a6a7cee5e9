package docs

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif" // GIF images in documents
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp" // formats PIL opens too
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// maxPixels bounds one decoded image: a small file can declare a huge
// canvas.
const maxPixels = 64 << 20

// pilBombPixels is where PIL's Image.open raises DecompressionBombError
// (twice Image.MAX_IMAGE_PIXELS): an image past it fails in OSWorld too.
const pilBombPixels = 2 * (1 << 30 / 4 / 3)

// imageBytes decodes an image to the bytes PIL's Image.open(...).tobytes()
// gives for it: pixel data in PIL's mode for the file (RGB for opaque
// truecolour and JPEG, RGBA, L, palette indices for P), with no header,
// so that two images compare as compare_docx_images compares them. A
// format PIL cannot render (WMF, EMF, SVG) is an error, as in PIL.
func imageBytes(blob []byte) ([]byte, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(blob))
	if err != nil {
		return nil, fmt.Errorf("decode image: %w", err)
	}
	px := int64(cfg.Width) * int64(cfg.Height)
	if cfg.Width <= 0 || cfg.Height <= 0 || px > pilBombPixels {
		return nil, fmt.Errorf("decode image: %dx%d is out of bounds", cfg.Width, cfg.Height)
	}
	if px > maxPixels {
		// PIL decodes it; holding it here costs too much.
		return nil, fmt.Errorf("image of %dx%d pixels is over the cap of %d pixels: %w", cfg.Width, cfg.Height, int64(maxPixels), metric.ErrOverCap)
	}
	img, _, err := image.Decode(bytes.NewReader(blob))
	if err != nil {
		return nil, fmt.Errorf("decode image: %w", err)
	}
	b := img.Bounds()
	var out []byte
	switch m := img.(type) {
	case *image.Paletted:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			out = append(out, m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)]...)
		}
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			out = append(out, m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)]...)
		}
	case *image.NRGBA:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			out = append(out, m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)]...)
		}
	case *image.NRGBA64:
		// PIL reads 16-bit RGBA as 8-bit RGBA, keeping the high bytes.
		for y := b.Min.Y; y < b.Max.Y; y++ {
			row := m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)]
			for i := 0; i < len(row); i += 2 {
				out = append(out, row[i])
			}
		}
	case *image.CMYK:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			out = append(out, m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)]...)
		}
	default:
		// Opaque truecolour (PNG RGB, BMP, JPEG's YCbCr, 16-bit RGB):
		// PIL's mode RGB. An RGBA image Go decodes with alpha keeps it.
		opaque := true
		if o, ok := img.(interface{ Opaque() bool }); ok {
			opaque = o.Opaque()
		}
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, a := img.At(x, y).RGBA()
				out = append(out, byte(r>>8), byte(g>>8), byte(bl>>8))
				if !opaque {
					out = append(out, byte(a>>8))
				}
			}
		}
	}
	return out, nil
}
