package modelgateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
)

// recorder is a real HTTP proxy in front of fakellm that keeps the chat
// bodies the gateway sent.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	url    string
}

func startRecorder(t *testing.T, f *fakellm.Instance) *recorder {
	t.Helper()
	target, err := url.Parse(f.URL)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/chat/completions") {
			b, _ := io.ReadAll(req.Body)
			r.mu.Lock()
			r.bodies = append(r.bodies, b)
			r.mu.Unlock()
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *recorder) last(t *testing.T) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		t.Fatal("the backend got no chat request")
	}
	return r.bodies[len(r.bodies)-1]
}

func imageMsg(im *rmv1.Image) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: "user", Content: []*rmv1.ContentPart{
		{Part: &rmv1.ContentPart_Text{Text: "look"}}, {Part: &rmv1.ContentPart_Image{Image: im}}}}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

// TestImageReferences: an image sent once as bytes may be named by its
// SHA-256 in later requests, and the backend gets the same data URL; a
// digest the cache does not hold is FailedPrecondition with the reason.
func TestImageReferences(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	rec := startRecorder(t, f)
	h := startGateway(t, &FileConfig{Backends: []BackendConfig{{ID: "b0", BaseURL: rec.url, Kind: "vllm", Model: "fake-model"}}}, nil)
	shot := pngBytes(t, 40)
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(shot)

	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
		imageMsg(&rmv1.Image{Data: shot, MediaType: "image/png"})}}); err != nil {
		t.Fatalf("chat with the bytes: %v", err)
	}
	if !bytes.Contains(rec.last(t), []byte(dataURL)) {
		t.Fatal("the first request's body lacks the image's data URL")
	}
	ref := &rmv1.Image{Blob: &rmv1.BlobRef{Sha256: digest(shot), MediaType: "image/png", Size: int64(len(shot))}}
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
		imageMsg(ref), userMsg("and now?")}}); err != nil {
		t.Fatalf("chat naming the image by digest: %v", err)
	}
	if got := rec.last(t); !bytes.Contains(got, []byte(dataURL)) {
		t.Errorf("the referenced image did not reach the backend as its data URL: body %.200s", got)
	}

	other := pngBytes(t, 41)
	before := f.Stats().Requests
	_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
		userMsg("x"), imageMsg(&rmv1.Image{Blob: &rmv1.BlobRef{Sha256: digest(other)}})}})
	ei := errorInfo(err)
	if status.Code(err) != codes.FailedPrecondition || ei == nil || ei.GetReason() != ReasonImageNotCached ||
		ei.GetMetadata()["field"] != "messages[1].content[1].image.blob" || ei.GetMetadata()["sha256"] != digest(other) {
		t.Errorf("unknown digest: err = %v, info %v; want FailedPrecondition, %s, the field and the digest", err, ei, ReasonImageNotCached)
	}
	if n := f.Stats().Requests - before; n != 0 {
		t.Errorf("a refused reference reached the backend (%d requests)", n)
	}

	bad := []struct {
		name      string
		blob      *rmv1.BlobRef
		wantField string
	}{
		{"digest not hex", &rmv1.BlobRef{Sha256: strings.Repeat("Z", 64)}, "messages[0].content[1].image.blob.sha256"},
		{"digest too short", &rmv1.BlobRef{Sha256: "abc"}, "messages[0].content[1].image.blob.sha256"},
		{"uppercase digest", &rmv1.BlobRef{Sha256: strings.ToUpper(digest(shot))}, "messages[0].content[1].image.blob.sha256"},
		{"bytes in the reference", &rmv1.BlobRef{Sha256: digest(shot), Data: shot}, "messages[0].content[1].image.blob.data"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{imageMsg(&rmv1.Image{Blob: tt.blob})}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("err = %v, want InvalidArgument naming %s", err, tt.wantField)
			}
		})
	}
}

// TestChatAnswersImageDigests: the answer names the SHA-256 of each image
// the request carried as data, in order, and none for an image named by
// reference; with the cache off, none at all.
func TestChatAnswersImageDigests(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	a, b := pngBytes(t, 40), pngBytes(t, 41)
	tests := []struct {
		name       string
		cacheBytes int64
		first      []*rmv1.ChatMessage
		second     []*rmv1.ChatMessage
		want       []string
	}{
		{"two images as data", 0, nil,
			[]*rmv1.ChatMessage{imageMsg(&rmv1.Image{Data: a}), imageMsg(&rmv1.Image{Data: b})},
			[]string{digest(a), digest(b)}},
		{"one by reference, one as data", 0,
			[]*rmv1.ChatMessage{imageMsg(&rmv1.Image{Data: a})},
			[]*rmv1.ChatMessage{imageMsg(&rmv1.Image{Blob: &rmv1.BlobRef{Sha256: digest(a)}}), imageMsg(&rmv1.Image{Data: b})},
			[]string{digest(b)}},
		{"no image", 0, nil, []*rmv1.ChatMessage{userMsg("hi")}, nil},
		{"cache off", -1, nil,
			[]*rmv1.ChatMessage{imageMsg(&rmv1.Image{Data: a})}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{ImageCacheBytes: tt.cacheBytes}}, nil)
			if tt.first != nil {
				if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: tt.first}); err != nil {
					t.Fatalf("first chat: %v", err)
				}
			}
			resp, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: tt.second})
			if err != nil {
				t.Fatalf("chat: %v", err)
			}
			if got := resp.GetImageSha256(); !slices.Equal(got, tt.want) {
				t.Errorf("image_sha256 = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestImageReferencesOpenAIKind: a backend of kind openai gets its own
// body, which is written while the cached image is still pinned.
func TestImageReferencesOpenAIKind(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	rec := startRecorder(t, f)
	h := startGateway(t, &FileConfig{Backends: []BackendConfig{{ID: "b0", BaseURL: rec.url, Kind: "openai", Model: "fake-model"}}}, nil)
	shot := pngBytes(t, 40)
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(shot)
	for i, im := range []*rmv1.Image{{Data: shot}, {Blob: &rmv1.BlobRef{Sha256: digest(shot)}}} {
		if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{imageMsg(im)}}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body := rec.last(t); !bytes.Contains(body, []byte(dataURL)) || bytes.Contains(body, []byte("return_token_ids")) {
			t.Errorf("request %d: the openai body lacks the data URL or has vLLM's fields: %.200s", i, body)
		}
	}
}

// TestImageCacheOff: with limits.image_cache_bytes < 0 a reference is
// refused with its own reason, so a caller stops sending references.
func TestImageCacheOff(t *testing.T) {
	f := startFake(t, fakellm.Config{})
	h := startGateway(t, &FileConfig{Backends: backends("vllm", f), Limits: Limits{ImageCacheBytes: -1}}, nil)
	shot := pngBytes(t, 40)
	if _, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
		imageMsg(&rmv1.Image{Data: shot})}}); err != nil {
		t.Fatalf("chat with the bytes: %v", err)
	}
	_, err := h.cli.Chat(ctxT(t, 5*time.Second), &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{
		imageMsg(&rmv1.Image{Blob: &rmv1.BlobRef{Sha256: digest(shot)}})}})
	if ei := errorInfo(err); status.Code(err) != codes.FailedPrecondition || ei.GetReason() != ReasonImageCacheOff {
		t.Errorf("err = %v (info %v), want FailedPrecondition with %s", err, ei, ReasonImageCacheOff)
	}
}
