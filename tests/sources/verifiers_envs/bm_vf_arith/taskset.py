from __future__ import annotations

import random
import re

import verifiers.v1 as vf

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def boxed_answer(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text``."""
    found = _BOXED.findall(text)
    return found[-1].strip() if found else None


class CalcToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"

    @vf.tool
    def add(self, a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)


class ArithData(vf.TaskData):
    answer: int


class ArithTaskConfig(vf.TaskConfig):
    tools: bool = False


class ArithTask(vf.Task[ArithData, vf.State, ArithTaskConfig]):
    @classmethod
    def toolsets(cls, config: ArithTaskConfig) -> list[vf.Toolset]:
        return [CalcToolset(vf.ToolsetConfig())] if config.tools else []

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        return float(boxed_answer(trace.last_reply) == str(self.data.answer))

    @vf.reward(weight=0.25)
    async def formatted(self, trace: vf.Trace) -> float:
        return float(boxed_answer(trace.last_reply) is not None)

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class ArithConfig(vf.TasksetConfig):
    num_tasks: int = 4
    seed: int = 0
    task: ArithTaskConfig = ArithTaskConfig()


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self):
        rng = random.Random(self.config.seed)
        for _ in range(self.config.num_tasks):
            a, b = rng.randint(1, 99), rng.randint(1, 99)
            yield ArithTask(
                ArithData(
                    prompt=f"What is {a} + {b}? Put the answer in \\boxed{{}}.",
                    system_prompt="You are a careful calculator.",
                    answer=a + b,
                ),
                self.config.task,
            )
