"""Run one rollout of a bundle file in this (fresh) interpreter and print the outcome as JSON.

``python -I -m benchmax.validation._fresh_rollout BUNDLE BASE_DIR SPLIT BASE_URL MODEL NAMES
DEADLINES``
is how ``validate_environment`` proves a bundle does not depend on the process that made it:
the bundle is read, checked and loaded here, the first example of SPLIT is loaded from
BASE_DIR and one rollout runs against BASE_URL. NAMES is a JSON list of injected credential
names, bound to a placeholder key (the endpoint is the validator's mock model); DEADLINES the
JSON of the ``HookDeadlines`` the rollout runs under. The last line
of stdout is ``{"env_class", "termination_reason", "rewards"}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import cast

from benchmax._group_pipeline import Group, GroupPipeline, HookDeadlines
from benchmax.auth import StaticBearerAuth
from benchmax.bundle import load_bundle, read_bundle, validate_bundle_compatibility
from benchmax.envs.shared_types import DatasetSplit, RolloutRequest

PLACEHOLDER_KEY = "benchmax-validate-placeholder"


async def _main(argv: list[str]) -> dict[str, object]:
    bundle_path, base_dir, split_name, base_url, model, names, deadlines = argv
    split = cast(DatasetSplit, split_name)  # the validator passes a split it has checked
    bundle = read_bundle(Path(bundle_path))
    validate_bundle_compatibility(bundle.metadata)
    env = load_bundle(bundle)
    try:
        dataset = await env.create_dataset(split, Path(base_dir))
        example = next(itertools.islice(dataset, 1))
        request = RolloutRequest(
            rollout_id="validate-bundle.r0",
            example=example,
            model=model,
            base_url=base_url,
            model_auth=StaticBearerAuth(PLACEHOLDER_KEY),
            split=split,
        )
        providers = {name: StaticBearerAuth(PLACEHOLDER_KEY) for name in json.loads(names)}
        pipeline = GroupPipeline(
            env,
            auth_providers=providers,
            pass_on_logs=True,
            hook_deadlines=HookDeadlines(**json.loads(deadlines)),
        )
        outcomes = (await pipeline.run(Group((request,)))).outcomes
    finally:
        await env.aclose()
    outcome = outcomes[request.rollout_id]
    return {
        "env_class": type(env).__name__,
        "termination_reason": outcome.termination_reason,
        "rewards": dict(outcome.rewards),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(sys.argv[1:]))))
