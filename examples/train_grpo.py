#!/usr/bin/env python3
"""A minimal GRPO-style training loop against a running rolloutmesh.

It starts an async rollout of the bundled math tasks, consumes batches of
whole groups with their trajectories, turns each batch into padded token
tensors (token ids, loss mask, sampling logprobs, GRPO advantages: reward
minus the group's mean, divided by the group's std with --normalize-std),
"trains" (prints what a trainer would use), bumps the model version as a
weight sync would, and acks each batch. Run it against `rollout up`:

    /usr/bin/python3 examples/train_grpo.py --iterations 3

It uses the installed `rolloutmesh` package when there is one (pip install
./clients/python), else the client in this repository. The tensors are NumPy
arrays when NumPy is installed (python3-numpy), nested lists otherwise.
"""

import argparse
import os
import statistics
import sys

try:
    import rolloutmesh  # installed with pip
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
    import rolloutmesh

from rolloutmesh import HAVE_NUMPY, RolloutClient  # noqa: E402


def shape(x):
    """The shape of an array or of a nested list of equal-length rows."""
    if hasattr(x, "shape"):
        return tuple(x.shape)
    return (len(x), len(x[0]) if x else 0) if x and isinstance(x[0], list) else (len(x),)


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
    ap.add_argument("--normalize-std", action="store_true", help="divide advantages by the group's std")
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
            batch = client.next_batch(rollout_id, batch_size, timeout=300, include_trajectories=True)
            if not batch.groups:
                print(f"iteration {it}: no batch ({'rollout done' if batch.rollout_done else 'timeout'})")
                return 1
            rewards = [r for group in batch.rewards() for r in group]
            t = batch.tensors(pad_id=0, normalize_std=args.normalize_std)
            adv = list(t["advantages"])
            print(f"iteration {it}: {len(batch.groups)} groups, mean reward {statistics.fmean(rewards):.3f}, "
                  f"advantages {min(adv):+.2f}..{max(adv):+.2f}, model version {batch.model_version}")
            print(f"  token tensors ({'numpy' if HAVE_NUMPY else 'lists'}): token_ids {shape(t['token_ids'])}, "
                  f"loss_mask {shape(t['loss_mask'])}, logprobs {shape(t['logprobs'])}, "
                  f"advantages {shape(t['advantages'])}; {int(sum(map(sum, t['loss_mask'])))} model tokens")
            # A real trainer would take a gradient step here: the policy-gradient
            # loss is -(advantage * ratio(logprobs)) over the positions where
            # loss_mask is 1. Then it syncs weights.
            batch.ack()
            # The model version is mesh-wide: bump from the one in force.
            version = client.update_model_version(batch.model_version + 1)
        client.cancel(rollout_id, reason="training finished")
        print(f"done at model version {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
