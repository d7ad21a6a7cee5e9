"""RolloutClient: the calls a training loop makes to a rolloutmesh mesh."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

import grpc
from google.protobuf import duration_pb2

from rolloutmesh.v1 import common_pb2
from rolloutmesh.v1 import coordinator_pb2 as cpb
from rolloutmesh.v1 import coordinator_pb2_grpc
from rolloutmesh.v1 import storage_pb2
from rolloutmesh.v1 import storage_pb2_grpc
from rolloutmesh.tokens import Sample, batch_samples, collate


class RolloutError(Exception):
    """A call to the mesh failed; ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None):
        super().__init__(message)
        self.code = code


def _duration(seconds: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def _task(t: Any) -> common_pb2.Task:
    """Builds a Task from a dict in the task-file format (or passes one through)."""
    if isinstance(t, common_pb2.Task):
        return t
    if not isinstance(t, dict):
        raise TypeError(f"task must be a dict or Task, not {type(t).__name__}")
    return common_pb2.Task(
        id=str(t.get("id", "")),
        domain=str(t.get("domain", "")),
        instruction=str(t.get("instruction", "")),
        env_mode=str(t.get("env_mode", "")),
        answer=str(t.get("answer", "")),
        tags=[str(x) for x in t.get("tags", [])],
        spec_json=json.dumps(t),
    )


def _start_request(tasks, task_source, group_size, mode, max_staleness, env_mode, agent, rollout_id, spec):
    modes = {"sync": cpb.ROLLOUT_MODE_SYNC, "async": cpb.ROLLOUT_MODE_ASYNC}
    if mode not in modes:
        raise ValueError(f"mode must be 'sync' or 'async', not {mode!r}")
    agent = dict(agent or {})
    # Trainers need token ids and logprobs: on unless turned off explicitly.
    agent.setdefault("return_token_ids", True)
    agent.setdefault("logprobs", True)
    rs = cpb.RolloutSpec(
        tasks=[_task(t) for t in (tasks or [])],
        task_source=task_source,
        group_size=group_size,
        mode=modes[mode],
        max_staleness=max_staleness,
        env_mode=env_mode,
        agent=common_pb2.AgentConfig(**agent),
        **spec,
    )
    return cpb.StartRolloutRequest(spec=rs, rollout_id=rollout_id)


def _batch_request(rollout_id, batch_size, timeout, drop_zero_variance, drop_stale, include_trajectories):
    return cpb.GetBatchRequest(
        rollout_id=rollout_id,
        batch_size=batch_size,
        timeout=_duration(timeout),
        drop_zero_variance=drop_zero_variance,
        drop_stale=drop_stale,
        include_trajectories=include_trajectories,
    )


def _channel_options():
    return [
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.max_send_message_length", 64 << 20),
    ]


@dataclass
class Batch:
    """A batch of whole finished groups. Iterate over ``groups``; ``ack()``
    consumes it (an unacked batch is handed out again after its ack timeout)."""

    rollout_id: str
    batch_id: str
    groups: List[cpb.EpisodeGroup] = field(default_factory=list)
    rollout_done: bool = False
    model_version: int = 0
    _client: Any = None

    def __iter__(self) -> Iterator[cpb.EpisodeGroup]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def rewards(self) -> List[List[float]]:
        """Rewards per group, in episode order."""
        return [[e.score for e in g.episodes] for g in self.groups]

    def samples(self, normalize_std: bool = False, eps: float = 1e-6) -> List[Sample]:
        """Per-episode token sequences, loss masks, logprobs, rewards and GRPO
        advantages (see rolloutmesh.tokens). Needs a batch fetched with
        include_trajectories=True."""
        return list(batch_samples(self.groups, normalize_std=normalize_std, eps=eps))

    def tensors(self, pad_id: int = 0, normalize_std: bool = False, as_numpy: Optional[bool] = None) -> Dict[str, Any]:
        """The batch's samples padded into [B, T] arrays (NumPy when present,
        else nested lists); see rolloutmesh.tokens.collate."""
        return collate(self.samples(normalize_std=normalize_std), pad_id=pad_id, as_numpy=as_numpy)

    def ack(self) -> None:
        if self.batch_id and self._client is not None:
            self._client._ack(self.rollout_id, self.batch_id)


class RolloutClient:
    """Client of the coordinator (and storage, for stats).

    >>> client = RolloutClient("localhost:50052", storage="localhost:50055")
    >>> rid = client.start_rollout(task_source="/data/tasks.jsonl", group_size=4, mode="async")
    >>> for batch in client.batches(rid, batch_size=8):
    ...     train_on(batch.rewards())
    ...     batch.ack()
    """

    def __init__(
        self,
        coordinator: str = "localhost:50052",
        storage: Optional[str] = "localhost:50055",
        timeout: float = 30.0,
        token: Optional[str] = None,
    ):
        self._timeout = timeout
        self._metadata = [("authorization", f"Bearer {token}")] if token else None
        options = _channel_options()
        self._cchan = grpc.insecure_channel(coordinator, options=options)
        self._coord = coordinator_pb2_grpc.CoordinatorStub(self._cchan)
        self._schan = grpc.insecure_channel(storage, options=options) if storage else None
        self._storage = storage_pb2_grpc.StorageStub(self._schan) if self._schan else None

    def close(self) -> None:
        self._cchan.close()
        if self._schan:
            self._schan.close()

    def __enter__(self) -> "RolloutClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, method, request, timeout: Optional[float] = None):
        try:
            return method(request, timeout=timeout or self._timeout, metadata=self._metadata)
        except grpc.RpcError as err:  # one place turns gRPC errors into ours
            raise RolloutError(f"{err.code().name}: {err.details()}", err.code()) from None

    def start_rollout(
        self,
        tasks: Optional[Sequence[Any]] = None,
        task_source: str = "",
        group_size: int = 1,
        mode: str = "sync",
        max_staleness: int = 0,
        env_mode: str = "",
        agent: Optional[Dict[str, Any]] = None,
        rollout_id: str = "",
        **spec: Any,
    ) -> str:
        """Starts a rollout and returns its id. ``agent`` and ``spec`` take the
        RolloutSpec/AgentConfig field names (e.g. ``agent={"model": "m",
        "max_turns": 15}``, ``num_env_groups=8``, ``vm_pool="local"``).
        Token ids and logprobs are recorded unless ``agent`` turns them off
        (``{"return_token_ids": False, "logprobs": False}``)."""
        req = _start_request(tasks, task_source, group_size, mode, max_staleness, env_mode, agent, rollout_id, spec)
        return self._call(self._coord.StartRollout, req).rollout_id

    def get_rollout(self, rollout_id: str, include_groups: bool = False) -> cpb.Rollout:
        return self._call(self._coord.GetRollout, cpb.GetRolloutRequest(rollout_id=rollout_id, include_groups=include_groups))

    def get_batch(
        self,
        rollout_id: str,
        batch_size: int,
        timeout: float = 60.0,
        drop_zero_variance: bool = False,
        drop_stale: bool = False,
        include_trajectories: bool = False,
    ) -> Iterator[cpb.EpisodeGroup]:
        """Yields the groups of one batch and acks the batch once every group
        has been consumed; a caller that stops early (or crashes) does not ack,
        so the batch comes back later."""
        batch = self.next_batch(rollout_id, batch_size, timeout, drop_zero_variance, drop_stale, include_trajectories)
        for group in batch:
            yield group
        batch.ack()

    def next_batch(
        self,
        rollout_id: str,
        batch_size: int,
        timeout: float = 60.0,
        drop_zero_variance: bool = False,
        drop_stale: bool = False,
        include_trajectories: bool = False,
    ) -> Batch:
        """Waits up to ``timeout`` for one batch; an empty Batch means none was
        ready in time (check ``rollout_done``)."""
        req = _batch_request(rollout_id, batch_size, timeout, drop_zero_variance, drop_stale, include_trajectories)
        resp = self._call(self._coord.GetBatch, req, timeout=timeout + self._timeout)
        return Batch(
            rollout_id=rollout_id,
            batch_id=resp.batch_id,
            groups=list(resp.groups),
            rollout_done=resp.rollout_done,
            model_version=resp.model_version,
            _client=self,
        )

    def batches(self, rollout_id: str, batch_size: int, timeout: float = 60.0, **kw: Any) -> Iterable[Batch]:
        """Yields batches until the rollout has no more groups to give. The
        caller acks each batch after training on it."""
        while True:
            batch = self.next_batch(rollout_id, batch_size, timeout, **kw)
            if batch.groups:
                yield batch
            elif batch.rollout_done:
                return

    def _ack(self, rollout_id: str, batch_id: str) -> None:
        self._call(self._coord.AckBatch, cpb.AckBatchRequest(rollout_id=rollout_id, batch_id=batch_id))

    def update_model_version(
        self, version: int, source: str = "", update_gateway: bool = False, reset: bool = False
    ) -> int:
        """Records a new model version after a weight sync; returns it.

        A version may be at most 1,000,000 above the current one and below
        2**53; reset=True sets any version in that range, lower ones included
        (an operator's repair, e.g. after a wrong version was recorded).
        """
        req = cpb.UpdateModelVersionRequest(
            version=version, source=source, update_gateway=update_gateway, reset=reset
        )
        return self._call(self._coord.UpdateModelVersion, req).version

    def cancel(self, rollout_id: str, reason: str = "") -> cpb.Rollout:
        return self._call(self._coord.CancelRollout, cpb.CancelRolloutRequest(rollout_id=rollout_id, reason=reason))

    def stats(self, *rollout_ids: str) -> storage_pb2.GetStatsResponse:
        """Success rates per rollout, domain and model version (from storage)."""
        if self._storage is None:
            raise RolloutError("no storage address given")
        return self._call(self._storage.GetStats, storage_pb2.GetStatsRequest(rollout_ids=list(rollout_ids)))
