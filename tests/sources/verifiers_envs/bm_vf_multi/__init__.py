"""A verifiers 0.4 taskset (id ``bm-vf-multi``) that brings its own multi-agent Env."""

import verifiers.v1 as vf
from bm_vf_refused.taskset import PlainTask, RefusedConfig


class MultiTaskset(vf.Taskset[PlainTask, RefusedConfig]):
    def load(self):
        yield PlainTask(vf.TaskData(prompt="Hello"), self.config.task)


class PairConfig(vf.EnvConfig):
    left: vf.AgentConfig = vf.AgentConfig()
    right: vf.AgentConfig = vf.AgentConfig()


class PairEnv(vf.Env[PairConfig]):
    async def run(self, task, agents):
        await agents.left.run(task)


__all__ = ["MultiTaskset", "PairEnv"]
