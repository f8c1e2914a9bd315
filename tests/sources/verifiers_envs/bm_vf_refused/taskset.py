from __future__ import annotations

import verifiers.v1 as vf


class PlainTask(vf.Task[vf.TaskData, vf.State, "PlainTaskConfig"]):
    @vf.reward
    async def graded(self, trace: vf.Trace) -> float | dict[str, float]:
        if self.config.keyed:  # keyed scores: unknown to benchmax until scored
            return {"first": 1.0, "second": 0.0}
        return 1.0

    @vf.metric
    async def odd(self, trace: vf.Trace) -> float:
        """Weight 0 (a metric): NaN when ``nan_metric``, as a 0/0 average can be."""
        return float("nan") if self.config.nan_metric else 0.5


class PlainTaskConfig(vf.TaskConfig):
    keyed: bool = False
    nan_metric: bool = False


class StopTask(PlainTask):
    @vf.stop
    async def enough(self, trace: vf.Trace) -> bool:
        return trace.num_turns > 1


class RuntimeTask(PlainTask):
    @vf.reward
    async def in_box(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        return 1.0


class ContainerTask(PlainTask):
    NEEDS_CONTAINER = True


class SetupTask(PlainTask):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        return None


class Counter(vf.State):
    calls: int = 0


class StatefulToolset(vf.Toolset[vf.ToolsetConfig, Counter]):
    @vf.tool
    def bump(self) -> int:
        """Count a call."""
        self.state.calls += 1
        return self.state.calls


class StateTask(PlainTask):
    @classmethod
    def toolsets(cls, config: PlainTaskConfig) -> list[vf.Toolset]:
        return [StatefulToolset(vf.ToolsetConfig())]


VARIANTS = {
    "plain": PlainTask,
    "stop": StopTask,
    "runtime": RuntimeTask,
    "container": ContainerTask,
    "setup": SetupTask,
    "state": StateTask,
}


class EchoToolset(vf.Toolset[vf.ToolsetConfig]):
    """A taskset-level (shared) toolset; ``setups`` counts its ``setup()`` calls."""

    TOOL_PREFIX = "echo"
    setups = 0

    async def setup(self) -> None:
        type(self).setups += 1

    @vf.tool
    async def say(self, text: str) -> str:
        """Say the text back, louder."""
        if not text:
            raise ValueError("nothing to say")
        return text.upper()


class RefusedConfig(vf.TasksetConfig):
    variant: str = "plain"
    prompt: bool = True
    shared_tools: bool = False
    task: PlainTaskConfig = PlainTaskConfig()


class RefusedTaskset(vf.Taskset[PlainTask, RefusedConfig]):
    @classmethod
    def toolsets(cls, config: RefusedConfig) -> list[vf.Toolset]:
        return [EchoToolset(vf.ToolsetConfig())] if config.shared_tools else []

    def load(self):
        task_class = VARIANTS[self.config.variant]
        prompt = "Say anything." if self.config.prompt else None
        for _ in range(2):
            yield task_class(vf.TaskData(prompt=prompt), self.config.task)
