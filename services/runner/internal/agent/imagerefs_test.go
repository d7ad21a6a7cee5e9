package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protoreflect"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/daemon/daemontest"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway"
	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/clock"
)

// sentLog records, per Chat call the client made, how each image went:
// 'd' for bytes, 'r' for a reference.
type sentLog struct {
	mu    sync.Mutex
	calls []string
}

func (s *sentLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*rmv1.ChatRequest); ok {
		var kinds []byte
		for _, m := range r.GetMessages() {
			for _, p := range m.GetContent() {
				switch img := p.GetImage(); {
				case img == nil:
				case img.GetBlob() != nil:
					kinds = append(kinds, 'r')
				default:
					kinds = append(kinds, 'd')
				}
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, string(kinds))
		s.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (s *sentLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// gatewayClient runs fakellm behind a real modelgateway with the given
// image cache bound and returns a client that logs what it sends.
func gatewayClient(t *testing.T, cacheBytes int64) (rmv1.ModelGatewayClient, *sentLog) {
	t.Helper()
	f, err := fakellm.Start(context.Background(), "127.0.0.1:0", fakellm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	env := daemontest.Env(t)
	svc, err := modelgateway.New(context.Background(), modelgateway.Config{File: &modelgateway.FileConfig{
		Backends: []modelgateway.BackendConfig{{ID: "fake", BaseURL: f.URL, Kind: modelgateway.KindVLLM, Model: "fake-model"}},
		Limits:   modelgateway.Limits{ImageCacheBytes: cacheBytes},
	}}, env)
	if err != nil {
		t.Fatal(err)
	}
	addr := daemontest.Serve(t, env, svc)
	log := &sentLog{}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(log.intercept))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return rmv1.NewModelGatewayClient(cc), log
}

func shotPNG(t *testing.T, shade uint8) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 64, 48))
	img.SetGray(1, 1, color.Gray{Y: shade})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func shotMsg(data []byte) *rmv1.ChatMessage {
	return &rmv1.ChatMessage{Role: "user", Content: []*rmv1.ContentPart{
		{Part: &rmv1.ContentPart_Text{Text: "Given the screenshot as below."}},
		{Part: &rmv1.ContentPart_Image{Image: &rmv1.Image{Data: data, MediaType: "image/png"}}},
	}}
}

// turns runs n turns of a loop against cli, each adding a new screenshot
// and an answer, and returns what each Chat call carried.
func turns(t *testing.T, cli rmv1.ModelGatewayClient, log *sentLog, n int) (*loop, []string) {
	t.Helper()
	l := &loop{d: Deps{Chat: cli, Clock: clock.Real{}}, log: zap.NewNop(),
		cfg: Config{HistoryImages: 3, EpisodeID: "ep-1", ChatTimeout: 10 * time.Second}}
	l.conv = []*rmv1.ChatMessage{textMsg("system", "sys")}
	for i := range n {
		l.conv = append(l.conv, shotMsg(shotPNG(t, uint8(10+i))))
		if _, _, err := l.chat(context.Background()); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		l.conv = append(l.conv, textMsg("assistant", "click"))
	}
	return l, log.take()
}

// TestImageRefsThroughTheGateway: each screenshot crosses to a real
// gateway once; the next requests name it by digest, within the
// HistoryImages window.
func TestImageRefsThroughTheGateway(t *testing.T) {
	cli, log := gatewayClient(t, 0)
	l, calls := turns(t, cli, log, 5)
	if want := []string{"d", "rd", "rrd", "rrd", "rrd"}; !slices.Equal(calls, want) {
		t.Errorf("images per call = %q, want %q", calls, want)
	}
	if len(l.refs.sent) != 3 {
		t.Errorf("the loop remembers %d images, want the 3 of the window", len(l.refs.sent))
	}
	// The step's screenshot goes to storage with the digest the loop took.
	last := l.conv[len(l.conv)-2].GetContent()[1].GetImage().GetData()
	sum := sha256.Sum256(last)
	if got := l.refs.digestOf(last); got != hex.EncodeToString(sum[:]) {
		t.Errorf("digestOf(the last screenshot) = %q, want its SHA-256", got)
	}
	if got := l.refs.digestOf(bytes.Clone(last)); got != "" {
		t.Errorf("digestOf(other bytes) = %q, want empty", got)
	}
}

// TestImageRefsResentOnMiss: a gateway that holds no image (a cache too
// small, as after a restart or on another replica) refuses each reference
// and the loop sends the bytes again in the same turn; no turn fails.
func TestImageRefsResentOnMiss(t *testing.T) {
	cli, log := gatewayClient(t, 16) // smaller than any screenshot
	_, calls := turns(t, cli, log, 3)
	if want := []string{"d", "rd", "dd", "rrd", "ddd"}; !slices.Equal(calls, want) {
		t.Errorf("images per call = %q, want %q", calls, want)
	}
}

// TestImageRefsOffWhenGatewayKeepsNone: a gateway with its cache off says
// so once, and the loop sends bytes from then on.
func TestImageRefsOffWhenGatewayKeepsNone(t *testing.T) {
	cli, log := gatewayClient(t, -1)
	l, calls := turns(t, cli, log, 4)
	if want := []string{"d", "rd", "dd", "ddd", "ddd"}; !slices.Equal(calls, want) {
		t.Errorf("images per call = %q, want %q", calls, want)
	}
	if !l.refs.off {
		t.Error("references still on")
	}
}

// TestDeliveredTakesTheGatewaysDigests: the loop names the images a
// request carried by the digests the gateway answered with, one per image
// in order, and hashes them itself only when the answer has none, or not
// one per image, or one that is not a lowercase hex SHA-256.
func TestDeliveredTakesTheGatewaysDigests(t *testing.T) {
	a, b := shotPNG(t, 1), shotPNG(t, 2)
	sumA, sumB := sha256.Sum256(a), sha256.Sum256(b)
	hashedA, hashedB := hex.EncodeToString(sumA[:]), hex.EncodeToString(sumB[:])
	// Not the images' SHA-256: taken as is, it shows no hash was computed.
	fromGW := []string{strings.Repeat("1", 64), strings.Repeat("2", 64)}
	tests := []struct {
		name   string
		answer []string
		wantA  string
		wantB  string
	}{
		{"one digest per image", fromGW, fromGW[0], fromGW[1]},
		{"none (an older gateway)", nil, hashedA, hashedB},
		{"one too few", fromGW[:1], hashedA, hashedB},
		{"not lowercase hex", []string{strings.Repeat("A", 64), fromGW[1]}, hashedA, hashedB},
		{"too short", []string{"abc", fromGW[1]}, hashedA, hashedB},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &rmv1.ChatRequest{Messages: []*rmv1.ChatMessage{textMsg("system", "sys"), shotMsg(a), shotMsg(b)}}
			imgA, imgB := req.Messages[1].Content[1].GetImage(), req.Messages[2].Content[1].GetImage()
			var r imageRefs
			r.delivered(req, &rmv1.ChatResponse{ImageSha256: tt.answer})
			if got := r.sent[imgA]; got != tt.wantA {
				t.Errorf("first image named %q, want %q", got, tt.wantA)
			}
			if got := r.sent[imgB]; got != tt.wantB {
				t.Errorf("second image named %q, want %q", got, tt.wantB)
			}
			if got := r.digestOf(b); got != tt.wantB {
				t.Errorf("digestOf(the last image) = %q, want %q", got, tt.wantB)
			}
		})
	}
}

func TestCopyMessageNamesEveryField(t *testing.T) {
	m := &rmv1.ChatMessage{}
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			r.Mutable(fd).List().AppendMutable()
		case fd.Kind() == protoreflect.StringKind:
			r.Set(fd, protoreflect.ValueOfString("x"))
		default:
			t.Fatalf("field %s: kind %v; teach this test to set it", fd.Name(), fd.Kind())
		}
	}
	c := copyMessage(m).ProtoReflect()
	for i := 0; i < fields.Len(); i++ {
		if fd := fields.Get(i); !c.Has(fd) {
			t.Errorf("copyMessage lost field %s", fd.Name())
		}
	}
}

func TestRefusedReasons(t *testing.T) {
	withDetail := func(c codes.Code, d protoadapt.MessageV1) error {
		st, err := status.New(c, "refused").WithDetails(d)
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name          string
		err           error
		refused, stop bool
	}{
		{"not cached", withDetail(codes.FailedPrecondition, &errdetails.ErrorInfo{Reason: reasonImageNotCached}), true, false},
		{"cache off", withDetail(codes.FailedPrecondition, &errdetails.ErrorInfo{Reason: reasonImageCacheOff}), true, true},
		{"a gateway from before references", withDetail(codes.InvalidArgument, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "messages[3].content[1].image.blob", Description: "the gateway cannot fetch stored blobs; send the bytes in data"}}}), true, true},
		{"a malformed digest", withDetail(codes.InvalidArgument, &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "messages[3].content[1].image.blob.sha256"}}}), false, false},
		{"another precondition", withDetail(codes.FailedPrecondition, &errdetails.ErrorInfo{Reason: "STALE_VERSION"}), false, false},
		{"unavailable", status.Error(codes.Unavailable, "no backend"), false, false},
	}
	for _, tt := range tests {
		if refused, stop := refusedRef(tt.err); refused != tt.refused || stop != tt.stop {
			t.Errorf("%s: refused, stop = %v, %v; want %v, %v", tt.name, refused, stop, tt.refused, tt.stop)
		}
	}
}
