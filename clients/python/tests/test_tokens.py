"""Tests of rolloutmesh.tokens on hand-built steps (no mesh needed): how the
multi-turn sequence, loss mask, logprobs and advantages are built, and the
NumPy-optional collation."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from rolloutmesh import tokens  # noqa: E402
from rolloutmesh.tokens import NoTokenData, batch_samples, collate, episode_samples, group_advantages  # noqa: E402
from rolloutmesh.v1 import common_pb2, coordinator_pb2, storage_pb2  # noqa: E402


def step(index, prompt, completion, logprobs=None, version=0, text="x"):
    if logprobs is None:
        logprobs = [-0.1 * (i + 1) for i in range(len(completion))]
    mc = storage_pb2.ModelCall(
        prompt_token_ids=prompt, completion_token_ids=completion, model_version=version, response_text=text,
        logprobs=[common_pb2.TokenLogprob(token_id=t, logprob=lp) for t, lp in zip(completion, logprobs)],
    )
    return storage_pb2.Step(index=index, model_call=mc)


def episode(eid, score, group="g"):
    return common_pb2.Episode(episode_id=eid, group_id=group, task_id="t", score=score,
                              status=common_pb2.EPISODE_STATUS_DONE)


class EpisodeSamplesTest(unittest.TestCase):
    def test_multi_turn_prompt_extension(self):
        # turn 0: prompt [1,2,3] -> completion [10,11]; turn 1's prompt extends
        # it with the observation [4,5]; turn 2 ditto with [6].
        steps = [
            step(0, [1, 2, 3], [10, 11], version=3),
            step(1, [1, 2, 3, 10, 11, 4, 5], [12], version=4),
            step(2, [1, 2, 3, 10, 11, 4, 5, 12, 6], [13, 14], version=4),
        ]
        [s] = episode_samples(episode("e", 1.0), reversed(steps), advantage=0.5)  # order by index
        self.assertEqual(s.token_ids, [1, 2, 3, 10, 11, 4, 5, 12, 6, 13, 14])
        self.assertEqual(s.loss_mask, [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1])
        self.assertEqual(s.logprobs, [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.1, 0.0, -0.1, -0.2])
        self.assertEqual(s.versions, [-1, -1, -1, 3, 3, -1, -1, 4, -1, 4, 4])
        self.assertEqual((s.reward, s.advantage, s.segment, s.num_segments), (1.0, 0.5, 0, 1))
        self.assertTrue(s.has_prompt_tokens and s.has_logprobs)
        self.assertEqual(s.num_completion_tokens, 5)

    def test_rewritten_context_starts_a_new_segment(self):
        steps = [
            step(0, [1, 2, 3], [10]),
            step(1, [1, 9, 3, 10, 4], [11]),  # history rewritten: no prefix
        ]
        a, b = episode_samples(episode("e", 0.0), steps)
        self.assertEqual((a.token_ids, a.loss_mask), ([1, 2, 3, 10], [0, 0, 0, 1]))
        self.assertEqual((b.token_ids, b.loss_mask), ([1, 9, 3, 10, 4, 11], [0, 0, 0, 0, 0, 1]))
        self.assertEqual([(x.segment, x.num_segments) for x in (a, b)], [(0, 2), (1, 2)])

    def test_without_prompt_ids_completion_tokens_only(self):
        steps = [step(0, [], [10, 11]), step(1, [], [12])]
        [s] = episode_samples(episode("e", 1.0), steps)
        self.assertEqual((s.token_ids, s.loss_mask), ([10, 11, 12], [1, 1, 1]))
        self.assertFalse(s.has_prompt_tokens)

    def test_failed_model_call_adds_nothing_and_missing_logprobs_are_flagged(self):
        steps = [step(0, [1], [10], logprobs=[]), storage_pb2.Step(index=1), step(2, [1, 10, 2], [])]
        [s] = episode_samples(episode("e", 1.0), steps)
        self.assertEqual((s.token_ids, s.loss_mask, s.logprobs), ([1, 10], [0, 1], [0.0, 0.0]))
        self.assertFalse(s.has_logprobs)

    def test_no_tokens_no_samples(self):
        self.assertEqual(episode_samples(episode("e", 1.0), [step(0, [], [], text="hi")]), [])


class GroupTest(unittest.TestCase):
    def group(self, scores, with_tokens=True):
        g = coordinator_pb2.EpisodeGroup(group_id="g", task_id="t")
        for i, sc in enumerate(scores):
            g.episodes.append(episode(f"e{i}", sc))
            st = step(0, [1, 2], [3 + i] * (i + 1)) if with_tokens else step(0, [], [], text="answer")
            g.trajectories.append(coordinator_pb2.EpisodeSteps(episode_id=f"e{i}", steps=[st]))
        return g

    def test_advantages(self):
        self.assertEqual(group_advantages([1.0, 0.0, 1.0, 0.0]), [0.5, -0.5, 0.5, -0.5])
        adv = group_advantages([1.0, 0.0, 1.0, 0.0], normalize_std=True, eps=0.0)
        self.assertEqual(adv, [1.0, -1.0, 1.0, -1.0])
        self.assertEqual(group_advantages([1.0, 1.0], normalize_std=True), [0.0, 0.0])
        self.assertEqual(group_advantages([]), [])

    def test_batch_samples_and_collate_lists(self):
        samples = list(batch_samples([self.group([1.0, 0.0])]))
        self.assertEqual([s.advantage for s in samples], [0.5, -0.5])
        t = collate(samples, pad_id=-1, as_numpy=False)
        self.assertEqual(t["token_ids"], [[1, 2, 3, -1], [1, 2, 4, 4]])
        self.assertEqual(t["loss_mask"], [[0, 0, 1, 0], [0, 0, 1, 1]])
        self.assertEqual(t["attention_mask"], [[1, 1, 1, 0], [1, 1, 1, 1]])
        self.assertEqual(t["lengths"], [3, 4])
        self.assertEqual(t["rewards"], [1.0, 0.0])

    @unittest.skipUnless(tokens.HAVE_NUMPY, "NumPy not installed")
    def test_collate_numpy(self):
        import numpy as np

        samples = list(batch_samples([self.group([1.0, 0.0, 0.0])]))
        t = collate(samples)
        self.assertEqual(t["token_ids"].shape, (3, 5))
        self.assertEqual(t["token_ids"].dtype, np.int64)
        self.assertEqual(t["logprobs"].dtype, np.float32)
        self.assertEqual(t["advantages"].shape, (3,))
        self.assertEqual(int(t["loss_mask"].sum()), 1 + 2 + 3)
        self.assertEqual(collate([])["token_ids"].shape, (0, 0))
        self.assertEqual(samples[0].numpy()["token_ids"].tolist(), [1, 2, 3])

    def test_failed_episodes_are_no_samples_and_no_reward(self):
        g = self.group([1.0, 0.0, 0.0])
        g.episodes[1].status = common_pb2.EPISODE_STATUS_FAILED  # a failure, not a score of 0
        samples = list(batch_samples([g]))
        self.assertEqual([s.episode_id for s in samples], ["e0", "e2"])
        self.assertEqual([s.advantage for s in samples], [0.5, -0.5])

    def test_missing_trajectories_or_token_ids_are_refused(self):
        g = self.group([1.0])
        del g.trajectories[:]
        with self.assertRaisesRegex(NoTokenData, "include_trajectories"):
            list(batch_samples([g]))
        with self.assertRaisesRegex(NoTokenData, "return_token_ids"):
            list(batch_samples([self.group([1.0], with_tokens=False)]))
        self.assertEqual(list(batch_samples([self.group([1.0], with_tokens=False)], require_tokens=False)), [])

    def test_without_numpy_lists_are_returned(self):
        code = (
            "import sys; sys.modules['numpy'] = None; sys.path.insert(0, sys.argv[1])\n"
            "from rolloutmesh import tokens\n"
            "assert not tokens.HAVE_NUMPY\n"
            "s = tokens.Sample('e', 'g', 't', 'DONE', 1.0, 0.0, [1, 2], [0, 1], [0.0, -0.5], [-1, 0])\n"
            "t = tokens.collate([s])\n"
            "assert t['token_ids'] == [[1, 2]] and t['advantages'] == [0.0], t\n"
            "try:\n    s.numpy()\nexcept ImportError as e:\n    print('no numpy:', e)\n"
            "else:\n    raise SystemExit('numpy() worked without NumPy')\n"
        )
        out = subprocess.run([sys.executable, "-c", code, os.path.join(HERE, "..")], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("python3-numpy", out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
