"""Tests of RolloutClient against a running mesh (rollout up).

Run by scripts/test-python.sh, which starts the mesh; the coordinator and
storage addresses come from ROLLOUTMESH_COORDINATOR / ROLLOUTMESH_STORAGE.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import grpc  # noqa: E402

from rolloutmesh import NoTokenData, RolloutClient, RolloutError, collate, tokens  # noqa: E402

COORD = os.environ.get("ROLLOUTMESH_COORDINATOR", "localhost:50052")
STORAGE = os.environ.get("ROLLOUTMESH_STORAGE", "localhost:50055")

MATH = [
    {"id": "py-client-apples", "domain": "math", "env_mode": "math", "answer": "252",
     "question": "A crate holds 12 boxes and each box holds 7 apples. How many apples are in 3 crates?"},
    {"id": "py-client-fraction", "domain": "math", "env_mode": "math", "answer": "36",
     "question": "What is 3/8 of 96?"},
]


class RolloutClientTest(unittest.TestCase):
    def setUp(self):
        self.client = RolloutClient(COORD, storage=STORAGE, timeout=30)

    def tearDown(self):
        self.client.close()

    def test_rollout_batches_whole_groups_and_stats(self):
        rid = self.client.start_rollout(
            tasks=MATH, group_size=2, mode="async", max_staleness=4,
            agent={"max_turns": 4, "evaluation_metric": "numeric_match"},
        )
        seen = {}
        for batch in self.client.batches(rid, batch_size=2, timeout=120):
            for group in batch:
                self.assertEqual(len(group.episodes), 2, "a batch holds whole groups only")
                self.assertNotIn(group.group_id, seen, "an acked group never comes back")
                seen[group.group_id] = [e.score for e in group.episodes]
            batch.ack()
        self.assertEqual(len(seen), len(MATH))
        for scores in seen.values():
            self.assertEqual(scores, [1.0, 1.0], "the scripted policy solves both tasks")
        stats = self.client.stats(rid)
        self.assertEqual(stats.rollouts[0].overall.episodes, 4)
        self.assertAlmostEqual(stats.rollouts[0].overall.success_rate, 1.0)

    def test_get_batch_iterator_acks_after_full_consumption(self):
        rid = self.client.start_rollout(tasks=MATH[:1], group_size=2, mode="sync")
        groups = list(self.client.get_batch(rid, batch_size=2, timeout=120))
        self.assertEqual(len(groups), 1)
        after = self.client.next_batch(rid, batch_size=2, timeout=2)
        self.assertEqual(len(after), 0, "the acked batch is not handed out again")

    def test_batch_token_samples_from_the_mesh(self):
        """Token ids and logprobs are on by default; a batch fetched with its
        trajectories becomes one sequence per episode whose model tokens have
        mask 1 and the sampling logprobs, and whose prompt tokens are the last
        turn's prompt."""
        rid = self.client.start_rollout(tasks=MATH, group_size=2, mode="sync",
                                        agent={"max_turns": 4, "evaluation_metric": "numeric_match"})
        batch = self.client.next_batch(rid, batch_size=4, timeout=120, include_trajectories=True)
        self.assertEqual(len(batch.groups), 2)
        samples = batch.samples()
        self.assertEqual(len(samples), 4, "one sample per episode: each prompt extends the previous turn")
        for group in batch.groups:
            by_id = {s.episode_id: s for s in samples}
            for ep, traj in zip(group.episodes, group.trajectories):
                s = by_id[ep.episode_id]
                self.assertEqual((s.reward, s.advantage, s.status), (ep.score, 0.0, "DONE"))
                calls = [st.model_call for st in traj.steps if st.model_call.completion_token_ids]
                self.assertGreaterEqual(len(calls), 2, "the scripted policy calls a tool, then answers")
                last = calls[-1]
                self.assertEqual(s.token_ids, list(last.prompt_token_ids) + list(last.completion_token_ids))
                self.assertEqual(s.num_completion_tokens, sum(len(c.completion_token_ids) for c in calls))
                self.assertEqual(len(s.loss_mask), len(s.token_ids))
                self.assertEqual(len(s.logprobs), len(s.token_ids))
                for m, lp in zip(s.loss_mask, s.logprobs):
                    # fakellm's logprobs are always negative
                    self.assertTrue(lp < 0 if m else lp == 0.0, (m, lp))
                self.assertTrue(s.has_prompt_tokens and s.has_logprobs)
        t = batch.tensors(pad_id=-7, as_numpy=False)
        width = max(len(s) for s in samples)
        self.assertEqual([len(r) for r in t["token_ids"]], [width] * 4)
        self.assertEqual(t["lengths"], [len(s) for s in samples])
        if tokens.HAVE_NUMPY:
            arr = batch.tensors()
            self.assertEqual(arr["token_ids"].shape, (4, width))
            self.assertEqual(arr["loss_mask"].sum(), sum(s.num_completion_tokens for s in samples))
        batch.ack()

    def test_token_ids_off_is_refused_by_the_helpers(self):
        rid = self.client.start_rollout(tasks=MATH[:1], group_size=1, mode="sync",
                                        agent={"max_turns": 4, "evaluation_metric": "numeric_match",
                                               "return_token_ids": False, "logprobs": False})
        batch = self.client.next_batch(rid, batch_size=1, timeout=120, include_trajectories=True)
        with self.assertRaisesRegex(NoTokenData, "return_token_ids"):
            batch.samples()
        batch.ack()
        rid = self.client.start_rollout(tasks=MATH[:1], group_size=1, mode="sync")
        batch = self.client.next_batch(rid, batch_size=1, timeout=120)  # no trajectories
        with self.assertRaisesRegex(NoTokenData, "include_trajectories"):
            collate(batch.samples())
        batch.ack()

    def test_bad_spec_names_the_field(self):
        with self.assertRaises(RolloutError) as cm:
            self.client.start_rollout(tasks=MATH, group_size=-1)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("group_size", str(cm.exception))

    def test_update_model_version_and_cancel(self):
        rid = self.client.start_rollout(tasks=MATH, group_size=1, mode="async", max_staleness=2)
        current = self.client.get_rollout(rid).model_version
        self.assertEqual(self.client.update_model_version(current + 1), current + 1)
        ro = self.client.cancel(rid, reason="test")
        self.assertIn(ro.state, (3, 2))  # CANCELLED, or FINISHED if it was quicker

    def test_model_version_bounds_and_reset(self):
        current = self.client.update_model_version(0, reset=True)
        self.assertEqual(current, 0)
        with self.assertRaises(RolloutError) as cm:
            self.client.update_model_version(2**63 - 1)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(self.client.update_model_version(5), 5)
        with self.assertRaises(RolloutError):
            self.client.update_model_version(2)  # lower, without reset
        self.assertEqual(self.client.update_model_version(2, reset=True), 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
