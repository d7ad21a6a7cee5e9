package modelgateway

import (
	"encoding/hex"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/internal/imagecache"
)

// The reasons of the ErrorInfo a Chat refused for an image reference
// carries (see Image.blob in common.proto): the caller sends the request
// again with the image's bytes.
const (
	// ReasonImageNotCached: the cache does not hold the named image
	// (evicted, or another gateway replica's, or this one restarted).
	ReasonImageNotCached = "IMAGE_NOT_CACHED"
	// ReasonImageCacheOff: this gateway keeps no images
	// (limits.image_cache_bytes < 0); references will never resolve.
	ReasonImageCacheOff = "IMAGE_CACHE_OFF"
	// ErrorDomain is the ErrorInfo domain of the gateway's reasons.
	ErrorDomain = "modelgateway.rolloutmesh"
)

// images is the gRPC front's image cache with its metrics.
type images struct {
	cache          *imagecache.Cache
	hits, misses   prometheus.Counter
	stored, copies prometheus.Counter
}

func newImages(maxBytes int64, reg prometheus.Registerer) (*images, error) {
	c, err := imagecache.New(maxBytes)
	if err != nil {
		return nil, err
	}
	im := &images{
		cache: c,
		hits: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgateway_image_cache_hits_total",
			Help: "Image references of gRPC Chat requests resolved from the image cache."}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgateway_image_cache_misses_total",
			Help: "Image references the image cache did not hold (the caller sent the bytes again)."}),
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "modelgateway_image_cache_puts_total",
			Help: "Images of gRPC Chat requests put in the image cache (including ones it already held)."}),
	}
	for _, col := range []prometheus.Collector{im.hits, im.misses, im.stored,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgateway_image_cache_bytes", Help: "Bytes of images the image cache holds."},
			func() float64 { _, b := c.Usage(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "modelgateway_image_cache_images", Help: "Images the image cache holds."},
			func() float64 { n, _ := c.Usage(); return float64(n) }),
	} {
		if err := reg.Register(col); err != nil {
			c.Close()
			return nil, fmt.Errorf("register image cache metrics: %w", err)
		}
	}
	return im, nil
}

// imageRefError is a request naming an image the gateway cannot resolve.
type imageRefError struct {
	field  string // e.g. messages[3].content[1].image.blob
	sha256 string
	reason string
}

func (e *imageRefError) Error() string {
	if e.reason == ReasonImageCacheOff {
		return fmt.Sprintf("%s: this gateway keeps no images (limits.image_cache_bytes < 0); send the image's bytes in data", e.field)
	}
	return fmt.Sprintf("%s: image %s is not in the gateway's image cache; send its bytes in data", e.field, e.sha256)
}

// status is FailedPrecondition with an ErrorInfo naming the reason, the
// field and the digest, which callers match on rather than on the text.
func (e *imageRefError) status() error {
	st := status.New(codes.FailedPrecondition, e.Error())
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: e.reason, Domain: ErrorDomain,
		Metadata: map[string]string{"field": e.field, "sha256": e.sha256}}); err == nil {
		st = d
	}
	return st.Err()
}

// resolveImages puts the request's image bytes in the cache and replaces
// each image named by digest with the cached bytes, in place: the request
// is the handler's own. The cached bytes stay pinned until release is
// called, once the bodies are written; release then empties those images.
// release is nil when the request named no image. digests are the hex
// SHA-256 of the images the request carried as data, in order, when the
// cache is on (ChatResponse.image_sha256).
// Validation has checked every reference's form.
func (s *Service) resolveImages(req *rmv1.ChatRequest) (digests []string, release func(), err error) {
	var (
		pins     []func()
		resolved []*rmv1.Image
	)
	for i, m := range req.GetMessages() {
		for j, p := range m.GetContent() {
			img := p.GetImage()
			switch {
			case img == nil:
			case len(img.GetData()) > 0:
				if s.images != nil {
					key, _ := s.images.cache.Put(img.GetData(), img.GetMediaType())
					s.images.stored.Inc()
					digests = append(digests, hex.EncodeToString(key[:]))
				}
			case img.GetBlob() != nil:
				sha := img.GetBlob().GetSha256()
				refErr := func(reason string) error {
					unpinImages(pins, resolved)
					return &imageRefError{field: fmt.Sprintf("messages[%d].content[%d].image.blob", i, j), sha256: sha, reason: reason}
				}
				if s.images == nil {
					return nil, nil, refErr(ReasonImageCacheOff)
				}
				var key [32]byte
				if _, err := hex.Decode(key[:], []byte(sha)); err != nil {
					s.images.misses.Inc()
					return nil, nil, refErr(ReasonImageNotCached)
				}
				got, unpin, ok := s.images.cache.Get(key)
				if !ok {
					s.images.misses.Inc()
					return nil, nil, refErr(ReasonImageNotCached)
				}
				pins = append(pins, unpin)
				resolved = append(resolved, img)
				s.images.hits.Inc()
				if img.GetMediaType() == "" {
					img.MediaType = got.MediaType
				}
				img.Data, img.Blob = got.Data, nil
			}
		}
	}
	if len(pins) == 0 {
		// No closure for a request that names no cached image: one that
		// captured pins and resolved would put both on the heap for
		// every request.
		return digests, nil, nil
	}
	return digests, func() { unpinImages(pins, resolved) }, nil
}

// unpinImages lets the cache have the images resolveImages pinned again.
func unpinImages(pins []func(), resolved []*rmv1.Image) {
	for _, p := range pins {
		p()
	}
	// Their bytes are the cache's again: nothing may read them now.
	for _, img := range resolved {
		img.Data = nil
	}
}
