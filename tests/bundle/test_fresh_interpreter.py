"""Bundles load and run in a fresh ``python -I`` interpreter that has none of the projects."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from tests.bundle.conftest import Project

from benchmax.bundle import dump_bundle, save_bundle

RUN_GROUP = """
import asyncio, json, pickle, sys, importlib.util
from benchmax.auth import StaticBearerAuth
from benchmax.bundle import load_bundle
from benchmax.envs.shared_types import RolloutRequest
from benchmax.testing import MockModelServer, echo

assert importlib.util.find_spec("chat_pkg") is None

with open(sys.argv[1], "rb") as handle:
    bundle = pickle.load(handle)
env = load_bundle(bundle)

async def main():
    dataset = await env.create_dataset("train", None)
    example = dataset[0]
    async with MockModelServer(echo) as server:
        requests = [
            RolloutRequest(
                rollout_id=f"r{i}",
                example=example,
                model="mock-model",
                base_url=server.session_url(f"r{i}"),
                model_auth=StaticBearerAuth("secret-token"),
            )
            for i in range(3)
        ]
        outcomes = await env.run_group(requests)
        sessions = sorted(request.session for request in server.requests)
    await env.aclose()
    return outcomes, sessions

outcomes, sessions = asyncio.run(main())
print(json.dumps({
    "type": type(env).__name__,
    "helper_value": env.helper_value(),
    "sessions": sessions,
    "outcomes": {
        rid: [dict(o.rewards), o.termination_reason] for rid, o in outcomes.items()
    },
}))
"""


def test_src_layout_bundle_runs_a_group_in_a_fresh_interpreter(
    chat_project: Project, tmp_path: Path, run_fresh
) -> None:
    bundle = dump_bundle(chat_project.module("chat_pkg.env").ChatEnv)
    bundle_path = tmp_path / "chat.pickle"
    bundle_path.write_bytes(pickle.dumps(bundle))

    result = run_fresh(RUN_GROUP, str(bundle_path)).result

    assert result["type"] == "ChatEnv"
    assert result["helper_value"] == 0.75
    assert result["sessions"] == ["r0", "r1", "r2"]
    assert result["outcomes"] == {f"r{i}": [{"score": 0.75}, "finished"] for i in range(3)}


LOAD_FILES = """
import importlib.util, json, sys
from benchmax.bundle import load_bundle, read_bundle

loaded = {}
for path in sys.argv[1:]:
    env = load_bundle(read_bundle(path))
    loaded[path] = {"type": type(env).__name__, "value": getattr(env, "helper_value", None)}
    if loaded[path]["value"] is not None:
        loaded[path]["value"] = env.helper_value()
findable = [
    name
    for name in ("strict_env", "sibling_env", "sibling_helpers")
    if importlib.util.find_spec(name) is not None
]
print(json.dumps({"loaded": loaded, "findable": findable}))
"""


def test_single_file_and_sibling_bundles_load_in_a_fresh_interpreter(
    single_file_project: Project,
    sibling_projects: tuple[Project, Project],
    tmp_path: Path,
    run_fresh,
) -> None:
    env_project, helpers = sibling_projects
    single = dump_bundle(single_file_project.module("strict_env").EditableEnv)
    sibling = dump_bundle(
        env_project.module("sibling_env.env").SiblingEnv,
        local_modules=[helpers.module("sibling_helpers.helper")],
    )
    single_path, sibling_path = tmp_path / "single.bmx", tmp_path / "sibling.bmx"
    save_bundle(single, single_path)
    save_bundle(sibling, sibling_path)

    result = run_fresh(LOAD_FILES, str(single_path), str(sibling_path)).result

    assert result["findable"] == []
    assert result["loaded"][str(single_path)] == {"type": "EditableEnv", "value": None}
    assert result["loaded"][str(sibling_path)] == {"type": "SiblingEnv", "value": 0.5}


LOAD_REBUILT = """
import json, sys
from pathlib import Path
from benchmax.bundle import Bundle, BundleMetadata, load_bundle

pickled = Path(sys.argv[1]).read_bytes()
metadata = BundleMetadata.from_json_bytes(Path(sys.argv[2]).read_bytes())
env = load_bundle(Bundle(pickled=pickled, metadata=metadata))
print(json.dumps({"type": type(env).__qualname__, "module": type(env).__module__,
                  "reward_keys": list(env.reward_keys)}))
"""


def test_benchmax_class_with_installed_objects_loads_from_raw_parts(
    tmp_path: Path, run_fresh
) -> None:
    pytest.importorskip("harbor")
    from harbor.models.job.config import DatasetConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig

    from benchmax.envs.harbor import HarborEnv, HarborTrialTemplate

    constructor_args = {
        "dataset": DatasetConfig(path=Path("tasks")),
        "trial": HarborTrialTemplate(
            agent=AgentConfig(name="oracle"),
            environment=EnvironmentConfig(type="docker"),
            verifier=VerifierConfig(),
        ),
        "reward_keys": ("reward",),
    }
    bundle = dump_bundle(
        HarborEnv, constructor_args=constructor_args, pip_dependencies=("harbor>=0.18,<0.19",)
    )
    assert bundle.metadata.pip_dependencies == ("harbor<0.19,>=0.18",)
    (tmp_path / "env.pkl").write_bytes(bundle.pickled)
    (tmp_path / "metadata.json").write_bytes(bundle.metadata.to_json_bytes())

    result = run_fresh(
        LOAD_REBUILT, str(tmp_path / "env.pkl"), str(tmp_path / "metadata.json")
    ).result

    assert result == {
        "type": "HarborEnv",
        "module": "benchmax.envs.harbor.env",
        "reward_keys": ["reward"],
    }
