package api

import (
	"fmt"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
	"github.com/rolloutmesh/rolloutmesh/services/storage/internal/validate"
)

// maxStatsRollouts bounds GetStats.rollout_ids.
const maxStatsRollouts = 100

// maxPageSize bounds page_size, and maxPageToken the length of a
// page_token (one holds an id of at most 256 bytes, base64 encoded).
const (
	maxPageSize  = 1000
	maxPageToken = 1024
)

// Validate checks a unary or server-streaming request and returns a
// *validate.FieldError naming the bad field. AppendSteps messages are
// checked by the ingest writer as they arrive.
func Validate(req any) error {
	switch r := req.(type) {
	case *pb.GetEpisodeRequest:
		return validate.ID("episode_id", r.GetEpisodeId())
	case *pb.ListEpisodesRequest:
		for _, f := range []struct{ name, v string }{
			{"rollout_id", r.GetRolloutId()}, {"group_id", r.GetGroupId()}, {"task_id", r.GetTaskId()}, {"domain", r.GetDomain()},
		} {
			if err := validate.OptionalID(f.name, f.v); err != nil {
				return err
			}
		}
		if err := validate.Range("page_size", int64(r.GetPageSize()), 0, maxPageSize); err != nil {
			return err
		}
		if r.ModelVersion != nil {
			if err := validate.Range("model_version", r.GetModelVersion(), 0, validate.MaxModelVersion); err != nil {
				return err
			}
		}
		if _, ok := pb.EpisodeStatus_name[int32(r.GetStatus())]; !ok {
			return validate.Field("status", "unknown value %d", r.GetStatus())
		}
		if len(r.GetPageToken()) > maxPageToken {
			return validate.Field("page_token", "malformed")
		}
		if r.MinScore != nil {
			if err := validate.Finite("min_score", r.GetMinScore()); err != nil {
				return err
			}
		}
		if r.MaxScore != nil {
			if err := validate.Finite("max_score", r.GetMaxScore()); err != nil {
				return err
			}
		}
		// The index finds a rollout's or a group's episodes by its
		// indexes; the other filters only narrow them. Alone, a filter
		// that selects little walks every stored episode.
		narrows := r.GetTaskId() != "" || r.GetDomain() != "" || r.GetStatus() != pb.EpisodeStatus_EPISODE_STATUS_UNSPECIFIED ||
			r.MinScore != nil || r.MaxScore != nil || r.ModelVersion != nil
		if narrows && r.GetRolloutId() == "" && r.GetGroupId() == "" {
			return validate.Field("rollout_id", "required with task_id, domain, status, min_score, max_score or model_version (or group_id)")
		}
	case *pb.GetBlobRequest:
		return validate.SHA256("sha256", r.GetSha256())
	case *pb.ExportRolloutRequest:
		if err := validate.ID("rollout_id", r.GetRolloutId()); err != nil {
			return err
		}
		switch r.GetFormat() {
		case pb.ExportFormat_EXPORT_FORMAT_JSONL, pb.ExportFormat_EXPORT_FORMAT_OSWORLD:
		default:
			return validate.Field("format", "must be EXPORT_FORMAT_JSONL or EXPORT_FORMAT_OSWORLD")
		}
		if _, ok := pb.EpisodeStatus_name[int32(r.GetStatus())]; !ok {
			return validate.Field("status", "unknown value %d", r.GetStatus())
		}
	case *pb.GetStatsRequest:
		if len(r.GetRolloutIds()) == 0 {
			return validate.Field("rollout_ids", "at least one is required")
		}
		if len(r.GetRolloutIds()) > maxStatsRollouts {
			return validate.Field("rollout_ids", "at most %d", maxStatsRollouts)
		}
		seen := make(map[string]int, len(r.GetRolloutIds()))
		for i, id := range r.GetRolloutIds() {
			field := fmt.Sprintf("rollout_ids[%d]", i)
			if err := validate.ID(field, id); err != nil {
				return err
			}
			// Named twice, a rollout would count twice in the mean and
			// deviation of the success rates.
			if j, ok := seen[id]; ok {
				return validate.Field(field, "repeats rollout_ids[%d]", j)
			}
			seen[id] = i
		}
	case *pb.CompareRolloutsRequest:
		if err := validate.ID("base_rollout_id", r.GetBaseRolloutId()); err != nil {
			return err
		}
		return validate.ID("other_rollout_id", r.GetOtherRolloutId())
	case *pb.DeleteRolloutRequest:
		return validate.ID("rollout_id", r.GetRolloutId())
	case *pb.ListStoredRolloutsRequest:
		if err := validate.Range("page_size", int64(r.GetPageSize()), 0, maxPageSize); err != nil {
			return err
		}
		if len(r.GetPageToken()) > maxPageToken {
			return validate.Field("page_token", "malformed")
		}
	}
	return nil
}
