package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Image references to the gateway's image cache (see Image.blob in
// common.proto). Each request carries the last few screenshots of the
// episode, so without references every screenshot crossed to the gateway
// three times (HistoryImages) and was parsed there three times. Now the
// bytes go once: once a Chat carrying an image succeeded, later requests
// of the episode name it by its SHA-256. A gateway that does not hold it
// (evicted, restarted, another replica) refuses the request before it
// reaches a model, and the loop sends the request again with the bytes.

// The gateway's ErrorInfo reasons for a reference it cannot resolve
// (modelgateway.ReasonImageNotCached, ReasonImageCacheOff).
const (
	reasonImageNotCached = "IMAGE_NOT_CACHED"
	reasonImageCacheOff  = "IMAGE_CACHE_OFF"
)

// imageRefs tracks the images of one episode the gateway has received.
type imageRefs struct {
	// sent maps an image of the conversation (its message part, shared by
	// every request that carries it) to its digest.
	sent map[*rmv1.Image]string
	// off is set once the gateway said it keeps no images, or is a
	// release that refuses references.
	off bool
	// last is the most recent image digested, so that the step's
	// screenshot (the same bytes) goes to storage with its digest.
	lastData []byte
	lastSHA  string
}

// toRefs names every image of req the gateway already received by its
// digest, in place: req is the loop's fresh request, whose messages are
// shared with the conversation and the step records, so a message that
// changes is replaced by a copy. It reports whether any image changed.
func (r *imageRefs) toRefs(req *rmv1.ChatRequest) bool {
	if r.off || len(r.sent) == 0 {
		return false
	}
	changed := false
	for i, m := range req.GetMessages() {
		var content []*rmv1.ContentPart
		for j, p := range m.GetContent() {
			img := p.GetImage()
			sha, ok := r.sent[img]
			if img == nil || !ok {
				continue
			}
			if content == nil {
				content = append([]*rmv1.ContentPart(nil), m.GetContent()...)
			}
			content[j] = &rmv1.ContentPart{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{
				Blob:      &rmv1.BlobRef{Sha256: sha, MediaType: img.GetMediaType(), Size: int64(len(img.GetData()))},
				MediaType: img.GetMediaType(), Detail: img.GetDetail()}}}
		}
		if content != nil {
			c := copyMessage(m)
			c.Content = content
			req.Messages[i] = c
			changed = true
		}
	}
	return changed
}

// copyMessage copies m's top level; TestCopyMessageNamesEveryField fails
// when the API adds a field it does not name.
func copyMessage(m *rmv1.ChatMessage) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls,
		ToolCallId: m.ToolCallId, Name: m.Name, Reasoning: m.Reasoning}
}

// delivered notes the images whose bytes the successful request wire
// carried, by the digests the gateway answered with
// (ChatResponse.image_sha256, one per such image, in order), or, from a
// gateway that sends none, by hashing them here.
func (r *imageRefs) delivered(wire *rmv1.ChatRequest, resp *rmv1.ChatResponse) {
	if r.off {
		return
	}
	var carried []*rmv1.Image
	for _, m := range wire.GetMessages() {
		for _, p := range m.GetContent() {
			if img := p.GetImage(); img != nil && len(img.GetData()) > 0 {
				carried = append(carried, img)
			}
		}
	}
	digests := resp.GetImageSha256()
	if len(digests) != len(carried) || !allDigests(digests) {
		digests = nil
	}
	for i, img := range carried {
		if _, ok := r.sent[img]; ok {
			continue
		}
		var sha string
		if digests != nil {
			sha = digests[i]
		} else {
			sum := sha256.Sum256(img.GetData())
			sha = hex.EncodeToString(sum[:])
		}
		if r.sent == nil {
			r.sent = make(map[*rmv1.Image]string)
		}
		r.sent[img] = sha
		r.lastData, r.lastSHA = img.GetData(), sha
	}
}

// allDigests reports whether every one of ds is a SHA-256 in lowercase
// hex, the only form a reference may take: a gateway that answered
// anything else is not trusted for any of them.
func allDigests(ds []string) bool {
	for _, d := range ds {
		if len(d) != 2*sha256.Size {
			return false
		}
		for i := 0; i < len(d); i++ {
			if c := d[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// forget drops the images no request will carry again (older than the
// HistoryImages window), keeping the map the size of that window.
func (r *imageRefs) forget(req *rmv1.ChatRequest) {
	if len(r.sent) == 0 {
		return
	}
	in := make(map[*rmv1.Image]bool, len(r.sent))
	for _, m := range req.GetMessages() {
		for _, p := range m.GetContent() {
			if img := p.GetImage(); img != nil {
				in[img] = true
			}
		}
	}
	for img := range r.sent {
		if !in[img] {
			delete(r.sent, img)
		}
	}
}

// digestOf returns the digest of data when it is the bytes last digested.
func (r *imageRefs) digestOf(data []byte) string {
	if len(data) == 0 || len(data) != len(r.lastData) || &data[0] != &r.lastData[0] {
		return ""
	}
	return r.lastSHA
}

// refusedRef reports whether err is the gateway refusing a request for its
// image references: it does not hold one (send the bytes again), or keeps
// no images at all, or predates references (stop sending them).
func refusedRef(err error) (refused, stop bool) {
	st, ok := status.FromError(err)
	if !ok {
		return false, false
	}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if st.Code() == codes.FailedPrecondition {
				switch d.GetReason() {
				case reasonImageNotCached:
					return true, false
				case reasonImageCacheOff:
					return true, true
				}
			}
		case *errdetails.BadRequest:
			// A gateway from before references: "the gateway cannot fetch
			// stored blobs", on the reference's field.
			for _, v := range d.GetFieldViolations() {
				if st.Code() == codes.InvalidArgument && strings.HasSuffix(v.GetField(), ".image.blob") {
					return true, true
				}
			}
		}
	}
	return false, false
}

// chat sends the loop's current request through the gateway, naming the
// images it already received by digest, and sends it again with every
// image's bytes when the gateway refuses a reference.
func (l *loop) chat(ctx context.Context) (*rmv1.ChatRequest, *rmv1.ChatResponse, error) {
	req := l.request()
	l.refs.forget(req)
	refs := l.refs.toRefs(req)
	cctx, cancel := context.WithTimeout(ctx, l.cfg.ChatTimeout)
	resp, err := l.d.Chat.Chat(cctx, req)
	cancel()
	if err != nil && refs {
		if refused, stop := refusedRef(err); refused {
			l.log.Info("gateway did not resolve an image reference; sending the images' bytes", zap.Bool("references_off", stop), zap.Error(err))
			clear(l.refs.sent)
			l.refs.off = l.refs.off || stop
			req = l.request()
			cctx, cancel := context.WithTimeout(ctx, l.cfg.ChatTimeout)
			resp, err = l.d.Chat.Chat(cctx, req)
			cancel()
		}
	}
	if err == nil {
		l.refs.delivered(req, resp)
	}
	return req, resp, err
}
