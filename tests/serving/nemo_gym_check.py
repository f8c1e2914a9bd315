"""Validate benchmax's NeMo-Gym replies with nemo-gym's own models (run in its own env).

    uv run --isolated --no-project --with nemo-gym==0.4.0 python nemo_gym_check.py FILE

FILE holds ``{"seed_responses", "verify_requests", "verify_responses", "aggregate",
"rows"}`` as recorded by ``test_nemo_gym.py``. Prints ``ok N`` or raises.
"""

from __future__ import annotations

import json
import sys

from nemo_gym.base_resources_server import (
    BaseRunRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.config_types import AggregateMetrics
from resources_servers.example_tool_call_multireward.app import (
    ToolCallMultiRewardVerifyResponse,
)


class MultiRewardVerifyResponse(BaseVerifyResponse):
    """nemo-gym 0.7's ``BaseMultiRewardVerifyResponse`` (``reward_components`` required),
    which 0.4 (the newest nemo-gym that installs on Python 3.12) does not define."""

    reward_components: dict[str, float]


def main(path: str) -> None:
    with open(path, encoding="utf-8") as file:
        recorded = json.load(file)
    count = 0
    for row in recorded["rows"]:
        BaseRunRequest.model_validate(row)
        count += 1
    for reply in recorded["seed_responses"]:
        BaseSeedSessionResponse.model_validate(reply)
        count += 1
    for request in recorded["verify_requests"]:
        BaseVerifyRequest.model_validate(request)
        count += 1
    for reply in recorded["verify_responses"]:
        for model in (
            BaseVerifyResponse,
            ToolCallMultiRewardVerifyResponse,
            MultiRewardVerifyResponse,
        ):
            validated = model.model_validate(reply)
            assert validated.reward == reply["reward"], (model, reply)
        multi = MultiRewardVerifyResponse.model_validate(reply)
        assert multi.reward_components == reply["reward_components"]
        count += 1
    AggregateMetrics.model_validate(recorded["aggregate"])
    print(f"ok {count + 1}")


if __name__ == "__main__":
    main(sys.argv[1])
