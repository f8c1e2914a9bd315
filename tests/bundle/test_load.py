"""``load_bundle`` payload checks and ``instantiate``."""

from __future__ import annotations

import logging
import sys

import cloudpickle
import pytest

import benchmax.bundle
from benchmax.bundle import Bundle, BundleMetadata, BundlingError, load_bundle
from benchmax.envs.dataset import Dataset
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import Example, RolloutAttempt


class LoadableEnv(Environment):
    reward_keys = ("score",)

    def __init__(self, *, label: str = "default") -> None:
        if label == "explode":
            raise RuntimeError("constructor failed")
        self.label = label

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        return Dataset([Example(id="e", payload=None)])

    async def run_rollout(self, request):
        return RolloutAttempt(rollout_id=request.rollout_id, termination_reason="finished")


def bundle_of(payload: object = None, *, raw: bytes | None = None) -> Bundle:
    metadata = BundleMetadata(
        (),
        f"{sys.version_info.major}.{sys.version_info.minor}",
        benchmax.bundle._benchmax_version(),
        None,
    )
    return Bundle(cloudpickle.dumps(payload) if raw is None else raw, metadata)


def test_instantiates_with_constructor_args(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="benchmax.bundle"):
        env = load_bundle(bundle_of((LoadableEnv, {"label": "x"})))
    assert isinstance(env, LoadableEnv) and env.label == "x"
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("benchmax.bundle", logging.INFO, "[bundle] instantiating LoadableEnv")
    ]


def test_instantiate_false_returns_class_and_kwargs() -> None:
    assert load_bundle(bundle_of((LoadableEnv, {"label": "x"})), instantiate=False) == (
        LoadableEnv,
        {"label": "x"},
    )


def test_constructor_errors_propagate_unchanged() -> None:
    with pytest.raises(RuntimeError, match="constructor failed"):
        load_bundle(bundle_of((LoadableEnv, {"label": "explode"})))


def test_unpicklable_bytes() -> None:
    with pytest.raises(BundlingError, match=r"^Failed to unpickle bundle: ") as caught:
        load_bundle(bundle_of(raw=b"not a pickle"))
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            [LoadableEnv, {}],
            "Unpickled payload is list, expected (env_class, constructor_args) tuple.",
        ),
        (
            (LoadableEnv,),
            "Unpickled payload is tuple, expected (env_class, constructor_args) tuple.",
        ),
        ((int, {}), "Unpickled class is type, not an Environment implementation."),
        ((LoadableEnv(), {}), "Unpickled class is LoadableEnv, not an Environment implementation."),
        ((LoadableEnv, [("label", "x")]), "Unpickled constructor_args is list, expected dict."),
    ],
)
def test_payload_shape_errors(payload: object, message: str) -> None:
    with pytest.raises(BundlingError) as caught:
        load_bundle(bundle_of(payload))
    assert str(caught.value) == message
