"""AsyncRolloutClient: RolloutClient's calls on grpc.aio, for asyncio trainers.

>>> async with AsyncRolloutClient("localhost:50052", storage="localhost:50055") as client:
...     rid = await client.start_rollout(task_source="/data/tasks.jsonl", group_size=4, mode="async")
...     async for batch in client.batches(rid, batch_size=8, include_trajectories=True):
...         tensors = batch.tensors()
...         await batch.ack()
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Dict, Optional, Sequence

import grpc
from grpc import aio

from rolloutmesh.client import (
    Batch,
    RolloutError,
    _batch_request,
    _channel_options,
    _start_request,
)
from rolloutmesh.v1 import coordinator_pb2 as cpb
from rolloutmesh.v1 import coordinator_pb2_grpc
from rolloutmesh.v1 import storage_pb2
from rolloutmesh.v1 import storage_pb2_grpc


class AsyncBatch(Batch):
    """A Batch whose ``ack()`` is a coroutine."""

    async def ack(self) -> None:  # type: ignore[override]
        if self.batch_id and self._client is not None:
            await self._client._ack(self.rollout_id, self.batch_id)


class AsyncRolloutClient:
    """The asyncio twin of RolloutClient: the same methods, as coroutines
    (``batches`` is an async generator). Create it inside a running event
    loop; ``await client.close()`` or use ``async with``."""

    def __init__(
        self,
        coordinator: str = "localhost:50052",
        storage: Optional[str] = "localhost:50055",
        timeout: float = 30.0,
        token: Optional[str] = None,
    ):
        self._timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._cchan = aio.insecure_channel(coordinator, options=_channel_options())
        self._coord = coordinator_pb2_grpc.CoordinatorStub(self._cchan)
        self._schan = aio.insecure_channel(storage, options=_channel_options()) if storage else None
        self._storage = storage_pb2_grpc.StorageStub(self._schan) if self._schan else None

    async def close(self) -> None:
        await self._cchan.close()
        if self._schan:
            await self._schan.close()

    async def __aenter__(self) -> "AsyncRolloutClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _call(self, method, request, timeout: Optional[float] = None):
        try:
            return await method(request, timeout=timeout or self._timeout, metadata=self._metadata)
        except grpc.RpcError as err:  # aio.AioRpcError is one
            raise RolloutError(f"{err.code().name}: {err.details()}", err.code()) from None

    async def start_rollout(
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
        """See RolloutClient.start_rollout."""
        req = _start_request(tasks, task_source, group_size, mode, max_staleness, env_mode, agent, rollout_id, spec)
        return (await self._call(self._coord.StartRollout, req)).rollout_id

    async def get_rollout(self, rollout_id: str, include_groups: bool = False) -> cpb.Rollout:
        return await self._call(
            self._coord.GetRollout, cpb.GetRolloutRequest(rollout_id=rollout_id, include_groups=include_groups)
        )

    async def next_batch(
        self,
        rollout_id: str,
        batch_size: int,
        timeout: float = 60.0,
        drop_zero_variance: bool = False,
        drop_stale: bool = False,
        include_trajectories: bool = False,
    ) -> AsyncBatch:
        """Waits up to ``timeout`` for one batch; an empty batch means none was
        ready in time (check ``rollout_done``)."""
        req = _batch_request(rollout_id, batch_size, timeout, drop_zero_variance, drop_stale, include_trajectories)
        resp = await self._call(self._coord.GetBatch, req, timeout=timeout + self._timeout)
        return AsyncBatch(
            rollout_id=rollout_id,
            batch_id=resp.batch_id,
            groups=list(resp.groups),
            rollout_done=resp.rollout_done,
            model_version=resp.model_version,
            _client=self,
        )

    async def batches(
        self, rollout_id: str, batch_size: int, timeout: float = 60.0, **kw: Any
    ) -> AsyncIterator[AsyncBatch]:
        """Yields batches until the rollout has no more groups to give; the
        caller awaits ``batch.ack()`` after training on each."""
        while True:
            batch = await self.next_batch(rollout_id, batch_size, timeout, **kw)
            if batch.groups:
                yield batch
            elif batch.rollout_done:
                return

    async def _ack(self, rollout_id: str, batch_id: str) -> None:
        await self._call(self._coord.AckBatch, cpb.AckBatchRequest(rollout_id=rollout_id, batch_id=batch_id))

    async def update_model_version(
        self, version: int, source: str = "", update_gateway: bool = False, reset: bool = False
    ) -> int:
        """See RolloutClient.update_model_version."""
        req = cpb.UpdateModelVersionRequest(version=version, source=source, update_gateway=update_gateway, reset=reset)
        return (await self._call(self._coord.UpdateModelVersion, req)).version

    async def cancel(self, rollout_id: str, reason: str = "") -> cpb.Rollout:
        return await self._call(self._coord.CancelRollout, cpb.CancelRolloutRequest(rollout_id=rollout_id, reason=reason))

    async def stats(self, *rollout_ids: str) -> storage_pb2.GetStatsResponse:
        """Success rates per rollout, domain and model version (from storage)."""
        if self._storage is None:
            raise RolloutError("no storage address given")
        return await self._call(self._storage.GetStats, storage_pb2.GetStatsRequest(rollout_ids=list(rollout_ids)))
