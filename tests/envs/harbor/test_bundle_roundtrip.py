"""A HarborEnv with a bundled custom agent survives bundling into a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from harbor.models.environment_type import EnvironmentType
from harbor.models.job.config import DatasetConfig
from harbor.models.trial.config import AgentConfig, EnvironmentConfig, VerifierConfig
from tests.envs.harbor.conftest import agent_files

from benchmax.bundle import dump_bundle
from benchmax.envs.harbor import (
    BundledAgentSource,
    BundledHarborAgent,
    HarborEnv,
    HarborTrialTemplate,
)

LOADER = textwrap.dedent(
    """
    import json
    import sys
    from pathlib import Path

    from harbor.agents.factory import AgentFactory

    from benchmax.bundle import Bundle, BundleMetadata, load_bundle

    workdir = Path(sys.argv[1])
    bundle = Bundle(
        pickled=(workdir / "env.pickle").read_bytes(),
        metadata=BundleMetadata.from_json_bytes((workdir / "metadata.json").read_bytes()),
    )
    path_before = list(sys.path)
    env = load_bundle(bundle)
    bundled = env._trial.agent
    prepared = bundled._harbor_config()
    agent = AgentFactory.create_agent_from_config(prepared, logs_dir=workdir / "agent-logs")
    print(json.dumps({
        "env": type(env).__name__,
        "agent_type": type(bundled).__name__,
        "original_import_path": bundled.config.import_path,
        "prepared_import_path": prepared.import_path,
        "module": type(agent).__module__,
        "greeting": agent.greeting,
        "resource": agent.resource,
        "module_file": sys.modules[type(agent).__module__].__file__,
        "sys_path_unchanged": sys.path == path_before,
        "reward_keys": list(env.reward_keys),
    }))
    """
)


def test_bundled_agent_loads_in_an_isolated_interpreter(tmp_path: Path) -> None:
    author = tmp_path / "author-checkout"
    for relative, content in agent_files("bundle").items():
        (author / relative).parent.mkdir(parents=True, exist_ok=True)
        (author / relative).write_bytes(content)
    source = BundledAgentSource.from_directory(
        author, files=["agent.py", "helper.py", "resource.txt"]
    )
    agent = BundledHarborAgent(
        AgentConfig(import_path="agent:CleanAgent", kwargs={"suffix": "?"}), source
    )
    trial = HarborTrialTemplate(
        agent=agent,
        environment=EnvironmentConfig(type=EnvironmentType.DOCKER),
        verifier=VerifierConfig(),
    )
    bundle = dump_bundle(
        HarborEnv,
        constructor_args={
            "dataset": DatasetConfig(path=tmp_path / "dataset"),
            "trial": trial,
            "reward_keys": ("reward",),
        },
        pip_dependencies=("harbor>=0.18,<0.19",),
    )
    assert (author / "agent.py").read_bytes() in bundle.pickled
    assert b"resource-bundle" in bundle.pickled

    shutil.rmtree(author)
    workdir = tmp_path / "remote"
    workdir.mkdir()
    (workdir / "env.pickle").write_bytes(bundle.pickled)
    (workdir / "metadata.json").write_bytes(bundle.metadata.to_json_bytes())
    completed = subprocess.run(
        [sys.executable, "-I", "-c", LOADER, str(workdir)],
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=120,
        env={key: value for key, value in os.environ.items() if not key.startswith("PYTHON")},
    )
    assert completed.returncode == 0, completed.stderr
    loaded = json.loads(completed.stdout.strip().splitlines()[-1])
    hex_id = source.content_id.removeprefix("sha256:")
    assert loaded["env"] == "HarborEnv"
    assert loaded["agent_type"] == "BundledHarborAgent"
    assert loaded["original_import_path"] == "agent:CleanAgent"
    assert loaded["prepared_import_path"] == f"_benchmax_harbor_agent_{hex_id}.agent:CleanAgent"
    assert loaded["module"] == f"_benchmax_harbor_agent_{hex_id}.agent"
    assert loaded["greeting"] == "hello-bundle?"  # relative import of a bundled sibling
    assert loaded["resource"] == "resource-bundle"  # adjacent resource file
    assert "benchmax-harbor-agents-" in loaded["module_file"]
    private_root = Path(loaded["module_file"]).parents[1]
    assert private_root.name.startswith("benchmax-harbor-agents-")
    assert not private_root.exists()  # the read-only tree was removed at interpreter exit
    assert str(author) not in loaded["module_file"]
    assert loaded["sys_path_unchanged"] is True
    assert loaded["reward_keys"] == ["reward"]
