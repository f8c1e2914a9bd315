"""Bundles carry declared tools: ``@tool`` functions and a ``Toolset`` defined in a
project-local module travel by value and run in a fresh interpreter; ``validate`` checks
the tools."""

from __future__ import annotations

import pickle
from pathlib import Path

from tests.bundle.conftest import ProjectFactory

from benchmax.bundle import dump_bundle
from benchmax.testing import tool_exerciser
from benchmax.validation import ValidationConfig, validate_environment

TOOLS_MODULE = '''
from __future__ import annotations

import dataclasses
from contextlib import asynccontextmanager
from typing import Annotated, Literal

from pydantic import BaseModel

from benchmax.tools import ToolError, Toolset, tool


@dataclasses.dataclass
class Corner:
    x: int = 0


@dataclasses.dataclass
class Box:
    width: int
    height: int = 1
    corner: Corner = dataclasses.field(default_factory=Corner)


class Label(BaseModel):
    text: str = "box"
    corner: Corner | None = None


@tool
def area(box: Box, unit: Literal["cm", "m"] = "cm", label: Label | None = None) -> str:
    """Area of a box."""
    return f"{box.width * box.height} {unit}2 at x={box.corner.x}"


@tool
async def greet(name: Annotated[str, "who to greet"]) -> str:
    """Greet someone."""
    if name == "nobody":
        raise ToolError("nobody to greet")
    return f"hello {name}"


class Tally(Toolset):
    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        self.count = 0
        yield

    @tool
    def tick(self) -> int:
        """Count one."""
        self.count += 1
        return self.count
'''

ENV_MODULE = """
from benchmax.envs.base.env import BaseEnv
from benchmax.envs.dataset import Dataset
from benchmax.envs.shared_types import Example

from tool_pkg.tools import Tally, area, greet


class ToolEnv(BaseEnv):
    reward_keys = ("tool_messages",)
    max_turns = 3
    tools = (area, greet, Tally())

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        payload = {"prompt_messages": [{"role": "user", "content": "use the tools"}]}
        return Dataset([Example(id="e", payload=payload), Example(id="f", payload=payload)])

    async def compute_reward(self, rollout):
        return {"tool_messages": float(sum(m["role"] == "tool" for m in rollout.messages))}
"""

RUN_GROUP = """
import asyncio, json, pickle, sys, importlib.util
from benchmax.auth import StaticBearerAuth
from benchmax.bundle import load_bundle
from benchmax.envs.shared_types import RolloutRequest
from benchmax.testing import MockModelServer, tool_exerciser

assert importlib.util.find_spec("tool_pkg") is None
env = load_bundle(pickle.load(open(sys.argv[1], "rb")))

async def main():
    example = (await env.create_dataset("train", None))[0]
    async with MockModelServer(tool_exerciser) as server:
        requests = [
            RolloutRequest(rollout_id=f"r{i}", example=example, model="m",
                           base_url=server.session_url(f"r{i}"),
                           model_auth=StaticBearerAuth("k"))
            for i in range(2)
        ]
        outcomes = await env.run_group(requests)
        last = server.requests_for("r0")[-1].body
    await env.aclose()
    return outcomes, last

outcomes, last = asyncio.run(main())
print(json.dumps({
    "outcomes": {k: [o.termination_reason, dict(o.rewards)] for k, o in outcomes.items()},
    "tools": [t["function"]["name"] for t in last["tools"]],
    "box": last["tools"][0]["function"]["parameters"]["$defs"]["Box"]["required"],
    "defs": sorted(last["tools"][0]["function"]["parameters"]["$defs"]),
    "results": [m["content"] for m in last["messages"] if m["role"] == "tool"],
}))
"""


def make_project(projects: ProjectFactory) -> type:
    projects.create(
        "tool-project",
        {
            "tool_pkg/__init__.py": "",
            "tool_pkg/tools.py": TOOLS_MODULE,
            "tool_pkg/env.py": ENV_MODULE,
        },
    )
    import tool_pkg.env  # type: ignore[import-not-found]

    env_class: type = tool_pkg.env.ToolEnv
    return env_class


def test_declared_tools_travel_by_value_and_run_in_a_fresh_interpreter(
    projects: ProjectFactory, tmp_path: Path, run_fresh: object
) -> None:
    bundle = dump_bundle(make_project(projects))
    path = tmp_path / "tools.pickle"
    path.write_bytes(pickle.dumps(bundle))

    result = run_fresh(RUN_GROUP, str(path)).result  # type: ignore[operator]

    assert result["outcomes"] == {
        "r0": ["finished", {"tool_messages": 3.0}],
        "r1": ["finished", {"tool_messages": 3.0}],
    }
    assert result["tools"] == ["area", "greet", "tick"]
    assert result["box"] == ["width"]
    # pydantic may name a class carried by value by its module path, even twice (its
    # core-schema refs hold ids): the definitions differ in name only
    assert {"Box", "Label"} <= set(result["defs"])
    assert result["results"] == ["1 cm2 at x=0", "hello example", "1"]


async def test_validate_checks_declared_tools(projects: ProjectFactory, tmp_path: Path) -> None:
    env_class = make_project(projects)
    data = tmp_path / "data"
    data.mkdir()
    config = ValidationConfig(base_dir=data, fresh_interpreter=False, policy=tool_exerciser)
    report = await validate_environment(env_class, config)
    assert report.check("tools").status == "passed"
    assert report.check("tools").detail == "3 tools: area, greet, tick"

    class Clashing(env_class):  # type: ignore[misc, valid-type]
        tools = (*env_class.tools, env_class.tools[0])

    report = await validate_environment(Clashing, config)
    assert report.check("tools").status == "failed"
    assert "tool name 'area' is declared twice" in report.check("tools").detail
