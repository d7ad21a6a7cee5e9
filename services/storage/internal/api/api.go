// Package api serves the rolloutmesh Storage gRPC API over the index, the
// blob store, the ingest writer and the exporter. Request checks live in
// Validate, and domain errors become gRPC codes in one table (toStatus).
package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/serverkit/grpcserver"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/blobstore"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/export"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/ingest"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/stats"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// ChunkBytes bounds the data of one GetBlob or ExportRollout message.
const ChunkBytes = 1 << 20

// Blobs opens stored blobs where the index says the store put them.
type Blobs interface {
	Open(ctx context.Context, key, loc string, size int64) (io.ReadCloser, error)
}

// Observer counts the damaged blobs the read path refused to serve.
type Observer interface {
	BlobCorrupt()
}

type nopObserver struct{}

func (nopObserver) BlobCorrupt() {}

// maxStoredBlob bounds a blob record the read path believes: AppendSteps
// carries a blob in one gRPC message, so no stored blob is larger, and a
// larger size is a damaged index, not a reason to allocate.
const maxStoredBlob = grpcserver.DefaultMaxMsgBytes

// blobReadTimeout bounds the read of one blob from the store: 64 MiB from
// a slow bucket takes seconds, not minutes.
const blobReadTimeout = 2 * time.Minute

// defaultReadBudget bounds the blob bytes that reads in progress hold in
// memory.
const defaultReadBudget = 256 << 20

// byHash reads verified blobs by hash alone, as the exporter asks for them.
type byHash struct{ s *Server }

func (b byHash) Read(ctx context.Context, key string) ([]byte, error) {
	rec, err := b.s.idx.Blob(ctx, key)
	if err != nil {
		return nil, err
	}
	return b.s.readVerified(ctx, rec)
}

// Server implements pb.StorageServer.
type Server struct {
	// Unsafe: adding an RPC to the API must break the build here.
	pb.UnsafeStorageServer

	idx       *index.DB
	blobs     Blobs
	writer    *ingest.Writer
	exporter  *export.Exporter
	log       *zap.Logger
	obs       Observer
	threshold float64
	maxInline int64
	// budget bounds the blob bytes held by reads in progress: a blob is
	// read whole before it is served (see readVerified), and without a
	// bound, concurrent GetBlobs of 32 MB recordings would hold gigabytes.
	budget      *semaphore.Weighted
	budgetBytes int64
	skipVerify  bool
}

var _ pb.StorageServer = (*Server)(nil)

// Options configure a Server.
type Options struct {
	// SuccessThreshold is the score at or above which a DONE episode counts
	// as a success.
	SuccessThreshold float64
	// MaxInlineBytes bounds the blob data GetEpisode puts inline.
	MaxInlineBytes int64
	// ReadBudgetBytes bounds the blob bytes that reads in progress hold in
	// memory; further reads wait. 0 means 256 MiB.
	ReadBudgetBytes int64
	Logger          *zap.Logger
	// Observer counts damaged blobs; may be nil.
	Observer Observer
	// SkipVerify serves blobs without checking their hash. Only
	// cmd/benchstorage sets it, to measure what the check costs; no flag
	// or configuration reaches it.
	SkipVerify bool
}

// New returns a Server.
func New(idx *index.DB, blobs Blobs, w *ingest.Writer, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.MaxInlineBytes <= 0 {
		opts.MaxInlineBytes = 32 << 20
	}
	if opts.ReadBudgetBytes <= 0 {
		opts.ReadBudgetBytes = defaultReadBudget
	}
	if opts.Observer == nil {
		opts.Observer = nopObserver{}
	}
	s := &Server{idx: idx, blobs: blobs, writer: w, log: opts.Logger, obs: opts.Observer,
		threshold: opts.SuccessThreshold, maxInline: opts.MaxInlineBytes,
		budget: semaphore.NewWeighted(opts.ReadBudgetBytes), budgetBytes: opts.ReadBudgetBytes, skipVerify: opts.SkipVerify}
	s.exporter = export.New(idx, byHash{s})
	return s
}

// Register adds the Storage service to s.
func (s *Server) Register(g *grpc.Server) { pb.RegisterStorageServer(g, s) }

// toStatus is the one place domain errors become gRPC codes.
func (s *Server) toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if fe, ok := validate.AsFieldError(err); ok {
		return status.Error(codes.InvalidArgument, fe.Error())
	}
	for _, m := range []struct {
		target error
		code   codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		// Before NotFound: a blob the index has but the store lost is
		// damage, and its error wraps both.
		{blobstore.ErrCorrupt, codes.DataLoss},
		{index.ErrNotFound, codes.NotFound},
		{blobstore.ErrNotFound, codes.NotFound},
		{blobstore.ErrBadKey, codes.InvalidArgument},
		{ingest.ErrStopped, codes.Unavailable},
		{errInlineTooLarge, codes.FailedPrecondition},
		{errAnswerTooLarge, codes.FailedPrecondition},
		{index.ErrTooLarge, codes.FailedPrecondition},
		// A runner of an attempt requeued since must stop, not retry.
		{index.ErrStaleAttempt, codes.FailedPrecondition},
	} {
		if errors.Is(err, m.target) {
			return status.Error(m.code, err.Error())
		}
	}
	s.log.Error("storage request failed", zap.Error(err))
	return status.Error(codes.Internal, "internal storage error")
}

// AppendSteps stores a stream of episode headers and steps.
func (s *Server) AppendSteps(stream grpc.ClientStreamingServer[pb.AppendStepsRequest, pb.AppendStepsResponse]) error {
	resp, err := s.writer.Append(stream.Context(), stream)
	if err != nil {
		return s.toStatus(err)
	}
	return stream.SendAndClose(resp)
}

var (
	errInlineTooLarge = errors.New("inline blobs exceed the limit")
	errAnswerTooLarge = errors.New("the answer would not fit in one gRPC message")
)

// maxAnswerBytes is the largest GetEpisode answer: it is one gRPC
// message, and the server refuses to send a larger one (ResourceExhausted,
// after it has read and built the whole answer).
const maxAnswerBytes = grpcserver.DefaultMaxMsgBytes

// inlineOverhead bounds what putting a blob's data inline adds to the
// answer besides the data: the field's tag and length (6 bytes), and the
// length prefix of each message around it (at most 6 deep, a message
// image's BlobRef, each prefix growing by at most 4 bytes).
const inlineOverhead = 32

// GetEpisode returns an episode with its steps.
func (s *Server) GetEpisode(ctx context.Context, req *pb.GetEpisodeRequest) (*pb.GetEpisodeResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	ep, err := s.idx.GetEpisode(ctx, req.GetEpisodeId())
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &pb.GetEpisodeResponse{Episode: ep}
	if req.GetIncludeSteps() {
		// One response carries them all: more than a gRPC message holds
		// is refused before it is all in memory.
		if resp.Steps, err = s.idx.Steps(ctx, req.GetEpisodeId(), maxAnswerBytes); err != nil {
			if errors.Is(err, index.ErrTooLarge) {
				err = fmt.Errorf("include_steps: %w; export the rollout instead", err)
			}
			return nil, s.toStatus(err)
		}
	}
	// The stored bodies fit, but the answer frames each step and carries
	// the header too.
	size := int64(proto.Size(resp))
	if size > maxAnswerBytes {
		return nil, s.toStatus(fmt.Errorf("include_steps: episode %s with its steps is %d bytes, more than the %d-byte gRPC message limit; export the rollout instead: %w",
			req.GetEpisodeId(), size, maxAnswerBytes, errAnswerTooLarge))
	}
	if req.GetInlineBlobs() {
		if err := s.inline(ctx, req, resp, size); err != nil {
			return nil, s.toStatus(err)
		}
	}
	return resp, nil
}

// inline fills in the blob data of resp, whose size without it is size.
// Both bounds are checked before any blob is read: the blob data against
// --max-inline-bytes, the whole answer against the message limit.
func (s *Server) inline(ctx context.Context, req *pb.GetEpisodeRequest, resp *pb.GetEpisodeResponse, size int64) error {
	var refs []*pb.BlobRef
	if r := resp.GetEpisode().GetRecording(); r != nil {
		refs = append(refs, r)
	}
	for _, st := range resp.GetSteps() {
		for _, r := range []*pb.BlobRef{st.GetObservation().GetScreenshot(), st.GetObservation().GetAccessibilityTree()} {
			if r != nil {
				refs = append(refs, r)
			}
		}
		for _, m := range st.GetModelCall().GetNewMessages() {
			for _, p := range m.GetContent() {
				if b := p.GetImage().GetBlob(); b != nil {
					refs = append(refs, b)
				}
			}
		}
	}
	var total int64
	for _, r := range refs {
		total += r.GetSize()
	}
	if total > s.maxInline {
		return fmt.Errorf("inline_blobs: %w: %d bytes, limit %d (--max-inline-bytes); ask without inline_blobs and fetch the blobs with GetBlob",
			errInlineTooLarge, total, s.maxInline)
	}
	if answer := size + total + inlineOverhead*int64(len(refs)); answer > maxAnswerBytes {
		fields := "inline_blobs"
		if req.GetIncludeSteps() {
			fields = "include_steps with inline_blobs"
		}
		return fmt.Errorf("%s: the answer would be up to %d bytes (%d of them blob data), more than the %d-byte gRPC message limit; ask without inline_blobs and fetch the blobs with GetBlob: %w",
			fields, answer, total, maxAnswerBytes, errAnswerTooLarge)
	}
	// One reservation for the whole response: reserving blob by blob
	// while holding the earlier ones could deadlock concurrent calls.
	release, err := s.reserve(ctx, total)
	if err != nil {
		return err
	}
	defer release()
	cache := map[string][]byte{}
	for _, r := range refs {
		data, ok := cache[r.GetSha256()]
		if !ok {
			var err error
			if data, err = (byHash{s}).Read(ctx, r.GetSha256()); err != nil {
				return err
			}
			cache[r.GetSha256()] = data
		}
		r.Data = data
	}
	return nil
}

// reserve waits until n bytes of the read budget are free and returns the
// func that gives them back. A blob larger than the whole budget takes all
// of it.
func (s *Server) reserve(ctx context.Context, n int64) (func(), error) {
	n = min(max(n, 0), s.budgetBytes)
	if err := s.budget.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { s.budget.Release(n) }, nil
}

// readVerified returns a blob's bytes once they hash to its key. The blob
// is read whole before any of it is served: its hash is known only at the
// end, and a client must never receive part of a damaged blob. Damage is
// logged here, where the pack and offset are known, and counted.
func (s *Server) readVerified(ctx context.Context, rec index.BlobRecord) ([]byte, error) {
	// Two tries: the first record may be stale (see recheck).
	for try := 0; ; try++ {
		data, err := s.readStored(ctx, rec)
		if err == nil {
			if s.skipVerify {
				return data, nil
			}
			if err = blobstore.Verify(rec.SHA256, data); err == nil {
				return data, nil
			}
		}
		if !errors.Is(err, blobstore.ErrCorrupt) && !errors.Is(err, blobstore.ErrNotFound) {
			return nil, err
		}
		cur, stale, rerr := s.recheck(ctx, rec)
		if rerr != nil {
			return nil, rerr
		}
		if stale && try == 0 {
			rec = cur
			continue
		}
		pack, off := blobstore.DescribeLoc(rec.Loc)
		s.log.Error("stored blob is damaged, not serving it", zap.String("hash", rec.SHA256), zap.String("pack", pack),
			zap.Int64("offset", off), zap.Int64("size", rec.Size), zap.Error(err))
		s.obs.BlobCorrupt()
		if !errors.Is(err, blobstore.ErrCorrupt) {
			// The index has the blob and the store does not.
			err = fmt.Errorf("%w: %w", err, blobstore.ErrCorrupt)
		}
		return nil, err
	}
}

// recheck looks a blob up again after a failed read. A DeleteRollout
// between the first lookup and the read removes the record and punches
// out the bytes: that blob is not found, not damaged. A record that moved
// (the content stored again since) is stale and worth reading again.
func (s *Server) recheck(ctx context.Context, rec index.BlobRecord) (index.BlobRecord, bool, error) {
	cur, err := s.idx.Blob(ctx, rec.SHA256)
	if err != nil {
		return cur, false, err
	}
	return cur, cur.Loc != rec.Loc || cur.Size != rec.Size, nil
}

// readStored reads exactly the bytes the index recorded for a blob. A
// store that returns fewer or more is damaged, and no more than one byte
// past the recorded size is ever read (an S3 body is outside data). A
// read that outlasts blobReadTimeout is abandoned: callers need not set a
// deadline, and a stalled S3 server must not hold a stream for ever.
func (s *Server) readStored(ctx context.Context, rec index.BlobRecord) ([]byte, error) {
	if rec.Size < 0 || rec.Size > maxStoredBlob {
		return nil, fmt.Errorf("blob %s: the index records %d bytes: %w", rec.SHA256, rec.Size, blobstore.ErrCorrupt)
	}
	ctx, cancel := context.WithTimeout(ctx, blobReadTimeout)
	defer cancel()
	rc, err := s.blobs.Open(ctx, rec.SHA256, rec.Loc, rec.Size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data := make([]byte, rec.Size)
	n, err := io.ReadFull(rc, data)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("blob %s: %d bytes stored, the index records %d: %w", rec.SHA256, n, rec.Size, blobstore.ErrCorrupt)
	}
	if errors.Is(err, syscall.EIO) {
		// The disk could not read the blob's blocks: a bad sector is
		// damage like any other.
		return nil, fmt.Errorf("read blob %s: %w: %w", rec.SHA256, err, blobstore.ErrCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", rec.SHA256, err)
	}
	var one [1]byte
	if m, _ := io.ReadFull(rc, one[:]); m > 0 {
		return nil, fmt.Errorf("blob %s: longer than the %d bytes the index records: %w", rec.SHA256, rec.Size, blobstore.ErrCorrupt)
	}
	return data, nil
}

// defaultPageSize is the page a List request without page_size gets.
const defaultPageSize = 100

// pageToken is the opaque ListEpisodes page token.
type pageToken struct {
	StartNS   int64  `json:"s"`
	EpisodeID string `json:"e"`
}

func decodePageToken(tok string) (*index.Cursor, error) {
	if tok == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, validate.Field("page_token", "malformed")
	}
	var pt pageToken
	if err := json.Unmarshal(raw, &pt); err != nil || pt.EpisodeID == "" {
		return nil, validate.Field("page_token", "malformed")
	}
	return &index.Cursor{StartNS: pt.StartNS, EpisodeID: pt.EpisodeID}, nil
}

func encodePageToken(c *index.Cursor) string {
	if c == nil {
		return ""
	}
	raw, _ := json.Marshal(pageToken{StartNS: c.StartNS, EpisodeID: c.EpisodeID})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// ListEpisodes lists episodes a page at a time.
func (s *Server) ListEpisodes(ctx context.Context, req *pb.ListEpisodesRequest) (*pb.ListEpisodesResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	cur, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(err)
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = defaultPageSize
	}
	f := index.Filter{RolloutID: req.GetRolloutId(), GroupID: req.GetGroupId(), TaskID: req.GetTaskId(), Domain: req.GetDomain(),
		Status: req.GetStatus(), MinScore: req.MinScore, MaxScore: req.MaxScore, ModelVersion: req.ModelVersion}
	eps, next, err := s.idx.ListEpisodes(ctx, f, cur, size)
	if err != nil {
		return nil, s.toStatus(err)
	}
	return &pb.ListEpisodesResponse{Episodes: eps, NextPageToken: encodePageToken(next)}, nil
}

// GetBlob streams a blob in chunks of at most ChunkBytes.
func (s *Server) GetBlob(req *pb.GetBlobRequest, stream grpc.ServerStreamingServer[pb.GetBlobResponse]) error {
	if err := Validate(req); err != nil {
		return s.toStatus(err)
	}
	ctx := stream.Context()
	rec, err := s.idx.Blob(ctx, req.GetSha256())
	if err != nil {
		return s.toStatus(err)
	}
	release, err := s.reserve(ctx, rec.Size)
	if err != nil {
		return s.toStatus(err)
	}
	defer release()
	data, err := s.readVerified(ctx, rec)
	if err != nil {
		return s.toStatus(err)
	}
	first := true
	for first || len(data) > 0 {
		n := min(len(data), ChunkBytes)
		msg := &pb.GetBlobResponse{Data: data[:n]}
		if first {
			msg.MediaType, msg.Size = rec.MediaType, rec.Size
			first = false
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// ReadBlob returns a verified blob and its media type, as GetBlob serves
// it (within the read budget, damage refused and counted); the viewer
// reads screenshots through it. Errors are gRPC statuses.
func (s *Server) ReadBlob(ctx context.Context, sha string) (string, []byte, error) {
	if err := validate.SHA256("sha256", sha); err != nil {
		return "", nil, s.toStatus(err)
	}
	rec, err := s.idx.Blob(ctx, sha)
	if err != nil {
		return "", nil, s.toStatus(err)
	}
	release, err := s.reserve(ctx, rec.Size)
	if err != nil {
		return "", nil, s.toStatus(err)
	}
	defer release()
	data, err := s.readVerified(ctx, rec)
	if err != nil {
		return "", nil, s.toStatus(err)
	}
	return rec.MediaType, data, nil
}

// ExportRollout streams a rollout as files.
func (s *Server) ExportRollout(req *pb.ExportRolloutRequest, stream grpc.ServerStreamingServer[pb.ExportRolloutResponse]) error {
	if err := Validate(req); err != nil {
		return s.toStatus(err)
	}
	ctx := stream.Context()
	if err := s.rolloutExists(ctx, req.GetRolloutId()); err != nil {
		return s.toStatus(err)
	}
	sink := &streamSink{send: stream.Send}
	err := s.exporter.Write(ctx, export.Request{RolloutID: req.GetRolloutId(), Format: req.GetFormat(),
		InlineImages: req.GetInlineImages(), Status: req.GetStatus()}, sink)
	return s.toStatus(err)
}

// streamSink turns exported files into ExportRolloutResponse chunks.
type streamSink struct {
	send func(*pb.ExportRolloutResponse) error
}

func (s *streamSink) Create(path string) (io.WriteCloser, error) {
	return &chunkWriter{path: path, send: s.send, buf: make([]byte, 0, ChunkBytes)}, nil
}

type chunkWriter struct {
	path string
	send func(*pb.ExportRolloutResponse) error
	buf  []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := ChunkBytes - len(c.buf)
		take := min(room, len(p))
		c.buf = append(c.buf, p[:take]...)
		p = p[take:]
		if len(c.buf) == ChunkBytes {
			if err := c.send(&pb.ExportRolloutResponse{Path: c.path, Data: c.buf}); err != nil {
				return 0, err
			}
			c.buf = make([]byte, 0, ChunkBytes)
		}
	}
	return n, nil
}

func (c *chunkWriter) Close() error {
	return c.send(&pb.ExportRolloutResponse{Path: c.path, Data: c.buf, Eof: true})
}

// GetStats summarises rollouts.
func (s *Server) GetStats(ctx context.Context, req *pb.GetStatsRequest) (*pb.GetStatsResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	resp := &pb.GetStatsResponse{SuccessThreshold: s.threshold}
	for _, id := range req.GetRolloutIds() {
		groups, versions, err := s.idx.RolloutStats(ctx, id, s.threshold)
		if err != nil {
			return nil, s.toStatus(err)
		}
		if len(groups) == 0 {
			return nil, s.toStatus(fmt.Errorf("rollout %s has no stored episodes: %w", id, index.ErrNotFound))
		}
		resp.Rollouts = append(resp.Rollouts, stats.Rollout(id, groups, versions))
	}
	resp.MeanSuccessRate, resp.StddevSuccessRate = stats.Spread(resp.Rollouts)
	return resp, nil
}

// rolloutExists returns an ErrNotFound error for a rollout without stored
// episodes.
func (s *Server) rolloutExists(ctx context.Context, rolloutID string) error {
	ok, err := s.idx.RolloutExists(ctx, rolloutID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("rollout %s has no stored episodes: %w", rolloutID, index.ErrNotFound)
	}
	return nil
}

func (s *Server) taskRewards(ctx context.Context, rolloutID string) ([]index.TaskReward, error) {
	rs, found, err := s.idx.TaskRewards(ctx, rolloutID)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("rollout %s has no stored episodes: %w", rolloutID, index.ErrNotFound)
	}
	return rs, nil
}

// CompareRollouts lists tasks whose reward differs between two rollouts.
func (s *Server) CompareRollouts(ctx context.Context, req *pb.CompareRolloutsRequest) (*pb.CompareRolloutsResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	base, err := s.taskRewards(ctx, req.GetBaseRolloutId())
	if err != nil {
		return nil, s.toStatus(err)
	}
	other, err := s.taskRewards(ctx, req.GetOtherRolloutId())
	if err != nil {
		return nil, s.toStatus(err)
	}
	return stats.Compare(base, other), nil
}

// DeleteRollout removes a rollout and the blobs no other rollout uses.
func (s *Server) DeleteRollout(ctx context.Context, req *pb.DeleteRolloutRequest) (*pb.DeleteRolloutResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	resp, err := s.writer.DeleteRollout(ctx, req.GetRolloutId())
	if err != nil {
		return nil, s.toStatus(err)
	}
	if resp.GetEpisodes() == 0 {
		// Nothing was stored, so nothing was deleted.
		return nil, s.toStatus(fmt.Errorf("rollout %s has no stored episodes: %w", req.GetRolloutId(), index.ErrNotFound))
	}
	s.log.Info("rollout deleted", zap.String("rollout_id", req.GetRolloutId()), zap.Int64("episodes", resp.GetEpisodes()),
		zap.Int64("steps", resp.GetSteps()), zap.Int64("blobs", resp.GetBlobs()))
	return resp, nil
}

// rolloutsToken is the opaque ListStoredRollouts page token. Its keys
// differ from pageToken's, so neither list takes the other's token.
type rolloutsToken struct {
	FirstNS   int64  `json:"f"`
	RolloutID string `json:"r"`
}

func decodeRolloutsToken(tok string) (*index.RolloutCursor, error) {
	if tok == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, validate.Field("page_token", "malformed")
	}
	var rt rolloutsToken
	if err := json.Unmarshal(raw, &rt); err != nil || rt.RolloutID == "" {
		return nil, validate.Field("page_token", "malformed")
	}
	return &index.RolloutCursor{FirstNS: rt.FirstNS, RolloutID: rt.RolloutID}, nil
}

func encodeRolloutsToken(c *index.RolloutCursor) string {
	if c == nil {
		return ""
	}
	raw, _ := json.Marshal(rolloutsToken{FirstNS: c.FirstNS, RolloutID: c.RolloutID})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// ListStoredRollouts lists the rollouts storage has episodes of, a page at
// a time: all of them in one answer passed the 64 MiB message limit at
// about 200,000 rollouts.
func (s *Server) ListStoredRollouts(ctx context.Context, req *pb.ListStoredRolloutsRequest) (*pb.ListStoredRolloutsResponse, error) {
	if err := Validate(req); err != nil {
		return nil, s.toStatus(err)
	}
	cur, err := decodeRolloutsToken(req.GetPageToken())
	if err != nil {
		return nil, s.toStatus(err)
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = defaultPageSize
	}
	rs, next, err := s.idx.Rollouts(ctx, cur, size)
	if err != nil {
		return nil, s.toStatus(err)
	}
	resp := &pb.ListStoredRolloutsResponse{NextPageToken: encodeRolloutsToken(next)}
	for _, r := range rs {
		resp.Rollouts = append(resp.Rollouts, r.ToProto())
	}
	return resp, nil
}
