// Package ingest makes AppendSteps streams durable. Each stream is processed
// as it arrives: a message is validated whole, its blobs are hashed and
// written once (content-addressed), and its step joins a small batch; full
// batches from all streams are made durable together (group commit): one
// flush of the blob store, then one database transaction, so many streams
// share each fsync. A step is acknowledged only after its batch committed.
// The package also removes rollouts, keeping blobs that in-flight writes
// still need.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"go.uber.org/zap"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// ErrStopped reports a Writer whose committer has stopped.
var ErrStopped = errors.New("storage writer stopped")

// Index is what the writer needs of the index.
type Index interface {
	Commit(ctx context.Context, batches []*index.Batch) ([]index.Result, error)
	EpisodeAttempt(ctx context.Context, id string) (int32, bool, error)
	Blob(ctx context.Context, sha string) (index.BlobRecord, error)
	GetEpisode(ctx context.Context, id string) (*pb.Episode, error)
	DeleteRollout(ctx context.Context, rolloutID string) (index.Deleted, error)
	DeleteBlobsIfUnreferenced(ctx context.Context, shas []string) ([]index.BlobRecord, error)
}

// Blobs is what the writer needs of the blob store. Write returns where
// the store put the blob, which the index keeps and Delete takes back; a
// written blob is durable once a Sync called after its Write returned has
// returned. The committer syncs once per group, before the index commit.
type Blobs interface {
	Write(ctx context.Context, key string, data []byte) (loc string, err error)
	Sync(ctx context.Context) error
	Delete(ctx context.Context, key, loc string, size int64) error
}

// Observer receives ingest measurements (metrics); all methods must be
// cheap and safe for concurrent use.
type Observer interface {
	Committed(batches, steps int, took time.Duration)
	BlobWritten(bytes int)
	Appended(steps, duplicates int)
}

type nopObserver struct{}

func (nopObserver) Committed(int, int, time.Duration) {}
func (nopObserver) BlobWritten(int)                   {}
func (nopObserver) Appended(int, int)                 {}

// Writer ingests AppendSteps streams.
type Writer struct {
	idx    Index
	blobs  Blobs
	limits Limits
	log    *zap.Logger
	obs    Observer
	now    func() time.Time

	commits  chan *commitReq
	stopped  chan struct{}
	pins     pins
	maxGroup int
	// digests tells new blobs from stored ones without the index; nil
	// unless Options.FilterDigests.
	digests *digests
	lister  digestLister
}

// lookup finds a blob a message references by hash: stored, or written by
// an in-flight batch (of this or another stream) that still pins it.
func (w *Writer) lookup(ctx context.Context, sha string) (index.BlobRecord, error) {
	if rec, ok := w.pins.storedRecord(sha); ok {
		return rec, nil
	}
	return w.idx.Blob(ctx, sha)
}

// Options configure a Writer; zero values pick defaults.
type Options struct {
	Limits   Limits
	Logger   *zap.Logger
	Observer Observer
	// Now is the clock used to time commits.
	Now func() time.Time
	// MaxGroup bounds the stream batches one transaction commits.
	MaxGroup int
	// FilterDigests keeps a filter of the stored blobs' digests, so that a
	// new blob is written without asking the index whether it is stored
	// (see digests). Only for a blob store this process alone writes, and
	// an index that lists its digests (index.DB).
	FilterDigests bool
}

// New returns a Writer. Call Run to start its committer.
func New(idx Index, blobs Blobs, opts Options) *Writer {
	def := DefaultLimits()
	l := opts.Limits
	if l.MaxBlobBytes <= 0 {
		l.MaxBlobBytes = def.MaxBlobBytes
	}
	if l.MaxStepBytes <= 0 {
		l.MaxStepBytes = def.MaxStepBytes
	}
	if l.MaxBlobsPerMessage <= 0 {
		l.MaxBlobsPerMessage = def.MaxBlobsPerMessage
	}
	if l.MaxStepIndex <= 0 {
		l.MaxStepIndex = def.MaxStepIndex
	}
	if l.BatchSteps <= 0 {
		l.BatchSteps = def.BatchSteps
	}
	if l.BatchBytes <= 0 {
		l.BatchBytes = def.BatchBytes
	}
	w := &Writer{idx: idx, blobs: blobs, limits: l, log: opts.Logger, obs: opts.Observer, now: opts.Now,
		commits: make(chan *commitReq, 256), stopped: make(chan struct{})}
	if w.log == nil {
		w.log = zap.NewNop()
	}
	if w.obs == nil {
		w.obs = nopObserver{}
	}
	if w.now == nil {
		w.now = time.Now
	}
	w.pins.init()
	maxGroup := opts.MaxGroup
	if maxGroup <= 0 {
		maxGroup = 64
	}
	w.maxGroup = maxGroup
	if l, ok := idx.(digestLister); ok && opts.FilterDigests {
		w.digests, w.lister = newDigests(), l
	}
	return w
}

// loadDigests fills the digest filter from the index; until it has, every
// new blob is looked up as without one.
func (w *Writer) loadDigests(ctx context.Context) {
	start := w.now()
	if err := w.digests.load(ctx, w.lister, w.pins.each); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("load stored blob digests failed; looking every new blob up in the index", zap.Error(err))
		}
		return
	}
	b := w.digests.cur.Load()
	w.log.Info("loaded stored blob digests", zap.Int64("digests", b.n.Load()), zap.Int64("capacity", b.capacity),
		zap.Duration("took", w.now().Sub(start)))
}

type commitReq struct {
	batch  *index.Batch
	result index.Result
	err    error
	done   chan struct{}
}

// Run commits batches until ctx is cancelled. Exactly one Run per Writer.
func (w *Writer) Run(ctx context.Context) {
	defer close(w.stopped)
	var grow chan struct{}
	if w.digests != nil {
		grow = w.digests.grow
		go w.loadDigests(ctx)
	}
	group := make([]*commitReq, 0, w.maxGroup)
	for {
		group = group[:0]
		select {
		case <-ctx.Done():
			return
		case <-grow:
			go w.loadDigests(ctx)
			continue
		case r := <-w.commits:
			group = append(group, r)
		}
	more:
		for len(group) < w.maxGroup {
			select {
			case r := <-w.commits:
				group = append(group, r)
			default:
				break more
			}
		}
		batches := make([]*index.Batch, len(group))
		steps := 0
		for i, r := range group {
			batches[i] = r.batch
			steps += len(r.batch.Steps)
		}
		start := w.now()
		results, errs := w.commitGroup(ctx, batches)
		w.obs.Committed(len(batches), steps, w.now().Sub(start))
		for i, r := range group {
			if errs[i] != nil {
				r.err = errs[i]
			} else {
				r.result = results[i]
			}
			close(r.done)
		}
	}
}

// commitGroup makes a group of batches durable and returns each batch's
// result or error. A batch that cannot commit (steps of an episode a
// DeleteRollout removed after its stream sent the header) fails the group's
// transaction; the batches are then committed one by one, so that it fails
// its own stream only.
func (w *Writer) commitGroup(ctx context.Context, batches []*index.Batch) ([]index.Result, []error) {
	errs := make([]error, len(batches))
	fail := func(err error) ([]index.Result, []error) {
		for i := range errs {
			errs[i] = err
		}
		return nil, errs
	}
	// The batches' blobs were written before they were queued; one flush
	// makes all of them durable before any row names them.
	if err := w.blobs.Sync(ctx); err != nil {
		w.log.Warn("group commit failed", zap.Int("batches", len(batches)), zap.Error(err))
		return fail(err)
	}
	results, err := w.idx.Commit(ctx, batches)
	if err == nil {
		return results, errs
	}
	w.log.Warn("group commit failed", zap.Int("batches", len(batches)), zap.Error(err))
	if len(batches) == 1 || ctx.Err() != nil {
		return fail(err)
	}
	results = make([]index.Result, len(batches))
	for i, b := range batches {
		res, err := w.idx.Commit(ctx, []*index.Batch{b})
		if err != nil {
			w.log.Warn("batch commit failed", zap.Int("steps", len(b.Steps)), zap.Error(err))
			errs[i] = err
			continue
		}
		results[i] = res[0]
	}
	return results, errs
}

func (w *Writer) commit(ctx context.Context, b *index.Batch) (index.Result, error) {
	r := &commitReq{batch: b, done: make(chan struct{})}
	select {
	case w.commits <- r:
	case <-ctx.Done():
		return index.Result{}, ctx.Err()
	case <-w.stopped:
		return index.Result{}, ErrStopped
	}
	// Once queued, wait for the outcome even if ctx ends: the committer
	// owns the batch and its blobs stay pinned until it is done.
	select {
	case <-r.done:
		return r.result, r.err
	case <-w.stopped:
		select {
		case <-r.done:
			return r.result, r.err
		default:
			return index.Result{}, ErrStopped
		}
	}
}

// Receiver yields the messages of one AppendSteps stream.
type Receiver interface {
	Recv() (*pb.AppendStepsRequest, error)
}

// stream is the state of one AppendSteps stream.
type stream struct {
	w *Writer
	// attempts holds the episodes this stream knows to exist, with the
	// attempt its steps belong to: the one the stream's last header of
	// the episode named, else the one stored when its first step came.
	attempts map[string]int32
	// headers holds the last header of each episode this stream sent, so a
	// later one merges over it before it is committed.
	headers map[string]*pb.Episode
	// puts writes the batch's new blobs concurrently with receiving the
	// next messages; flush waits for them before committing.
	puts     *errgroup.Group
	written  atomic.Int64
	batch    index.Batch
	keys     []*pb.StepKey
	bytes    int
	pinned   []string
	pending  []*inflight // oldest first
	resp     pb.AppendStepsResponse
	episodes int32
}

// maxKnown bounds the per-stream cache of episodes known to exist. A
// stream past it forgets the attempts its headers named, and takes steps
// of an episode it sends no header for again as the stored attempt's; the
// runner streams one episode per stream.
const maxKnown = 4096

// Append consumes a stream until it ends and returns what became durable.
// On error nothing of the uncommitted batch is acknowledged; steps of earlier
// batches are durable and a retry reports them as duplicates.
func (w *Writer) Append(ctx context.Context, recv Receiver) (*pb.AppendStepsResponse, error) {
	s := &stream{w: w, attempts: map[string]int32{}, headers: map[string]*pb.Episode{}}
	s.resetPuts()
	defer func() {
		// Puts and a commit still running hold pins and data; let them
		// end first.
		s.puts.Wait()
		s.unpinAll()
		s.settle()
	}()
	for {
		msg, err := recv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := s.add(ctx, msg); err != nil {
			return nil, err
		}
		if len(s.batch.Steps) >= w.limits.BatchSteps || s.bytes >= w.limits.BatchBytes {
			if err := s.flush(ctx); err != nil {
				return nil, err
			}
		}
	}
	if err := s.flush(ctx); err != nil {
		return nil, err
	}
	if err := s.settle(); err != nil {
		return nil, err
	}
	s.resp.Episodes = s.episodes
	s.resp.BlobBytesWritten = s.written.Load()
	return &s.resp, nil
}

func (s *stream) add(ctx context.Context, msg *pb.AppendStepsRequest) error {
	if len(s.attempts) >= maxKnown {
		// remember is about to forget the headers this stream sent; the
		// batches in flight must be in the index first, where merge finds it.
		if err := s.settle(); err != nil {
			return err
		}
	}
	switch item := msg.GetItem().(type) {
	case *pb.AppendStepsRequest_Episode:
		return s.addEpisode(ctx, item.Episode)
	case *pb.AppendStepsRequest_Step:
		return s.addStep(ctx, item.Step)
	default:
		return validate.Field("item", "one of episode or step is required")
	}
}

func (s *stream) addEpisode(ctx context.Context, ep *pb.Episode) error {
	if ep == nil {
		return validate.Field("episode", "required")
	}
	slots, err := checkEpisode(ep)
	if err != nil {
		return err
	}
	c, err := s.w.checkSlots(ctx, slots)
	if err != nil {
		return err
	}
	size := metaSize(ep, c)
	if size > s.w.limits.MaxStepBytes {
		return validate.Field("episode", "is %d bytes without blob data, more than the %d-byte limit", size, s.w.limits.MaxStepBytes)
	}
	c.apply()
	ep, err = s.merge(ctx, ep)
	if err != nil {
		return err
	}
	// The merged header is what the index keeps and every read returns:
	// headers sent in parts must not add up past the limit of one.
	if merged := proto.Size(ep); merged > s.w.limits.MaxStepBytes {
		return validate.Field("episode", "is %d bytes merged with the episode's earlier headers, more than the %d-byte limit", merged, s.w.limits.MaxStepBytes)
	}
	if err := s.storeBlobs(ctx, c); err != nil {
		return err
	}
	s.batch.Episodes = append(s.batch.Episodes, index.EpisodeRecord{Episode: ep, Blobs: c.records()})
	s.bytes += size
	s.remember(ep.GetEpisodeId(), ep.GetAttempt())
	s.headers[ep.GetEpisodeId()] = ep
	s.episodes++
	return nil
}

func (s *stream) remember(id string, attempt int32) {
	if len(s.attempts) >= maxKnown {
		clear(s.attempts)
		clear(s.headers)
	}
	s.attempts[id] = attempt
}

// merge lays a header over the stored one: a field the new header leaves
// empty (start time, instruction, recording...) keeps its stored value, so a
// runner may send only what changed. Status and score always come from the
// new header, since their zero values are meaningful.
func (s *stream) merge(ctx context.Context, ep *pb.Episode) (*pb.Episode, error) {
	old := s.headers[ep.GetEpisodeId()]
	if old == nil {
		stored, err := s.w.idx.GetEpisode(ctx, ep.GetEpisodeId())
		if errors.Is(err, index.ErrNotFound) {
			ep.NumSteps, ep.ModelVersions = 0, nil
			return ep, nil
		}
		if err != nil {
			return nil, err
		}
		old = stored
	}
	merged := proto.Clone(old).(*pb.Episode)
	merged.Labels = nil // a new header's labels replace the old ones
	if len(ep.GetLabels()) == 0 {
		merged.Labels = old.GetLabels()
	}
	proto.Merge(merged, ep)
	merged.Status, merged.Score = ep.GetStatus(), ep.GetScore()
	// Derived fields are the index's to maintain.
	merged.NumSteps, merged.ModelVersions = 0, nil
	return merged, nil
}

func (s *stream) addStep(ctx context.Context, st *pb.Step) error {
	if st == nil {
		return validate.Field("step", "required")
	}
	slots, err := s.w.checkStep(st)
	if err != nil {
		return err
	}
	attempt, ok := s.attempts[st.GetEpisodeId()]
	if !ok {
		stored, found, err := s.w.idx.EpisodeAttempt(ctx, st.GetEpisodeId())
		if err != nil {
			return err
		}
		if !found {
			return validate.Field("step.episode_id", "unknown episode %q: send its Episode before its steps", st.GetEpisodeId())
		}
		attempt = stored
		s.remember(st.GetEpisodeId(), attempt)
	}
	c, err := s.w.checkSlots(ctx, slots)
	if err != nil {
		return err
	}
	size := metaSize(st, c)
	if size > s.w.limits.MaxStepBytes {
		return validate.Field("step", "is %d bytes without blob data, more than the %d-byte limit", size, s.w.limits.MaxStepBytes)
	}
	if err := s.storeBlobs(ctx, c); err != nil {
		return err
	}
	c.apply()
	s.batch.Steps = append(s.batch.Steps, index.StepRecord{Step: st, Blobs: c.records(), Attempt: attempt})
	s.keys = append(s.keys, &pb.StepKey{EpisodeId: st.GetEpisodeId(), Index: st.GetIndex()})
	s.bytes += size
	return nil
}

// storeBlobs pins the message's blobs and writes the new ones.
func (s *stream) storeBlobs(ctx context.Context, c *checked) error {
	for _, b := range c.blobs {
		e := s.w.pins.pin(b.rec.SHA256)
		s.pinned = append(s.pinned, b.rec.SHA256)
		if b.byRef {
			// Referenced by hash: make sure a deletion did not take it
			// between validation and the pin.
			if _, err := s.w.lookup(ctx, b.rec.SHA256); err != nil {
				if errors.Is(err, index.ErrNotFound) {
					return validate.Field("blob", "blob %s is not stored; send its data", b.rec.SHA256)
				}
				return err
			}
			continue
		}
		if b.data == nil {
			continue // the same content appears earlier in the message
		}
		s.puts.Go(func() error {
			written, err := s.w.ensureStored(ctx, e, b)
			s.written.Add(int64(written))
			return err
		})
	}
	return nil
}

// putsPerStream bounds the blob writes one stream has in flight, and so the
// blob data it holds beyond the message being received.
const putsPerStream = 4

func (s *stream) resetPuts() {
	s.puts = &errgroup.Group{}
	s.puts.SetLimit(putsPerStream)
}

// ensureStored writes a pinned blob unless it is stored already. Writers of
// the same content serialise on the pin, so it is written once.
func (w *Writer) ensureStored(ctx context.Context, e *pinEntry, b pendingBlob) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stored {
		return 0, nil
	}
	if w.digests.mayHold(b.rec.SHA256) {
		if rec, err := w.idx.Blob(ctx, b.rec.SHA256); err == nil {
			e.stored, e.rec = true, rec
			return 0, nil
		} else if !errors.Is(err, index.ErrNotFound) {
			return 0, err
		}
	}
	// In the filter before it can be in the index.
	w.digests.add(b.rec.SHA256)
	loc, err := w.blobs.Write(ctx, b.rec.SHA256, b.data)
	if err != nil {
		return 0, fmt.Errorf("store blob %s: %w", b.rec.SHA256, err)
	}
	e.stored, e.rec = true, b.rec
	e.rec.Loc = loc
	w.obs.BlobWritten(len(b.data))
	return len(b.data), nil
}

// batchesInFlight is how many batches of one stream may be being made
// durable while the stream receives the next: enough that a slow commit
// or fsync does not stop the stream (and, through HTTP/2 flow control, its
// sender), few enough that a stream holds at most batchesInFlight+1
// batches in memory.
const batchesInFlight = 2

// flush starts making the current batch durable and returns, so the stream
// receives the next batch while earlier ones are flushed and committed.
// Batches commit in order: each waits for the one before it, and does not
// commit if that one failed.
func (s *stream) flush(ctx context.Context) error {
	if len(s.batch.Steps) == 0 && len(s.batch.Episodes) == 0 {
		return nil
	}
	if len(s.pending) >= batchesInFlight {
		if err := s.settleOldest(); err != nil {
			return err
		}
	}
	var prev *inflight
	if n := len(s.pending); n > 0 {
		prev = s.pending[n-1]
	}
	f := &inflight{done: make(chan struct{}), keys: s.keys, pinned: s.pinned}
	puts, b := s.puts, s.batch
	s.resetPuts()
	s.batch, s.keys, s.pinned, s.bytes = index.Batch{}, nil, nil, 0
	s.pending = append(s.pending, f)
	go func() {
		defer close(f.done)
		// Every blob of the batch must be durable before its rows commit.
		if err := puts.Wait(); err != nil {
			f.err = err
			return
		}
		if prev != nil {
			<-prev.done
			if prev.err != nil {
				f.err = prev.err
				return
			}
		}
		s.w.locate(&b)
		f.res, f.err = s.w.commit(ctx, &b)
	}()
	return nil
}

// locate fills in where the blob store put each new blob of a stored
// batch; the batch's pins keep those records until it is committed.
func (w *Writer) locate(b *index.Batch) {
	fill := func(recs []index.BlobRecord) {
		for i := range recs {
			if rec, ok := w.pins.storedRecord(recs[i].SHA256); ok {
				recs[i].Loc = rec.Loc
			}
		}
	}
	for _, e := range b.Episodes {
		fill(e.Blobs)
	}
	for _, s := range b.Steps {
		fill(s.Blobs)
	}
}

// inflight is a batch being made durable while its stream goes on.
type inflight struct {
	done   chan struct{}
	res    index.Result
	err    error
	keys   []*pb.StepKey
	pinned []string
}

// settle waits for every batch in flight and acknowledges their steps; it
// returns the first error, after every batch has ended and let go of its
// pins.
func (s *stream) settle() error {
	var first error
	for len(s.pending) > 0 {
		if err := s.settleOldest(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// settleOldest waits for the oldest batch in flight and acknowledges its
// steps.
func (s *stream) settleOldest() error {
	f := s.pending[0]
	s.pending = s.pending[1:]
	<-f.done
	for _, sha := range f.pinned {
		s.w.pins.unpin(sha)
	}
	if f.err != nil {
		return f.err
	}
	dups := 0
	for i, dup := range f.res.Duplicate {
		if dup {
			dups++
		}
		s.resp.Acked = append(s.resp.Acked, f.keys[i])
	}
	s.resp.Duplicates += int32(dups)
	s.w.obs.Appended(len(f.res.Duplicate), dups)
	return nil
}

func (s *stream) unpinAll() {
	for _, sha := range s.pinned {
		s.w.pins.unpin(sha)
	}
	s.pinned = s.pinned[:0]
}

// pins tracks blobs that in-flight writes rely on, so that deletion never
// removes content a not-yet-committed step references.
type pins struct {
	mu       sync.Mutex
	cond     *sync.Cond
	m        map[string]*pinEntry
	deleting map[string]bool
}

type pinEntry struct {
	n int // guarded by pins.mu
	// mu serialises writers of the same content; stored is guarded by it.
	mu     sync.Mutex
	stored bool
	rec    index.BlobRecord
}

// storedRecord returns the record of a pinned blob that is durable.
func (p *pins) storedRecord(sha string) (index.BlobRecord, bool) {
	p.mu.Lock()
	e := p.m[sha]
	p.mu.Unlock()
	if e == nil {
		return index.BlobRecord{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rec, e.stored
}

// each calls fn with every pinned digest.
func (p *pins) each(fn func(sha string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sha := range p.m {
		fn(sha)
	}
}

func (p *pins) init() {
	p.cond = sync.NewCond(&p.mu)
	p.m = map[string]*pinEntry{}
	p.deleting = map[string]bool{}
}

func (p *pins) pin(sha string) *pinEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.deleting[sha] {
		p.cond.Wait()
	}
	e := p.m[sha]
	if e == nil {
		e = &pinEntry{}
		p.m[sha] = e
	}
	e.n++
	return e
}

func (p *pins) unpin(sha string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[sha]
	if e == nil {
		return
	}
	e.n--
	if e.n <= 0 {
		delete(p.m, sha)
	}
}

// beginDelete marks sha as being deleted unless a write holds it.
func (p *pins) beginDelete(sha string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[sha] != nil || p.deleting[sha] {
		return false
	}
	p.deleting[sha] = true
	return true
}

func (p *pins) endDelete(sha string) {
	p.mu.Lock()
	delete(p.deleting, sha)
	p.mu.Unlock()
	p.cond.Broadcast()
}

// deleteChunk bounds the blobs one deletion transaction handles, and so how
// long writers of those blobs may wait.
const deleteChunk = 256

// DeleteRollout removes a rollout's episodes and steps, then the blobs no
// other episode references. Blobs that a concurrent write has pinned are
// kept: that write is about to reference them.
func (w *Writer) DeleteRollout(ctx context.Context, rolloutID string) (*pb.DeleteRolloutResponse, error) {
	d, err := w.idx.DeleteRollout(ctx, rolloutID)
	if err != nil {
		return nil, err
	}
	resp := &pb.DeleteRolloutResponse{Episodes: d.Episodes, Steps: d.Steps}
	for start := 0; start < len(d.Candidates); start += deleteChunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var chunk []string
		for _, sha := range d.Candidates[start:min(start+deleteChunk, len(d.Candidates))] {
			if w.pins.beginDelete(sha) {
				chunk = append(chunk, sha)
			}
		}
		err := w.deleteBlobs(ctx, chunk, resp)
		for _, sha := range chunk {
			w.pins.endDelete(sha)
		}
		if err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func (w *Writer) deleteBlobs(ctx context.Context, shas []string, resp *pb.DeleteRolloutResponse) error {
	if len(shas) == 0 {
		return nil
	}
	recs, err := w.idx.DeleteBlobsIfUnreferenced(ctx, shas)
	if err != nil {
		return err
	}
	// The records go first: a crash in between leaves unused bytes, which
	// the file store reclaims at its next start, never a record without
	// content.
	for _, rec := range recs {
		if err := w.blobs.Delete(ctx, rec.SHA256, rec.Loc, rec.Size); err != nil {
			return fmt.Errorf("delete blob %s: %w", rec.SHA256, err)
		}
		resp.Blobs++
		resp.BytesFreed += rec.Size
	}
	return nil
}
