"""Environment runtime: contract types, datasets, identity and the group executor.

Most environments subclass ``BaseEnv`` (an OpenAI-compatible chat/tool loop);
custom loops subclass ``Environment`` directly. The optional Harbor adapter
lives in ``benchmax.envs.harbor`` and is not imported here.
"""

from benchmax.auth import InjectedAuth, ModelAuth, StaticBearerAuth, bind_model_auth
from benchmax.envs.base import (
    BaseEnv,
    BaseRollout,
    JsonlDataset,
    JsonRow,
    Message,
    Messages,
    Tool,
)
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.identity import canonical_example_id
from benchmax.envs.shared_types import (
    DatasetSplit,
    Example,
    RewardMap,
    RolloutAttempt,
    RolloutFailure,
    RolloutOutcome,
    RolloutRequest,
)

__all__ = [
    "BaseEnv",
    "BaseRollout",
    "Dataset",
    "DatasetSplit",
    "Example",
    "Environment",
    "JsonRow",
    "JsonlDataset",
    "InjectedAuth",
    "Message",
    "Messages",
    "ModelAuth",
    "RewardMap",
    "RolloutAttempt",
    "RolloutFailure",
    "RolloutOutcome",
    "RolloutRequest",
    "Tool",
    "StaticBearerAuth",
    "bind_model_auth",
    "canonical_example_id",
]
