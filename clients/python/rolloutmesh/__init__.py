"""Python client of rolloutmesh for training code.

The generated gRPC stubs live in ``rolloutmesh.v1``; ``RolloutClient`` wraps
the calls training loops make: start a rollout, consume batches of whole GRPO
groups, bump the model version after a weight sync, cancel, and read stats.
``AsyncRolloutClient`` (``rolloutmesh.aio``) is the same on asyncio/grpc.aio.
``rolloutmesh.tokens`` turns a batch into per-episode token sequences, loss
masks, logprobs, rewards and GRPO advantages (lists, or NumPy arrays when
NumPy is installed).
"""

from rolloutmesh.client import Batch, RolloutClient, RolloutError
from rolloutmesh.aio import AsyncBatch, AsyncRolloutClient
from rolloutmesh.tokens import HAVE_NUMPY, NoTokenData, Sample, batch_samples, collate, group_advantages

__version__ = "0.1.0"

__all__ = [
    "AsyncBatch",
    "AsyncRolloutClient",
    "Batch",
    "HAVE_NUMPY",
    "NoTokenData",
    "RolloutClient",
    "RolloutError",
    "Sample",
    "batch_samples",
    "collate",
    "group_advantages",
]
