"""``load_bundle``: check compatibility, then unpickle and instantiate."""

from __future__ import annotations

import logging
from typing import Any, Literal, overload

import cloudpickle

from benchmax.bundle._artifact import Bundle
from benchmax.bundle._compatibility import validate_bundle_compatibility
from benchmax.bundle._errors import BundlingError
from benchmax.envs.environment import Environment
from benchmax.envs.shared_types import RolloutAttempt

__all__ = ["load_bundle"]

logger = logging.getLogger("benchmax.bundle")


@overload
def load_bundle(
    bundle: Bundle, *, instantiate: Literal[True] = ...
) -> Environment[Any, RolloutAttempt]: ...


@overload
def load_bundle(
    bundle: Bundle, *, instantiate: Literal[False]
) -> tuple[type[Environment[Any, RolloutAttempt]], dict[str, object]]: ...


@overload
def load_bundle(
    bundle: Bundle, *, instantiate: bool = ...
) -> (
    Environment[Any, RolloutAttempt]
    | tuple[type[Environment[Any, RolloutAttempt]], dict[str, object]]
): ...


def load_bundle(
    bundle: Bundle,
    *,
    instantiate: bool = True,
) -> (
    Environment[Any, RolloutAttempt]
    | tuple[type[Environment[Any, RolloutAttempt]], dict[str, object]]
):
    """Check compatibility, unpickle, and instantiate the env (or return class and kwargs).

    Unpickling executes the bundle's code: load only bundles you trust.
    """
    validate_bundle_compatibility(bundle.metadata)
    try:
        payload = cloudpickle.loads(bundle.pickled)
    except Exception as exc:
        raise BundlingError(f"Failed to unpickle bundle: {exc}") from exc
    if not isinstance(payload, tuple) or len(payload) != 2:
        raise BundlingError(
            f"Unpickled payload is {type(payload).__name__}, "
            "expected (env_class, constructor_args) tuple."
        )
    env_class, constructor_args = payload
    if not isinstance(env_class, type) or not issubclass(env_class, Environment):
        raise BundlingError(
            f"Unpickled class is {type(env_class).__name__}, not an Environment implementation."
        )
    if not isinstance(constructor_args, dict):
        raise BundlingError(
            f"Unpickled constructor_args is {type(constructor_args).__name__}, expected dict."
        )
    if not instantiate:
        return env_class, constructor_args
    logger.info("[bundle] instantiating %s", env_class.__name__)
    return env_class(**constructor_args)
