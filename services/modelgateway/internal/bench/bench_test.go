package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/modelgateway/fakellm"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// startBare starts a fakellm and serve (a bare proxy) in front of it, and
// returns fakellm's URL, the address serve printed, and serve's result
// once ctx ends.
func startBare(t *testing.T, ctx context.Context, serve func(context.Context, string, io.Writer) error) (fakeURL, addr string, done <-chan error) {
	t.Helper()
	f, err := fakellm.Start(ctx, "127.0.0.1:0", fakellm.Config{Script: []fakellm.Rule{{Match: "", Reply: "ls -la ~"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	addr, done = serveAt(t, ctx, serve, f.URL)
	return f.URL, addr, done
}

// downURL is the base URL of a port nothing listens on.
func downURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// serveAt runs serve in front of backend (a base URL) and returns the
// address it printed, and its result once ctx ends.
func serveAt(t *testing.T, ctx context.Context, serve func(context.Context, string, io.Writer) error, backend string) (addr string, done <-chan error) {
	t.Helper()
	r, w := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- serve(ctx, backend, w) }()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, r)
	return strings.TrimSpace(strings.TrimPrefix(line, "ADDR ")), served
}

// TestBareProxyForwards wants the HTTP floors to do nginx's job: the
// backend's status, type and body back to the caller, over real sockets,
// for several requests on one kept-alive connection.
func TestBareProxyForwards(t *testing.T) {
	for _, tt := range []struct {
		name  string
		serve func(context.Context, string, io.Writer) error
	}{
		{"fasthttp", serveBareProxy},
		{"event loop", serveEventProxy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fakeURL, proxy, done := startBare(t, ctx, tt.serve)
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			post := func(base string, body []byte) (int, string, string) {
				t.Helper()
				resp, err := client.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
			}
			// fakellm's answers carry an id and a timestamp of their own.
			strip := regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)
			for range 3 {
				for _, body := range [][]byte{chatBody(nil), []byte(`{"messages":`)} {
					wantCode, wantType, wantBody := post(fakeURL, body)
					gotCode, gotType, gotBody := post(proxy, body)
					if gotCode != wantCode || gotType != wantType || strip.ReplaceAllString(gotBody, "") != strip.ReplaceAllString(wantBody, "") {
						t.Errorf("through the proxy: %d %q %s\nwant (direct) %d %q %s", gotCode, gotType, gotBody, wantCode, wantType, wantBody)
					}
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
}

// TestBareGRPCProxyForwards wants both gRPC floors, grpc-go's and the
// event loop's, to do the same job: fakellm's answer back as it would
// have given it directly, and its refusal as an error.
func TestBareGRPCProxyForwards(t *testing.T) {
	for _, tt := range []struct {
		name  string
		serve func(context.Context, string, io.Writer) error
	}{
		{"grpc-go", serveBareGRPCProxy},
		{"event loop", serveEventGRPCProxy},
	} {
		t.Run(tt.name, func(t *testing.T) { testGRPCFloorForwards(t, tt.serve) })
	}
}

func testGRPCFloorForwards(t *testing.T, serve func(context.Context, string, io.Writer) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fakeURL, addr, done := startBare(t, ctx, serve)
	conn, err := runnerConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	body := chatBody(nil)
	resp, err := http.Post(fakeURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	direct, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := conn.Invoke(ctx, bareGRPCMethod, &body, &got, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatalf("Chat through the bare gRPC proxy: %v", err)
	}
	// fakellm's answers carry an id and a timestamp of their own.
	strip := regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)
	if g, w := strip.ReplaceAllString(string(got), ""), strip.ReplaceAllString(string(direct), ""); g != w {
		t.Errorf("through the bare gRPC proxy: %s\nwant (direct) %s", g, w)
	}
	// A body fakellm refuses is an error, not an answer.
	bad := []byte(`{"messages":`)
	if err := conn.Invoke(ctx, bareGRPCMethod, &bad, &got, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Unknown {
		t.Errorf("refused body: err = %v, want code Unknown", err)
	}
	if err := bareGRPCDoer(conn, body)(ctx); err != nil {
		t.Errorf("bareGRPCDoer: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestHTTPFloorVerdict(t *testing.T) {
	per := func(d time.Duration) sample { return sample{lats: []time.Duration{1, 1}, cpu: 2 * d} }
	tests := []struct {
		nginx, front, goFront, bare, event time.Duration
		want                               []string
	}{
		{60 * time.Microsecond, 80 * time.Microsecond, 0, 0, 62 * time.Microsecond, []string{
			"the event-loop proxy (the front's engine, no gateway code) costs 62us, 1.03x nginx's request (60us); the gateway's own code adds 18us (80us in all); the 1.5x goal on the HTTP front is within reach of the gateway's own code",
		}},
		{60 * time.Microsecond, 138 * time.Microsecond, 150 * time.Microsecond, 106 * time.Microsecond, 100 * time.Microsecond, []string{
			"costs 100us, 1.67x nginx's request (60us); the gateway's own code adds 38us (138us in all); the 1.5x goal on the HTTP front is out of reach of the gateway's own code: the floor is Go's on an event loop",
			"engine goroutines at 5000 req/s: the HTTP front on fasthttp (a goroutine per connection) costs 150us, 2.50x nginx's, on a floor (bare fasthttp proxy) of 106us, 1.77x; the event loop saves 12us a request",
		}},
	}
	for _, tt := range tests {
		var b strings.Builder
		httpFloor(&b, 5000, per(tt.nginx), per(tt.front), per(tt.goFront), per(tt.bare), per(tt.event))
		for _, want := range tt.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("httpFloor(nginx %v, front %v, goroutines %v, bare %v, event %v) = %q\nwant it to say %q", tt.nginx, tt.front, tt.goFront, tt.bare, tt.event, b.String(), want)
			}
		}
		if tt.goFront == 0 && strings.Contains(b.String(), "goroutines") {
			t.Errorf("httpFloor without the goroutines engine's figure = %q, want no line for it", b.String())
		}
	}
}
