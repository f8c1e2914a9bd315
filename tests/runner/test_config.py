"""RunConfig validation and helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmax.auth import StaticBearerAuth
from benchmax.runner import NoModelAuth, RunConfig


def config(**changes: Any) -> RunConfig:
    return RunConfig(**{"model": "m", "base_url": "http://h/v1", **changes})


def test_defaults() -> None:
    made = config()
    assert (made.split, made.group_size, made.max_concurrent_groups) == ("eval", 4, 8)
    assert made.max_examples is None and made.output is None and made.force is False
    assert made.base_dir == Path(".")
    assert isinstance(made.model_auth, NoModelAuth)


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ({"model": " "}, ValueError, "model must be a non-empty string"),
        ({"base_url": ""}, ValueError, "base_url must be a non-empty string"),
        ({"model_auth": object()}, TypeError, "model_auth must implement ModelAuth"),
        ({"auth_providers": ["judge"]}, TypeError, "auth_providers must be a mapping"),
        ({"split": "validation"}, ValueError, "split must be 'train' or 'eval'"),
        ({"group_size": 0}, ValueError, "group_size must be a positive integer"),
        ({"group_size": True}, ValueError, "group_size must be a positive integer"),
        ({"max_examples": 0}, ValueError, "max_examples must be a positive integer or None"),
        ({"max_examples": 2.0}, ValueError, "max_examples must be a positive integer or None"),
        ({"max_concurrent_groups": 0}, ValueError, "max_concurrent_groups must be a positive"),
        ({"log_level": "INFO"}, ValueError, "log_level must be a logging level number"),
    ],
)
def test_validation(changes: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        config(**changes)


def test_paths_are_normalized() -> None:
    made = config(base_dir="data", output="runs/x.jsonl")
    assert made.base_dir == Path("data") and made.output == Path("runs/x.jsonl")


def test_rollout_placeholder_in_base_url() -> None:
    made = config(base_url="http://h/sessions/{rollout_id}/v1")
    assert made.base_url_for("run.e1.a1-ab.r0") == "http://h/sessions/run.e1.a1-ab.r0/v1"
    assert config().base_url_for("r") == "http://h/v1"


def test_secrets_are_collected_and_hidden_from_repr() -> None:
    made = config(
        model_auth=StaticBearerAuth("model-key"),
        auth_providers={"judge": StaticBearerAuth("judge-key")},
    )
    assert set(made.secrets()) == {"model-key", "judge-key"}
    assert "model-key" not in repr(made) and "judge-key" not in repr(made)


async def test_no_model_auth_sends_no_headers() -> None:
    from benchmax.auth import ModelRequestContext

    headers = await NoModelAuth().headers_for_request(ModelRequestContext("u", "m", "r"))
    assert headers == {}


def test_a_password_in_the_base_url_is_masked_in_the_header_and_collected() -> None:
    made = config(base_url="https://me:pa55-word@host.example/v1")
    assert made.public_base_url == "https://me:***@host.example/v1"
    # The password, and the Basic token it is sent as (base64 of "me:pa55-word").
    assert made.secrets() == ("pa55-word", "bWU6cGE1NS13b3Jk")
    assert config(base_url="http://h/v1", recorded_base_url="@mock").public_base_url == "@mock"
    assert config().public_base_url == "http://h/v1" and config().secrets() == ()


def test_only_the_cli_imports_the_cli_libraries() -> None:
    """click and rich are the CLI's (httpx itself may pull them in; our code never does)."""
    import re

    import benchmax

    package = Path(benchmax.__file__).parent
    pattern = re.compile(r"^\s*(from|import)\s+(click|rich)\b", re.MULTILINE)
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "cli" not in path.relative_to(package).parts and pattern.search(path.read_text())
    ]
    assert offenders == []
    assert pattern.search((package / "cli" / "_render.py").read_text())  # the check can fail
