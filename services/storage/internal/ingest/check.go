package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"

	"google.golang.org/protobuf/proto"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/index"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// Limits bound what one message may carry.
type Limits struct {
	// MaxBlobBytes bounds one blob (screenshot, tree, recording).
	MaxBlobBytes int64
	// MaxStepBytes bounds a step or episode header without its blob data.
	MaxStepBytes int
	// MaxBlobsPerMessage bounds the blobs of one step or header.
	MaxBlobsPerMessage int
	// MaxStepIndex bounds Step.index.
	MaxStepIndex int32
	// BatchSteps and BatchBytes bound what a stream holds before it commits.
	BatchSteps int
	BatchBytes int
}

// DefaultLimits are the limits used when a Config leaves them zero.
func DefaultLimits() Limits {
	return Limits{
		MaxBlobBytes:       64 << 20,
		MaxStepBytes:       4 << 20,
		MaxBlobsPerMessage: 64,
		MaxStepIndex:       1_000_000,
		BatchSteps:         32,
		BatchBytes:         4 << 20,
	}
}

const maxMediaTypeBytes = 128

// maxFailureReasonBytes bounds Episode.failure_reason, a short
// machine-readable reason ("env_error") that the index keeps in a column
// and aggregates by; the coordinator bounds it the same. The detail goes
// in Episode.error.
const maxFailureReasonBytes = 256

// maxScore bounds Episode.score in magnitude. Scores are rewards (OSWorld's
// are in [0, 1]); GetStats, the viewer and the JSONL export's advantages
// sum them, and two finite scores near the float64 limit summed to an
// infinite mean, which no JSON export can write.
const maxScore = 1e9

// maxAttempt and maxRetry bound Episode.attempt and Step.retry: the
// coordinator reruns an episode a few times and the runner retries a turn a
// few times, so thousands already mean a broken caller.
const (
	maxAttempt = 10_000
	maxRetry   = 10_000
)

// pendingBlob is blob content a message carries, already hashed.
type pendingBlob struct {
	rec  index.BlobRecord
	data []byte // nil unless this slot is the first in the message to carry it
	// byRef is set when the message named content stored before by its
	// hash only (not content another of its slots carries).
	byRef bool
}

// blobSlot is a place in a message that holds a blob reference.
type blobSlot struct {
	field string
	ref   *pb.BlobRef
	// img is set when the blob came in as Image.data, which is moved into
	// Image.blob once stored.
	img *pb.Image
}

// checked is a validated message: its blobs hashed, ready to write.
type checked struct {
	blobs []pendingBlob
	slots []blobSlot
	// dataBytes is the blob data the message carries.
	dataBytes int
}

// checkSlots validates a message's blobs and hashes the content it
// carries. Every byte of carried content is hashed here, whatever digest the
// client named: a digest is the blob's address, and a wrong one would let one
// message's bytes stand in for another's content. Two costs are avoided
// without trusting anything: content equal byte for byte to content hashed
// earlier in the message (a runner sends each screenshot as the step's
// observation and again as the image of its new message) takes that digest
// after a comparison, about a hundredth of the cost of SHA-256; and a
// reference by digest may name content another slot of the same message
// carries, so the client sends it once.
func (w *Writer) checkSlots(ctx context.Context, slots []blobSlot) (*checked, error) {
	if len(slots) > w.limits.MaxBlobsPerMessage {
		return nil, validate.Field(slots[0].field, "message has %d blobs, more than %d", len(slots), w.limits.MaxBlobsPerMessage)
	}
	c := &checked{slots: slots, blobs: make([]pendingBlob, len(slots))}
	// carried is the content this message carries, by digest, in slot order.
	var carried []pendingBlob
	var refs []int // slots that name content by digest only
	for i, s := range slots {
		data, sha, media, declaredSize := slotFields(s)
		if err := validate.MediaType(s.field+".media_type", media, maxMediaTypeBytes); err != nil {
			return nil, err
		}
		if sha != "" {
			if err := validate.SHA256(s.field+".sha256", sha); err != nil {
				return nil, err
			}
		}
		if len(data) == 0 {
			if sha == "" {
				return nil, validate.Field(s.field, "needs data or sha256")
			}
			refs = append(refs, i)
			continue
		}
		c.dataBytes += len(data)
		if int64(len(data)) > w.limits.MaxBlobBytes {
			return nil, validate.Field(s.field+".data", "is %d bytes, more than the %d-byte limit", len(data), w.limits.MaxBlobBytes)
		}
		if declaredSize != 0 && declaredSize != int64(len(data)) {
			return nil, validate.Field(s.field+".size", "is %d, data has %d bytes", declaredSize, len(data))
		}
		var got string
		dup := false
		for _, b := range carried {
			if len(b.data) == len(data) && bytes.Equal(b.data, data) {
				got, dup = b.rec.SHA256, true
				break
			}
		}
		if !dup {
			sum := sha256.Sum256(data)
			got = hex.EncodeToString(sum[:])
		}
		if sha != "" && sha != got {
			return nil, validate.Field(s.field+".sha256", "does not match the data (data hashes to %s)", got)
		}
		if media == "" {
			media = http.DetectContentType(data)
		}
		rec := index.BlobRecord{SHA256: got, Size: int64(len(data)), MediaType: media}
		if dup {
			// Written once, by the slot that carried it first.
			c.blobs[i] = pendingBlob{rec: rec}
			continue
		}
		c.blobs[i] = pendingBlob{rec: rec, data: data}
		carried = append(carried, c.blobs[i])
	}
	for _, i := range refs {
		s := slots[i]
		_, sha, _, declaredSize := slotFields(s)
		var rec index.BlobRecord
		inMessage := false
		for _, b := range carried {
			if b.rec.SHA256 == sha {
				rec, inMessage = b.rec, true
				break
			}
		}
		if !inMessage {
			// Content stored before; storeBlobs checks again once it is
			// pinned, in case a deletion took it in between.
			var err error
			if rec, err = w.lookup(ctx, sha); err != nil {
				return nil, validate.Field(s.field+".sha256", "blob %s is not stored; send its data", sha)
			}
		}
		if declaredSize != 0 && declaredSize != rec.Size {
			return nil, validate.Field(s.field+".size", "is %d, stored blob has %d bytes", declaredSize, rec.Size)
		}
		c.blobs[i] = pendingBlob{rec: rec, byRef: !inMessage}
	}
	return c, nil
}

// slotFields are a slot's content, digest, media type and declared size.
func slotFields(s blobSlot) (data []byte, sha, media string, size int64) {
	if s.img != nil {
		return s.img.GetData(), "", s.img.GetMediaType(), 0
	}
	return s.ref.GetData(), s.ref.GetSha256(), s.ref.GetMediaType(), s.ref.GetSize()
}

// apply rewrites the message's blob slots into data-free references.
func (c *checked) apply() {
	for i, s := range c.slots {
		rec := c.blobs[i].rec
		ref := &pb.BlobRef{Sha256: rec.SHA256, MediaType: rec.MediaType, Size: rec.Size}
		if s.img != nil {
			s.img.Data = nil
			s.img.MediaType = rec.MediaType
			s.img.Blob = ref
			continue
		}
		s.ref.Sha256, s.ref.MediaType, s.ref.Size, s.ref.Data = ref.Sha256, ref.MediaType, ref.Size, nil
	}
}

// records lists the distinct blobs of the message.
func (c *checked) records() []index.BlobRecord {
	seen := map[string]bool{}
	var out []index.BlobRecord
	for _, b := range c.blobs {
		if !seen[b.rec.SHA256] {
			seen[b.rec.SHA256] = true
			out = append(out, b.rec)
		}
	}
	return out
}

// metaSize is the size of a message without its blob data.
func metaSize(m proto.Message, c *checked) int {
	return proto.Size(m) - c.dataBytes
}

func checkEpisode(ep *pb.Episode) ([]blobSlot, error) {
	for _, f := range []struct {
		name, v  string
		required bool
	}{
		{"episode.episode_id", ep.GetEpisodeId(), true},
		{"episode.rollout_id", ep.GetRolloutId(), true},
		{"episode.group_id", ep.GetGroupId(), false},
		{"episode.task_id", ep.GetTaskId(), false},
		{"episode.domain", ep.GetDomain(), false},
	} {
		check := validate.OptionalID
		if f.required {
			check = validate.ID
		}
		if err := check(f.name, f.v); err != nil {
			return nil, err
		}
	}
	if _, ok := pb.EpisodeStatus_name[int32(ep.GetStatus())]; !ok {
		return nil, validate.Field("episode.status", "unknown value %d", ep.GetStatus())
	}
	if err := validate.Text("episode.failure_reason", ep.GetFailureReason(), maxFailureReasonBytes); err != nil {
		return nil, err
	}
	if err := validate.Finite("episode.score", ep.GetScore()); err != nil {
		return nil, err
	}
	if s := ep.GetScore(); s < -maxScore || s > maxScore {
		return nil, validate.Field("episode.score", "must be in [%g, %g], got %g", -maxScore, maxScore, s)
	}
	if err := validate.Range("episode.attempt", int64(ep.GetAttempt()), 0, maxAttempt); err != nil {
		return nil, err
	}
	for _, ts := range []struct {
		name string
		ok   bool
	}{
		{"episode.start_time", ep.StartTime == nil || ep.StartTime.IsValid()},
		{"episode.end_time", ep.EndTime == nil || ep.EndTime.IsValid()},
	} {
		if !ts.ok {
			return nil, validate.Field(ts.name, "invalid timestamp")
		}
	}
	var slots []blobSlot
	if ep.GetRecording() != nil {
		slots = append(slots, blobSlot{field: "episode.recording", ref: ep.GetRecording()})
	}
	return slots, nil
}

func (w *Writer) checkStep(s *pb.Step) ([]blobSlot, error) {
	if err := validate.ID("step.episode_id", s.GetEpisodeId()); err != nil {
		return nil, err
	}
	if s.GetIndex() < 0 || s.GetIndex() > w.limits.MaxStepIndex {
		return nil, validate.Field("step.index", "must be in [0, %d], got %d", w.limits.MaxStepIndex, s.GetIndex())
	}
	if err := validate.Finite("step.reward", s.GetReward()); err != nil {
		return nil, err
	}
	if err := validate.Range("step.retry", int64(s.GetRetry()), 0, maxRetry); err != nil {
		return nil, err
	}
	if err := checkModelCall(s.GetModelCall()); err != nil {
		return nil, err
	}
	if s.StartTime != nil && !s.StartTime.IsValid() {
		return nil, validate.Field("step.start_time", "invalid timestamp")
	}
	if s.EndTime != nil && !s.EndTime.IsValid() {
		return nil, validate.Field("step.end_time", "invalid timestamp")
	}
	var slots []blobSlot
	if obs := s.GetObservation(); obs != nil {
		if obs.GetScreenshot() != nil {
			slots = append(slots, blobSlot{field: "step.observation.screenshot", ref: obs.GetScreenshot()})
		}
		if obs.GetAccessibilityTree() != nil {
			slots = append(slots, blobSlot{field: "step.observation.accessibility_tree", ref: obs.GetAccessibilityTree()})
		}
	}
	for i, m := range s.GetModelCall().GetNewMessages() {
		for j, part := range m.GetContent() {
			img := part.GetImage()
			if img == nil {
				continue
			}
			field := fmt.Sprintf("step.model_call.new_messages[%d].content[%d].image", i, j)
			set := 0
			for _, has := range []bool{len(img.GetData()) > 0, img.GetUrl() != "", img.GetBlob() != nil} {
				if has {
					set++
				}
			}
			if set != 1 {
				return nil, validate.Field(field, "exactly one of data, url or blob must be set")
			}
			switch {
			case len(img.GetData()) > 0:
				slots = append(slots, blobSlot{field: field, img: img})
			case img.GetBlob() != nil:
				slots = append(slots, blobSlot{field: field + ".blob", ref: img.GetBlob()})
			}
		}
	}
	return slots, nil
}

// checkModelCall bounds the numbers of a model call: versions as the
// gateway hands them out, token ids >= -1 (-1 is "unknown" in the API),
// token counts non-negative, logprobs finite (a NaN would also make every
// JSONL export of the rollout fail).
func checkModelCall(mc *pb.ModelCall) error {
	if mc == nil {
		return nil
	}
	if err := validate.Range("step.model_call.model_version", mc.GetModelVersion(), 0, validate.MaxModelVersion); err != nil {
		return err
	}
	for _, ids := range []struct {
		field string
		ids   []int32
	}{{"step.model_call.prompt_token_ids", mc.GetPromptTokenIds()}, {"step.model_call.completion_token_ids", mc.GetCompletionTokenIds()}} {
		for i, id := range ids.ids {
			if id < -1 {
				return validate.Field(fmt.Sprintf("%s[%d]", ids.field, i), "must be >= -1, got %d", id)
			}
		}
	}
	for i, lp := range mc.GetLogprobs() {
		field := fmt.Sprintf("step.model_call.logprobs[%d]", i)
		if lp.GetTokenId() < -1 {
			return validate.Field(field+".token_id", "must be >= -1, got %d", lp.GetTokenId())
		}
		if err := validate.Finite(field+".logprob", lp.GetLogprob()); err != nil {
			return err
		}
		for j, top := range lp.GetTop() {
			tf := fmt.Sprintf("%s.top[%d]", field, j)
			if top.GetTokenId() < -1 {
				return validate.Field(tf+".token_id", "must be >= -1, got %d", top.GetTokenId())
			}
			if err := validate.Finite(tf+".logprob", top.GetLogprob()); err != nil {
				return err
			}
		}
	}
	u := mc.GetUsage()
	for _, c := range []struct {
		field string
		v     int32
	}{{"prompt_tokens", u.GetPromptTokens()}, {"completion_tokens", u.GetCompletionTokens()}, {"cached_tokens", u.GetCachedTokens()}} {
		if c.v < 0 {
			return validate.Field("step.model_call.usage."+c.field, "must be >= 0, got %d", c.v)
		}
	}
	for _, d := range []struct {
		field string
		ok    bool
	}{
		{"step.model_call.latency", mc.Latency == nil || mc.Latency.IsValid()},
		{"step.model_call.time_to_first_token", mc.TimeToFirstToken == nil || mc.TimeToFirstToken.IsValid()},
	} {
		if !d.ok {
			return validate.Field(d.field, "invalid duration")
		}
	}
	return nil
}
