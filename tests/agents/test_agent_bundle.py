"""An AgentEnv whose ``command`` names a program file of its project is bundled with that
file: the bundle runs a rollout on a machine (here: a directory) without the project."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import cloudpickle

from benchmax.envs.agent._program_files import ProgramFile, program_command

ENV_MODULE = """\
from pathlib import Path

from benchmax.agents import AgentEnv
from benchmax.envs import Dataset, Example

HERE = Path(__file__).resolve().parent


class EchoAgent(AgentEnv):
    reward_keys = ("echoed",)
    max_turns = 2
    command = ("{python}", str(HERE / "agent.py"))

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="e1", payload={"say": "hello from the bundle"})])

    async def compute_reward(self, rollout):
        return {"echoed": float("hello from the bundle" in rollout.agent.stdout)}
"""

# A program using only the standard library: one chat call, its reply printed.
PROGRAM = """\
import json, os, sys, urllib.request

task = json.load(sys.stdin)
body = {"model": os.environ["OPENAI_MODEL"],
        "messages": [{"role": "user", "content": task["say"]}]}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json"},
)
with urllib.request.urlopen(request) as reply:
    print(json.load(reply)["choices"][0]["message"]["content"])
"""


def _benchmax(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )


def test_bundle_carries_the_program_and_runs_without_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "echo-agent"\nversion = "0"\n')
    (project / "echo_env.py").write_text(ENV_MODULE)
    (project / "agent.py").write_text(PROGRAM)
    bundle = tmp_path / "echo.bundle"
    made = _benchmax("bundle", "echo_env.py:EchoAgent", "-o", str(bundle), cwd=project)
    assert made.returncode == 0, made.stderr
    shutil.rmtree(project)  # the loading side has no project at all

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    results = elsewhere / "run.jsonl"
    ran = _benchmax("run", str(bundle), "-n", "1", "-k", "1", "-o", str(results), cwd=elsewhere)
    assert ran.returncode == 0, ran.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    (rollout,) = [line for line in lines if "rollout_id" in line]
    assert rollout["termination_reason"] != "harness_error", rollout
    assert rollout["rewards"] == {"echoed": 1.0}, rollout


def test_only_project_files_are_carried(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    module = tmp_path / "m.py"
    module.write_text("")
    program = tmp_path / "tool.sh"
    program.write_text("echo hi\n")
    program.chmod(0o755)
    outside = shutil.which("sh")
    assert outside is not None
    sys.modules["_bmx_program_files_probe"] = type(sys)("_bmx_program_files_probe")
    sys.modules["_bmx_program_files_probe"].__file__ = str(module)
    try:
        command = program_command(
            ["sh", str(program), outside, sys.executable, "relative.sh", str(tmp_path / "gone")],
            "_bmx_program_files_probe",
        )
    finally:
        del sys.modules["_bmx_program_files_probe"]
    assert [isinstance(part, ProgramFile) for part in command] == [
        False,
        True,
        False,
        False,
        False,
        False,
    ]
    carried = pickle.loads(cloudpickle.dumps(command[1]))
    assert isinstance(carried, ProgramFile)
    assert carried != str(program)
    assert Path(carried).read_text() == "echo hi\n"
    assert os.access(carried, os.X_OK)  # the mode travels too
    program.unlink()
    try:
        cloudpickle.dumps(command[1])
    except ValueError as error:
        assert str(program) in str(error)
    else:  # pragma: no cover - the test fails here
        raise AssertionError("a missing program file must fail pickling, naming it")
