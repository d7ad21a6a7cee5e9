"""Trainer-ready token data from batches of whole GRPO groups.

A batch fetched with ``include_trajectories=True`` carries every episode's
steps; each step's model call stores the token ids of the *whole* prompt sent
to the model that turn (system prompt, task, earlier turns, the latest
observation), the completion's token ids and one logprob per completion token.
From them :func:`episode_samples` builds the concatenated multi-turn sequence:

* step 0: its prompt tokens (loss mask 0), then its completion tokens (mask 1);
* step k: the part of its prompt that extends the sequence so far (the
  observation/tool output and chat-template tokens the mesh added; mask 0),
  then its completion tokens (mask 1).

``logprobs`` is aligned with ``token_ids``: the sampling logprob of each
completion token, 0.0 where the mask is 0. ``versions`` gives the model version
that produced each completion token (-1 for prompt tokens).

When a turn's prompt does not extend the sequence so far (the history was
rewritten, e.g. older screenshots dropped from the prompt), the episode is
split: a new sample starts with that turn's whole prompt. An episode thus
yields one sample in the common case and several when its context was
rewritten (``Sample.segment`` / ``Sample.num_segments``), every one carrying
the episode's reward and advantage.

When the steps carry completion token ids but no prompt token ids (a backend
that does not return them), the sample holds the completion tokens only, all
with mask 1, and ``Sample.has_prompt_tokens`` is False. Steps without a
completion (a model call that failed and was retried) add nothing.

Advantages are GRPO's group-relative ones: the episode's reward minus the mean
reward of its group's DONE episodes, and,
with ``normalize_std=True``, divided by the group's population standard
deviation plus ``eps``. The default is the plain difference (no std division).

NumPy is optional: :func:`collate` returns padded NumPy arrays when NumPy can
be imported and nested lists otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

try:  # optional
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None

HAVE_NUMPY = _np is not None

_DONE = 3  # EpisodeStatus.EPISODE_STATUS_DONE

_STATUS_NAMES = {
    0: "UNSPECIFIED", 1: "QUEUED", 2: "RUNNING", 3: "DONE", 4: "FAILED",
    5: "ABORTED", 6: "TIMEOUT", 7: "UNSUPPORTED",
}


class NoTokenData(ValueError):
    """The batch has no token data to build samples from: fetch it with
    include_trajectories=True, and start the rollout with token ids on
    (``agent={"return_token_ids": True, "logprobs": True}``, the client's
    default)."""


@dataclass
class Sample:
    """One contiguous token sequence of one episode, with its reward and
    advantage. Lists are plain Python lists of equal length."""

    episode_id: str
    group_id: str
    task_id: str
    status: str
    reward: float
    advantage: float
    token_ids: List[int] = field(default_factory=list)
    loss_mask: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    versions: List[int] = field(default_factory=list)
    segment: int = 0
    num_segments: int = 1
    has_prompt_tokens: bool = True
    has_logprobs: bool = True

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_completion_tokens(self) -> int:
        return sum(self.loss_mask)

    def numpy(self) -> Dict[str, Any]:
        """token_ids (int64), loss_mask (int8), logprobs (float32), versions
        (int64) as NumPy arrays; ImportError without NumPy."""
        np = _require_numpy()
        return {
            "token_ids": np.asarray(self.token_ids, dtype=np.int64),
            "loss_mask": np.asarray(self.loss_mask, dtype=np.int8),
            "logprobs": np.asarray(self.logprobs, dtype=np.float32),
            "versions": np.asarray(self.versions, dtype=np.int64),
        }


def _require_numpy():
    if _np is None:
        raise ImportError("NumPy is not installed (Debian: apt-get install python3-numpy); use the list fields")
    return _np


def group_advantages(rewards: Sequence[float], normalize_std: bool = False, eps: float = 1e-6) -> List[float]:
    """GRPO advantages of one group: reward - mean(group), divided by
    (population std + eps) when normalize_std is set."""
    if not rewards:
        return []
    mean = sum(rewards) / len(rewards)
    adv = [float(r) - mean for r in rewards]
    if normalize_std:
        std = (sum(a * a for a in adv) / len(adv)) ** 0.5
        adv = [a / (std + eps) for a in adv]
    return adv


class _Builder:
    def __init__(self) -> None:
        self.segments: List[Dict[str, list]] = []
        self.cur: Optional[Dict[str, list]] = None
        self.has_prompt = True
        self.has_logprobs = True

    def _new(self) -> Dict[str, list]:
        self.cur = {"token_ids": [], "loss_mask": [], "logprobs": [], "versions": []}
        self.segments.append(self.cur)
        return self.cur

    def add(self, prompt: Sequence[int], completion: Sequence[int], logprobs: Sequence[float], version: int) -> None:
        if not completion:
            return  # a failed model call: nothing was sampled
        if len(logprobs) != len(completion):
            self.has_logprobs = False
        cur = self.cur
        if not prompt:
            self.has_prompt = False
            if cur is None:
                cur = self._new()
        else:
            seq = cur["token_ids"] if cur is not None else None
            if seq is None or len(prompt) < len(seq) or list(prompt[: len(seq)]) != seq:
                cur, seq = self._new(), []
            new = prompt[len(seq):]
            cur["token_ids"].extend(int(t) for t in new)
            cur["loss_mask"].extend([0] * len(new))
            cur["logprobs"].extend([0.0] * len(new))
            cur["versions"].extend([-1] * len(new))
        cur["token_ids"].extend(int(t) for t in completion)
        cur["loss_mask"].extend([1] * len(completion))
        cur["logprobs"].extend(float(logprobs[i]) if i < len(logprobs) else 0.0 for i in range(len(completion)))
        cur["versions"].extend([int(version)] * len(completion))


def episode_samples(episode: Any, steps: Iterable[Any], advantage: float = 0.0) -> List[Sample]:
    """The samples of one episode (an Episode message) from its steps (Step
    messages, in index order). Empty when no step has completion tokens."""
    b = _Builder()
    for st in sorted(steps, key=lambda s: s.index):
        if not st.HasField("model_call"):
            continue
        mc = st.model_call
        b.add(list(mc.prompt_token_ids), list(mc.completion_token_ids), [lp.logprob for lp in mc.logprobs],
              mc.model_version)
    n = len(b.segments)
    return [
        Sample(
            episode_id=episode.episode_id, group_id=episode.group_id, task_id=episode.task_id,
            status=_STATUS_NAMES.get(int(episode.status), str(episode.status)), reward=float(episode.score),
            advantage=float(advantage), segment=i, num_segments=n, has_prompt_tokens=b.has_prompt,
            has_logprobs=b.has_logprobs, **seg,
        )
        for i, seg in enumerate(b.segments)
    ]


def group_samples(group: Any, normalize_std: bool = False, eps: float = 1e-6) -> List[Sample]:
    """The samples of one EpisodeGroup fetched with include_trajectories=True,
    with GRPO advantages computed over the group."""
    if len(group.trajectories) != len(group.episodes):
        raise NoTokenData(
            "group %s has no trajectories: fetch the batch with include_trajectories=True" % group.group_id
        )
    # A failed episode has no reward (a failure is never a score of 0), so
    # it neither gets a sample nor moves its group's mean. The coordinator
    # hands out groups of DONE episodes, so this only guards a caller that
    # builds groups itself.
    done = [(e, t) for e, t in zip(group.episodes, group.trajectories) if int(e.status) == _DONE]
    adv = group_advantages([e.score for e, _ in done], normalize_std, eps)
    out: List[Sample] = []
    for (ep, traj), a in zip(done, adv):
        out.extend(episode_samples(ep, traj.steps, a))
    return out


def batch_samples(groups: Iterable[Any], normalize_std: bool = False, eps: float = 1e-6,
                  require_tokens: bool = True) -> Iterator[Sample]:
    """Yields the samples of every group, in order. With require_tokens, an
    episode that has steps with model calls but no completion token ids
    raises NoTokenData (token ids were off for the rollout)."""
    for group in groups:
        samples = group_samples(group, normalize_std, eps)
        if require_tokens:
            have = {s.episode_id for s in samples}
            for ep, traj in zip(group.episodes, group.trajectories):
                if int(ep.status) == _DONE and ep.episode_id not in have and any(_answered(st) for st in traj.steps):
                    raise NoTokenData(
                        "episode %s has model calls without token ids: start the rollout with "
                        "agent={'return_token_ids': True, 'logprobs': True}" % ep.episode_id
                    )
        yield from samples


def _answered(st: Any) -> bool:
    """The step's model call produced an answer (text, tool calls or counted
    completion tokens)."""
    if not st.HasField("model_call"):
        return False
    mc = st.model_call
    return bool(mc.response_text or len(mc.tool_calls) or mc.usage.completion_tokens)


def collate(samples: Sequence[Sample], pad_id: int = 0, as_numpy: Optional[bool] = None) -> Dict[str, Any]:
    """Pads samples to the longest one (right padding) and returns

    * token_ids  [B, T] (pad_id in padding)
    * loss_mask  [B, T] (0 in padding)
    * logprobs   [B, T] (0.0 in padding)
    * attention_mask [B, T] (1 for real tokens, 0 for padding)
    * advantages [B], rewards [B], lengths [B]

    as NumPy arrays (int64 / int8 / float32) when NumPy is importable and
    as_numpy is not False, else as nested lists. as_numpy=True without NumPy
    raises ImportError.
    """
    use_np = HAVE_NUMPY if as_numpy is None else as_numpy
    width = max((len(s) for s in samples), default=0)

    def pad(rows: List[list], value: Any) -> List[list]:
        return [list(r) + [value] * (width - len(r)) for r in rows]

    out: Dict[str, Any] = {
        "token_ids": pad([s.token_ids for s in samples], pad_id),
        "loss_mask": pad([s.loss_mask for s in samples], 0),
        "logprobs": pad([s.logprobs for s in samples], 0.0),
        "attention_mask": pad([[1] * len(s) for s in samples], 0),
        "advantages": [s.advantage for s in samples],
        "rewards": [s.reward for s in samples],
        "lengths": [len(s) for s in samples],
    }
    if not use_np:
        return out
    np = _require_numpy()
    types = {"token_ids": np.int64, "loss_mask": np.int8, "logprobs": np.float32, "attention_mask": np.int8,
             "advantages": np.float32, "rewards": np.float32, "lengths": np.int64}
    arrays = {}
    for k, v in out.items():
        a = np.asarray(v, dtype=types[k])
        if a.ndim == 1 and k in ("token_ids", "loss_mask", "logprobs", "attention_mask"):
            a = a.reshape(len(samples), width)  # no samples: shape (0, 0)
        arrays[k] = a
    return arrays
