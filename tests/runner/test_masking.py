"""beyond.md §9 "Masking": a secret shorter than 8 characters (a placeholder key such as
``x``, ``1`` or ``EMPTY``) is never masked as a substring of what a run records, and a
warning says once that it cannot be masked."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from tests.runner.sample_envs import AnswerEnv

from benchmax.auth import StaticBearerAuth
from benchmax.runner import RunConfig, run_environment
from benchmax.runner._config import credential_secrets, mask_secrets
from benchmax.testing import MockModelServer


@pytest.mark.parametrize("key", ["x", "1", "EMPTY", "to", "sk-1234"])
async def test_a_placeholder_key_does_not_corrupt_transcripts_or_field_names(
    tmp_path: Path, key: str
) -> None:
    (tmp_path / "eval.jsonl").write_text(json.dumps({"question": "q", "answer": "a"}) + "\n")
    reply = "Let x = 1 to EMPTY the sk-1234 list"
    async with MockModelServer(lambda body: reply) as server:
        config = RunConfig(
            model="mock",
            base_url=server.base_url,
            model_auth=StaticBearerAuth(key),
            base_dir=tmp_path,
            group_size=1,
            output=tmp_path / "results.jsonl",
        )
        with pytest.warns(UserWarning, match="shorter than 8 characters"):
            await run_environment(AnswerEnv(), config)
    written = (tmp_path / "results.jsonl").read_text()
    _, rollout = [json.loads(line) for line in written.splitlines()]
    assert rollout["transcript"][-1]["content"] == reply
    assert set(rollout["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert "***" not in written


def test_short_secrets_are_masked_only_as_whole_values() -> None:
    assert mask_secrets("Let x = 1", ["x", "1"]) == "Let x = 1"
    assert mask_secrets("prompt_tokens", ["ok"]) == "prompt_tokens"
    assert mask_secrets("EMPTY", ["EMPTY"]) == "***"
    assert mask_secrets("key sk-long-secret-1 and x", ["x", "sk-long-secret-1"]) == "key *** and x"


def test_the_short_secret_warning_is_given_once_and_never_shows_the_key() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for _ in range(3):
            assert credential_secrets([StaticBearerAuth("EMPTY")], None) == ("EMPTY",)
        credential_secrets([StaticBearerAuth("a-long-enough-key")], "http://u:pw@host/v1")
    assert len(caught) == 1  # the URL password "pw" is short too, still one warning
    assert "EMPTY" not in str(caught[0].message)


def test_long_secrets_give_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        credential_secrets([StaticBearerAuth("a-long-enough-key")], "http://u:password1@h/v1")
