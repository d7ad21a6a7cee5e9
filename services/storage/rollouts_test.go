package storage_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// listRollouts pages through ListStoredRollouts and returns the ids in
// order, and the size of each page.
func listRollouts(t *testing.T, ctx context.Context, c pb.StorageClient, pageSize int32) ([]string, []int) {
	t.Helper()
	var ids []string
	var pages []int
	token := ""
	for {
		resp, err := c.ListStoredRollouts(ctx, &pb.ListStoredRolloutsRequest{PageSize: pageSize, PageToken: token})
		if err != nil {
			t.Fatalf("ListStoredRollouts after %d pages: %v", len(pages), err)
		}
		for _, r := range resp.GetRollouts() {
			ids = append(ids, r.GetRolloutId())
		}
		pages = append(pages, len(resp.GetRollouts()))
		if token = resp.GetNextPageToken(); token == "" {
			return ids, pages
		}
		if len(pages) > 1000 {
			t.Fatal("ListStoredRollouts pages never end")
		}
	}
}

// TestListStoredRolloutsPages: the rollouts come a page at a time, newest
// (latest first start) first and by id among rollouts that started
// together; a request without page_size gets the first 100 and a token.
func TestListStoredRolloutsPages(t *testing.T) {
	for _, b := range backends() {
		if strings.Contains(b.name, "s3") {
			continue // the blob store plays no part
		}
		t.Run(b.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := startService(t, b.config(t))
			// 105 rollouts of one episode each, rp-000 started first;
			// rp-050 and rp-051 started together; rp-104 has three
			// episodes, the first of which started first of all.
			var msgs []*pb.AppendStepsRequest
			var want []string
			for i := range 105 {
				id := fmt.Sprintf("rp-%03d", i)
				start := i + 10
				if i == 51 {
					start = 50 + 10
				}
				msgs = append(msgs, epMsg(finished(episode(id, id+"-e", "g", "t", "os", start), done, 1, "")))
				if i < 104 {
					want = append(want, id)
				}
			}
			for j := range 3 {
				msgs = append(msgs, epMsg(finished(episode("rp-104", fmt.Sprintf("rp-104-e%d", j), "g", "t", "os", 5+200*j), done, 1, "")))
			}
			if _, err := appendAll(ctx, c, msgs...); err != nil {
				t.Fatalf("AppendSteps: %v", err)
			}
			slices.Reverse(want)
			i50 := slices.Index(want, "rp-050")
			want[i50-1], want[i50] = "rp-050", "rp-051" // by id when they started together
			want = append(want, "rp-104")

			first, err := c.ListStoredRollouts(ctx, &pb.ListStoredRolloutsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(first.GetRollouts()); got != 100 || first.GetNextPageToken() == "" {
				t.Fatalf("default page: %d rollouts, token %q; want 100 and a token", got, first.GetNextPageToken())
			}
			for _, size := range []int32{0, 7, 1000} {
				ids, pages := listRollouts(t, ctx, c, size)
				if !slices.Equal(ids, want) {
					t.Errorf("page_size %d: rollouts %v, want %v", size, ids, want)
				}
				if n := len(pages); pages[n-1] == 0 && n > 1 {
					t.Errorf("page_size %d: pages %v end with an empty page", size, pages)
				}
			}
			last := first.GetRollouts()[0]
			if last.GetRolloutId() != "rp-103" || last.GetEpisodes() != 1 {
				t.Errorf("newest rollout = %v, want rp-103 with 1 episode", last)
			}
			ids, _ := listRollouts(t, ctx, c, 1000)
			if ids[len(ids)-1] != "rp-104" {
				t.Fatalf("oldest rollout = %s, want rp-104", ids[len(ids)-1])
			}

			// A ListEpisodes token: {"s":1,"e":"x"}.
			episodesToken := base64.RawURLEncoding.EncodeToString([]byte(`{"s":1,"e":"x"}`))
			for _, tt := range []struct {
				name  string
				req   *pb.ListStoredRolloutsRequest
				field string
			}{
				{"page_size too large", &pb.ListStoredRolloutsRequest{PageSize: 1001}, "page_size"},
				{"negative page_size", &pb.ListStoredRolloutsRequest{PageSize: -1}, "page_size"},
				{"garbage token", &pb.ListStoredRolloutsRequest{PageToken: "not a token"}, "page_token"},
				{"token too long", &pb.ListStoredRolloutsRequest{PageToken: strings.Repeat("A", 1025)}, "page_token"},
				{"ListEpisodes token", &pb.ListStoredRolloutsRequest{PageToken: episodesToken}, "page_token"},
			} {
				t.Run(tt.name, func(t *testing.T) {
					_, err := c.ListStoredRollouts(ctx, tt.req)
					wantCode(t, err, codes.InvalidArgument, tt.field)
				})
			}
		})
	}
}
