#!/usr/bin/env python3
"""A minimal GRPO-style training loop against a running rolloutmesh.

It starts an async rollout of the bundled math tasks, consumes batches of
whole groups, computes group-relative advantages from the rewards, "trains"
(prints what a trainer would use), bumps the model version as a weight sync
would, and acks each batch. Run it against `rollout up`:

    /usr/bin/python3 examples/train_grpo.py --iterations 3
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))

from rolloutmesh import RolloutClient  # noqa: E402


def advantages(rewards):
    """GRPO: each episode's reward relative to its group's mean, scaled by the
    group's standard deviation."""
    mean = statistics.fmean(rewards)
    std = statistics.pstdev(rewards)
    return [(r - mean) / (std + 1e-6) for r in rewards]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coordinator", default="localhost:50052")
    ap.add_argument("--storage", default="localhost:50055")
    ap.add_argument("--tasks", default=os.path.join(here, "tasks", "math.jsonl"))
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--groups-per-batch", type=int, default=2)
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument("--model", default="")
    args = ap.parse_args()

    with RolloutClient(args.coordinator, storage=args.storage) as client:
        rollout_id = client.start_rollout(
            task_source=os.path.abspath(args.tasks),
            env_mode="math",
            group_size=args.group_size,
            num_env_groups=args.iterations * args.groups_per_batch,
            mode="async",
            max_staleness=args.max_staleness,
            agent={"model": args.model, "max_turns": 4, "max_retries": 2, "evaluation_metric": "numeric_match"},
        )
        print(f"rollout {rollout_id} started")
        version = 0
        batch_size = args.group_size * args.groups_per_batch
        for it in range(1, args.iterations + 1):
            batch = client.next_batch(rollout_id, batch_size, timeout=300)
            if not batch.groups:
                print(f"iteration {it}: no batch ({'rollout done' if batch.rollout_done else 'timeout'})")
                return 1
            rewards = [r for group in batch.rewards() for r in group]
            adv = [a for group in batch.rewards() for a in advantages(group)]
            print(f"iteration {it}: {len(batch.groups)} groups, mean reward {statistics.fmean(rewards):.3f}, "
                  f"advantages {min(adv):+.2f}..{max(adv):+.2f}, model version {batch.model_version}")
            # A real trainer would take a gradient step here, then sync weights.
            batch.ack()
            # The model version is mesh-wide: bump from the one in force.
            version = client.update_model_version(batch.model_version + 1)
        client.cancel(rollout_id, reason="training finished")
        print(f"done at model version {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
