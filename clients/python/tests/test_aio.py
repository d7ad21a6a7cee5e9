"""Tests of AsyncRolloutClient (grpc.aio) against a running mesh (rollout up).

Run by scripts/test-python.sh, which starts the mesh; the coordinator and
storage addresses come from ROLLOUTMESH_COORDINATOR / ROLLOUTMESH_STORAGE.
"""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import grpc  # noqa: E402

from rolloutmesh import AsyncBatch, AsyncRolloutClient, RolloutError  # noqa: E402

COORD = os.environ.get("ROLLOUTMESH_COORDINATOR", "localhost:50052")
STORAGE = os.environ.get("ROLLOUTMESH_STORAGE", "localhost:50055")

MATH = [
    {"id": "py-aio-apples", "domain": "math", "env_mode": "math", "answer": "252",
     "question": "A crate holds 12 boxes and each box holds 7 apples. How many apples are in 3 crates?"},
    {"id": "py-aio-fraction", "domain": "math", "env_mode": "math", "answer": "36",
     "question": "What is 3/8 of 96?"},
]
AGENT = {"max_turns": 4, "evaluation_metric": "numeric_match"}


class AsyncRolloutClientTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.client = AsyncRolloutClient(COORD, storage=STORAGE, timeout=30)

    async def asyncTearDown(self):
        await self.client.close()

    async def test_rollout_batches_samples_ack_and_stats(self):
        rid = await self.client.start_rollout(tasks=MATH, group_size=2, mode="async", max_staleness=4, agent=AGENT)
        seen = {}
        async for batch in self.client.batches(rid, batch_size=2, timeout=120, include_trajectories=True):
            self.assertIsInstance(batch, AsyncBatch)
            for group in batch:
                self.assertNotIn(group.group_id, seen, "an acked group never comes back")
                seen[group.group_id] = [e.score for e in group.episodes]
            samples = batch.samples()
            self.assertEqual(len(samples), 2 * len(batch))
            self.assertTrue(all(s.num_completion_tokens > 0 and s.reward == 1.0 for s in samples))
            await batch.ack()
        self.assertEqual(sorted(seen.values()), [[1.0, 1.0], [1.0, 1.0]])
        stats = await self.client.stats(rid)
        self.assertEqual(stats.rollouts[0].overall.episodes, 4)
        ro = await self.client.get_rollout(rid)
        self.assertEqual(ro.rollout_id, rid)

    async def test_concurrent_rollouts_on_one_client(self):
        rids = await asyncio.gather(*(
            self.client.start_rollout(tasks=[t], group_size=1, mode="sync", agent=AGENT) for t in MATH))
        batches = await asyncio.gather(*(self.client.next_batch(r, 1, timeout=120) for r in rids))
        self.assertEqual([b.groups[0].task_id for b in batches], [t["id"] for t in MATH])
        await asyncio.gather(*(b.ack() for b in batches))
        after = await self.client.next_batch(rids[0], 1, timeout=1)
        self.assertEqual(len(after), 0, "the acked batch is not handed out again")
        self.assertTrue(after.rollout_done)

    async def test_errors_and_model_version(self):
        with self.assertRaises(RolloutError) as cm:
            await self.client.start_rollout(tasks=MATH, group_size=-1)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("group_size", str(cm.exception))
        with self.assertRaises(RolloutError) as cm:
            await self.client.get_rollout("no-such-rollout")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        rid = await self.client.start_rollout(tasks=MATH, group_size=1, mode="async", max_staleness=2, agent=AGENT)
        current = (await self.client.get_rollout(rid)).model_version
        self.assertEqual(await self.client.update_model_version(current + 1), current + 1)
        ro = await self.client.cancel(rid, reason="test")
        self.assertIn(ro.state, (2, 3))  # FINISHED or CANCELLED


if __name__ == "__main__":
    unittest.main(verbosity=2)
