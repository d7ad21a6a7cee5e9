"""Python client of rolloutmesh for training code.

The generated gRPC stubs live in ``rolloutmesh.v1``; ``RolloutClient`` wraps
the calls training loops make: start a rollout, consume batches of whole GRPO
groups, bump the model version after a weight sync, cancel, and read stats.
"""

from rolloutmesh.client import Batch, RolloutClient, RolloutError

__all__ = ["Batch", "RolloutClient", "RolloutError"]
