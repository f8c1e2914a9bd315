"""Bundled custom agents: source capture, identity, materialization and import."""

from __future__ import annotations

import json
import os
import pickle
import stat
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from harbor.agents.factory import AgentFactory
from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from harbor.trial.trial import Trial
from tests.envs.harbor.conftest import AGENT_SOURCE, agent_files, make_request

from benchmax.envs.harbor import BundledAgentSource, BundledHarborAgent, HarborEnv


def bundled(revision: str = "v1", **config: Any) -> BundledHarborAgent:
    fields = {"import_path": "agent:CleanAgent", "kwargs": {"suffix": "!"}} | config
    return BundledHarborAgent(
        AgentConfig(**fields), BundledAgentSource.from_files(agent_files(revision))
    )


# --- BundledAgentSource -----------------------------------------------------------------


def test_identity_is_order_independent_and_files_are_sorted() -> None:
    first = BundledAgentSource.from_files({"nested/helper.py": b"helper", "agent.py": b"agent"})
    second = BundledAgentSource.from_files({"agent.py": b"agent", "nested/helper.py": b"helper"})
    assert first == second
    assert first.files == (("agent.py", b"agent"), ("nested/helper.py", b"helper"))
    assert first.content_id == (
        "sha256:0733596c15cd2787ed49023f6c6ca9589742d0c7cbdf3f8daf6c218ea8b19946"
    )
    assert BundledAgentSource.from_files({"a.py": b"x"}).content_id == (
        "sha256:11db633a31bd64605a0907361ad8fd39ec689709e8ab4592b62880671d55c9dd"
    )
    assert repr(first) == f"BundledAgentSource(content_id={first.content_id!r}, files=2)"
    assert "helper" not in repr(first)


def test_identity_is_sensitive_to_paths_and_content() -> None:
    base = BundledAgentSource.from_files({"a.py": b"x"}).content_id
    assert BundledAgentSource.from_files({"a.py": b"y"}).content_id != base
    assert BundledAgentSource.from_files({"b.py": b"x"}).content_id != base
    assert BundledAgentSource.from_files({"a.py": b"x", "b.py": b""}).content_id != base
    # Length prefixes keep path/content boundaries unambiguous.
    assert (
        BundledAgentSource.from_files({"ab": b"c"}).content_id
        != BundledAgentSource.from_files({"a": b"bc"}).content_id
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "invalid bundled agent source path: ''"),
        ("a\\b.py", "invalid bundled agent source path: 'a\\\\b.py'"),
        ("a\0b.py", "invalid bundled agent source path: 'a\\x00b.py'"),
        ("/agent.py", "unsafe bundled agent source path: '/agent.py'"),
        ("../agent.py", "unsafe bundled agent source path: '../agent.py'"),
        ("nested/../agent.py", "unsafe bundled agent source path: 'nested/../agent.py'"),
        ("..", "unsafe bundled agent source path: '..'"),
        ("./agent.py", "bundled agent source paths must be canonical POSIX paths: './agent.py'"),
        ("a/./b.py", "bundled agent source paths must be canonical POSIX paths: 'a/./b.py'"),
        ("a//b.py", "bundled agent source paths must be canonical POSIX paths: 'a//b.py'"),
        ("nested/", "bundled agent source paths must be canonical POSIX paths: 'nested/'"),
    ],
)
def test_unsafe_paths_are_rejected(path: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        BundledAgentSource.from_files({path: b"x"})
    assert str(caught.value) == message
    assert "path" in str(caught.value)


def test_duplicates_content_type_and_emptiness() -> None:
    with pytest.raises(ValueError) as caught:
        BundledAgentSource((("a.py", b"1"), (Path("a.py"), b"2")))  # type: ignore[arg-type]
    assert str(caught.value) == "duplicate bundled agent source path: 'a.py'"
    with pytest.raises(TypeError) as type_error:
        BundledAgentSource.from_files({"a.py": "text"})  # type: ignore[dict-item]
    assert str(type_error.value) == "bundled agent source content for 'a.py' must be bytes"
    with pytest.raises(ValueError) as empty:
        BundledAgentSource.from_files({})
    assert str(empty.value) == "bundled agent source must contain at least one file"


def _write_tree(root: Path) -> Path:
    for relative, content in {**agent_files(), "nested/inner.py": b"X = 1\n"}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
    (root / "__pycache__").mkdir()
    (root / "unlisted.py").write_text("not captured")
    return root


def test_from_directory_reads_only_the_listed_files(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "src")
    source = BundledAgentSource.from_directory(
        root, files=["agent.py", Path("helper.py"), "resource.txt", "nested/inner.py"]
    )
    assert [path for path, _ in source.files] == [
        "agent.py",
        "helper.py",
        "nested/inner.py",
        "resource.txt",
    ]
    assert source == BundledAgentSource.from_files({**agent_files(), "nested/inner.py": b"X = 1\n"})
    linked_root = tmp_path / "linked-root"
    linked_root.symlink_to(root)  # a symlinked root is resolved and allowed
    assert BundledAgentSource.from_directory(linked_root, files=["agent.py"]).files[0][0] == (
        "agent.py"
    )


def test_from_directory_rejects_symlinks_and_missing_files(tmp_path: Path) -> None:
    root = _write_tree(tmp_path / "src")
    (root / "link.py").symlink_to(root / "helper.py")
    (root / "linkdir").symlink_to(root / "nested")
    with pytest.raises(ValueError) as caught:
        BundledAgentSource.from_directory(root, files=["link.py"])
    assert str(caught.value) == "bundled agent source paths cannot traverse symlinks: 'link.py'"
    with pytest.raises(ValueError, match=r"symlinks: 'linkdir/inner\.py'"):
        BundledAgentSource.from_directory(root, files=["linkdir/inner.py"])
    with pytest.raises(ValueError) as missing:
        BundledAgentSource.from_directory(root, files=["absent.py"])
    assert str(missing.value) == "bundled agent source file is missing: 'absent.py'"
    with pytest.raises(ValueError, match="file is missing: 'nested'"):
        BundledAgentSource.from_directory(root, files=["nested"])
    with pytest.raises(ValueError, match="unsafe bundled agent source path"):
        BundledAgentSource.from_directory(root, files=["../src/agent.py"])
    with pytest.raises(ValueError, match="duplicate bundled agent source path"):
        BundledAgentSource.from_directory(root, files=["agent.py", "agent.py"])
    with pytest.raises(FileNotFoundError):
        BundledAgentSource.from_directory(tmp_path / "nowhere", files=["agent.py"])
    with pytest.raises(ValueError) as not_dir:
        BundledAgentSource.from_directory(root / "agent.py", files=["agent.py"])
    assert str(not_dir.value) == (
        f"bundled agent source root is not a directory: {(root / 'agent.py').resolve()}"
    )


# --- BundledHarborAgent -----------------------------------------------------------------

SOURCE = BundledAgentSource.from_files(agent_files())


@pytest.mark.parametrize(
    ("config", "error", "message"),
    [
        ({"import_path": "agent:CleanAgent"}, TypeError, "must be Harbor AgentConfig, got dict"),
        (AgentConfig(name="nop"), ValueError, "require an explicit import_path and no name"),
        (
            AgentConfig(name="x", import_path="agent:CleanAgent"),
            ValueError,
            "bundled Harbor agents require an explicit import_path and no name",
        ),
        (
            AgentConfig(import_path="agent.CleanAgent"),
            ValueError,
            "agent import_path must have the form 'module.path:ClassName'",
        ),
        (
            AgentConfig(import_path="a:b:C"),
            ValueError,
            "agent import_path must have the form 'module.path:ClassName'",
        ),
        (
            AgentConfig(import_path=":CleanAgent"),
            ValueError,
            "agent import_path contains an invalid module name",
        ),
        (
            AgentConfig(import_path="agent..x:CleanAgent"),
            ValueError,
            "agent import_path contains an invalid module name",
        ),
        (
            AgentConfig(import_path="agent:Clean-Agent"),
            ValueError,
            "agent import_path contains an invalid class name",
        ),
        (
            AgentConfig(import_path="other:CleanAgent"),
            ValueError,
            "bundled agent entry module 'other' is absent from its source",
        ),
    ],
)
def test_agent_validation(config: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        BundledHarborAgent(config, SOURCE)
    assert message in str(caught.value)


def test_entry_module_may_be_a_package() -> None:
    source = BundledAgentSource.from_files({"pkg/mod/__init__.py": b"", "pkg/__init__.py": b""})
    agent = BundledHarborAgent(AgentConfig(import_path="pkg.mod:Agent"), source)
    assert (
        repr(agent)
        == f"BundledHarborAgent(import_path='pkg.mod:Agent', source={source.content_id!r})"
    )


def test_construction_copies_the_config_and_pickles_without_io() -> None:
    config = AgentConfig(import_path="agent:CleanAgent", env={"TOKEN": "agent-env-secret"})
    agent = BundledHarborAgent(config, BundledAgentSource.from_files(agent_files("pickle")))
    assert agent.config == config and agent.config is not config
    assert "agent-env-secret" not in repr(agent)
    namespace = "_benchmax_harbor_agent_" + agent.source.content_id.removeprefix("sha256:")
    for dumps, loads in ((pickle.dumps, pickle.loads), (cloudpickle.dumps, pickle.loads)):
        payload = dumps(agent)
        assert AGENT_SOURCE in payload
        restored = loads(payload)
        assert restored == agent
    assert namespace not in sys.modules  # neither construction nor unpickling materialized


def test_harbor_config_names_the_materialized_module() -> None:
    agent = bundled(env={"AGENT_FLAG": "on"})
    prepared = agent._harbor_config()
    hex_id = agent.source.content_id.removeprefix("sha256:")
    assert prepared.import_path == f"_benchmax_harbor_agent_{hex_id}.agent:CleanAgent"
    assert prepared.import_path.endswith(".agent:CleanAgent")
    assert prepared.name is None
    assert prepared.kwargs == {"suffix": "!"}
    assert prepared.env == {"AGENT_FLAG": "on"}
    dumped = prepared.model_dump_json()
    assert hex_id in dumped and "GREETING" not in dumped and "resource-v1" not in dumped
    json.loads(dumped)
    assert agent.config.import_path == "agent:CleanAgent"
    package = sys.modules[f"_benchmax_harbor_agent_{hex_id}"]
    assert package.__path__ == [str(Path(sys.modules[f"{package.__name__}.agent"].__file__).parent)]
    assert agent._harbor_config() is not prepared
    assert sys.modules[package.__name__] is package  # registered once, then reused


def test_materialized_tree_is_private_and_read_only() -> None:
    agent = bundled()
    agent._harbor_config()
    module = sys.modules[agent._harbor_config().import_path.split(":")[0]]
    tree = Path(module.__file__).parent
    assert tree.parent.name.startswith("benchmax-harbor-agents-")
    assert tree.name == agent.source.content_id.removeprefix("sha256:")
    assert stat.S_IMODE(tree.stat().st_mode) == 0o555
    assert stat.S_IMODE((tree / "resource.txt").stat().st_mode) == 0o444
    assert not list(tree.parent.glob(".*.staging"))


def test_bad_class_names_fail_when_preparing() -> None:
    missing = bundled(import_path="agent:Missing")
    with pytest.raises(ValueError) as caught:
        missing._harbor_config()
    assert str(caught.value) == "bundled agent module 'agent' has no class 'Missing'"
    for name in ("NotAnAgent", "PlainClass"):
        with pytest.raises(TypeError) as type_error:
            bundled(import_path=f"agent:{name}")._harbor_config()
        assert str(type_error.value) == (
            f"bundled agent 'agent:{name}' must resolve to a Harbor BaseAgent subclass"
        )


def test_concurrent_creation_yields_one_module_and_class(tmp_path: Path) -> None:
    agent = bundled("threads")
    hex_id = agent.source.content_id.removeprefix("sha256:")
    barrier = threading.Barrier(8)
    path_before = list(sys.path)

    def create(index: int) -> Any:
        barrier.wait()
        return AgentFactory.create_agent_from_config(
            agent._harbor_config(), logs_dir=tmp_path / f"logs-{index}"
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        agents = list(pool.map(create, range(8)))
    assert {type(created) for created in agents} == {type(agents[0])}
    assert type(agents[0]).__module__ == f"_benchmax_harbor_agent_{hex_id}.agent"
    assert {created.greeting for created in agents} == {"hello-threads!"}
    assert {created.resource for created in agents} == {"resource-threads"}
    assert sys.path == path_before


def test_two_revisions_coexist_without_touching_sys_path(tmp_path: Path) -> None:
    path_before = list(sys.path)
    first = AgentFactory.create_agent_from_config(
        bundled("rev-a")._harbor_config(), logs_dir=tmp_path
    )
    second = AgentFactory.create_agent_from_config(
        bundled("rev-b")._harbor_config(), logs_dir=tmp_path
    )
    assert type(first).__module__ != type(second).__module__
    assert type(first) is not type(second)
    assert (first.greeting, second.greeting) == ("hello-rev-a!", "hello-rev-b!")
    assert (first.resource, second.resource) == ("resource-rev-a", "resource-rev-b")
    assert sys.path == path_before
    assert not any("benchmax-harbor-agents-" in entry for entry in sys.path)


@pytest.mark.filterwarnings("ignore:Task.checksum:DeprecationWarning")
async def test_harbor_trial_create_instantiates_the_bundled_agent(
    task_payload: TaskConfig, fake_sandbox: Any, tmp_path: Path
) -> None:
    agent = bundled("trial")
    config = TrialConfig(
        task=task_payload,
        trial_name="bundled-trial",
        trials_dir=tmp_path / "trials",
        agent=agent._harbor_config(),
        environment=fake_sandbox,
    )
    trial = await Trial.create(config)
    assert type(trial.agent).__name__ == "CleanAgent"
    assert type(trial.agent).__module__.startswith("_benchmax_harbor_agent_")
    assert trial.agent.session_id == "bundled-trial__agent"
    assert trial.agent.greeting == "hello-trial!"


@pytest.mark.filterwarnings("ignore:Task.checksum:DeprecationWarning")
async def test_harbor_env_runs_a_bundled_agent(
    make_env: Callable[..., HarborEnv],
    make_template: Callable[..., Any],
    task_payload: TaskConfig,
) -> None:
    env = make_env(trial=make_template(agent=bundled("env")))
    outcomes = await env.run_group([make_request("bundled-rollout", task_payload)])
    assert outcomes["bundled-rollout"].termination_reason == "finished"
    written = env._trial.trials_dir / "bundled-rollout" / "agent" / "bundled.txt"
    assert written.read_text() == "hello-env!|resource-env"
    assert os.access(written, os.R_OK)
