"""The optional Harbor adapter: one Harbor trial per rollout.

Importing this package never imports Harbor; ``HarborEnv`` and
``HarborDataset.create`` check for it when used. See ``README.md`` here.
"""

from benchmax.envs.harbor.bundled_agent import BundledAgentSource, BundledHarborAgent
from benchmax.envs.harbor.credentials import (
    CustomSandboxCredentials,
    DaytonaCredentials,
    ModalCredentials,
    SandboxCredentials,
)
from benchmax.envs.harbor.dataset import HarborDataset
from benchmax.envs.harbor.env import HarborEnv
from benchmax.envs.harbor.types import HarborTrialTemplate

__all__ = [
    "BundledAgentSource",
    "BundledHarborAgent",
    "CustomSandboxCredentials",
    "DaytonaCredentials",
    "HarborDataset",
    "HarborEnv",
    "HarborTrialTemplate",
    "ModalCredentials",
    "SandboxCredentials",
]
