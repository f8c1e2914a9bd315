"""``RayExecutor``: run a run's groups on a Ray cluster (the ``benchmax[ray]`` extra).

The calling process (the driver) keeps everything a local run keeps: the results file and
its lock, the header check, resume, progress and the report. Workers are Ray actors: each
checks the bundle's compatibility, loads it once, constructs the environment with the
run's constructor arguments and runs many groups at once on its own event loop with the
same ``GroupCollector`` the local runner uses, so the lines it sends back are the lines a
local run writes. Ray is imported only when a run starts.

The workers' side is ``_ray_worker``; the driver's pool of workers is ``_ray_pool`` (it
logs on this module's logger).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from benchmax._value_checks import is_int_at_least, is_non_empty_str
from benchmax.bundle import Bundle, BundlingError, dump_bundle
from benchmax.envs.environment import Environment
from benchmax.runner._config import RunConfig
from benchmax.runner._errors import ExecutorError
from benchmax.runner._ray_blocked import check_after
from benchmax.runner._ray_pool import WorkerPool
from benchmax.runner._ray_reaper import reaping_local_ray
from benchmax.runner._run import GroupDispatch

__all__ = ["RAY_MISSING", "RayExecutor"]

RAY_MISSING = "Ray is not installed; install it with: pip install 'benchmax[ray]'"

_UV_HOOK_SWITCH = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def import_ray(*, local: bool) -> ModuleType:
    """The ``ray`` module; ``ExecutorError(RAY_MISSING)`` when it is not installed.

    ``local``: a local instance will be started. Ray's ``uv run`` hook (which would copy
    the working directory and build a fresh virtual environment per worker) is then
    switched off unless the user set it: local workers share this interpreter.
    """
    if local:
        os.environ.setdefault(_UV_HOOK_SWITCH, "0")
    try:
        import ray
    except ImportError:
        raise ExecutorError(RAY_MISSING) from None
    return ray


@dataclass(frozen=True, slots=True, kw_only=True)
class RayExecutor:
    """Runs a run's groups on Ray actors; pass it as ``run_environment(..., executor=...)``.

    - ``address``: the cluster (``auto``, ``ray://host:10001``, ``host:6379``); ``None`` uses
      ``RAY_ADDRESS`` when set, else starts a local Ray instance for the run and stops it
      afterwards. A process already connected (``ray.init`` called) keeps its connection.
    - ``workers``: actors to start (default: the cluster's CPU count); ``worker_concurrency``:
      groups in flight per worker. At most ``workers * worker_concurrency`` groups are in
      flight; ``RunConfig.max_concurrent_groups`` does not apply.
    - ``bundle``: what every worker loads (default: ``dump_bundle(type(env))``, which
      captures the environment's project modules by value); ``constructor_args``: the run's
      arguments, merged over the bundle's own; ``env_attributes``: set on each worker's
      environment after construction (e.g. ``{"model_timeout": 30.0}``; a BaseEnv limit
      is checked as BaseEnv checks it, and an invalid one stops the worker from starting).
    - ``worker_options``: extra ``ray.remote`` actor options (``num_cpus``, ``resources``,
      ``runtime_env``...); by default actors reserve no CPU and are spread over the nodes.
    - ``max_worker_replacements``: lost workers replaced during a run (default: ``workers``);
      ``worker_start_timeout``: seconds a worker may take to start and load the bundle
      (one that no node can host never starts).
    - ``blocked_worker_seconds``: how long a worker's event loop may stay blocked once a
      group's rollout deadline has passed before the worker is replaced (see below).

    Workers are actors named ``benchmax-<run_id>-w<n>`` (``ray.get_actor`` finds them).

    Credentials (the config's auth) travel to the workers as run-time values in the object
    store, never inside the bundle. A worker that dies loses only its in-flight groups:
    they run again on another worker under the next attempt number (new rollout ids). A
    worker that cannot load the bundle stops the run with an ``ExecutorError`` naming its
    node and the reason.

    A worker whose event loop is blocked (a synchronous sleep or CPU loop inside
    ``async def``) cannot enforce ``rollout_timeout``. When the environment has one (its
    attribute, or ``env_attributes["rollout_timeout"]``), the driver watches each group
    from ``rollout_timeout + reward_timeout`` seconds after sending it: when the worker's
    loop has then been blocked for ``blocked_worker_seconds`` by that group's code (a watch
    thread in the worker says which group and which function), the worker is killed and
    replaced, and the group is settled, not run again (it would block again): each of its
    rollouts ends as ``rollout_timeout`` with zero rewards and a log entry naming the
    function. The other groups in flight on that worker run again on the others (next
    attempt). These replacements do not count against ``max_worker_replacements``: each
    settles a group, so the run always ends.

    A local instance started for a run goes with the driver: started without the dashboard,
    and a guard process ends Ray's processes (agents included) if the driver is killed.
    """

    address: str | None = None
    workers: int | None = None
    worker_concurrency: int = 4
    bundle: Bundle | None = field(default=None, repr=False)
    constructor_args: Mapping[str, Any] = field(default_factory=dict, repr=False)
    env_attributes: Mapping[str, Any] = field(default_factory=dict)
    worker_options: Mapping[str, Any] = field(default_factory=dict)
    max_worker_replacements: int | None = None
    worker_start_timeout: float = 300.0
    blocked_worker_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.address is not None and not is_non_empty_str(self.address):
            raise ValueError("address must be a non-empty string or None")
        if self.workers is not None and not is_int_at_least(self.workers, 1):
            raise ValueError("workers must be a positive integer or None")
        if not is_int_at_least(self.worker_concurrency, 1):
            raise ValueError("worker_concurrency must be a positive integer")
        if self.bundle is not None and not isinstance(self.bundle, Bundle):
            raise TypeError("bundle must be a benchmax.bundle.Bundle or None")
        for name in ("constructor_args", "env_attributes", "worker_options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise TypeError(f"{name} must be a mapping with string keys")
        if self.max_worker_replacements is not None and not is_int_at_least(
            self.max_worker_replacements, 0
        ):
            raise ValueError("max_worker_replacements must be a non-negative integer or None")
        for name in ("worker_start_timeout", "blocked_worker_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds")

    def _address(self) -> str:
        return self.address or os.environ.get("RAY_ADDRESS") or "local"

    @property
    def starts_local(self) -> bool:
        """Whether a run starts its own local Ray instance (no address, no ``RAY_ADDRESS``)."""
        return self._address() == "local"

    @property
    def where(self) -> str:
        """Where the groups run, for people: ``a local Ray instance`` or ``cluster ADDRESS``."""
        address = self._address()
        return "a local Ray instance" if address == "local" else f"cluster {address}"

    def check_installed(self) -> None:
        """Raise ``ExecutorError`` with an install hint when Ray is not installed."""
        import_ray(local=self._address() == "local")

    @contextlib.asynccontextmanager
    async def open(
        self, env: Environment[Any, Any], config: RunConfig, run_id: str
    ) -> AsyncIterator[GroupDispatch]:
        """Connect (or start Ray), start the workers, and stop them when the block ends."""
        address = self._address()
        ray = import_ray(local=address == "local")
        bundle = self.bundle if self.bundle is not None else _bundle_of(env)
        with contextlib.ExitStack() as stack:
            if not ray.is_initialized():
                options: dict[str, Any] = {"logging_level": logging.WARNING}
                if address == "local":
                    options["include_dashboard"] = False
                    # A driver killed outright takes the instance (and Ray's agents) along.
                    stack.enter_context(reaping_local_ray())
                try:
                    ray.init(address=address, **options)
                except Exception as error:
                    raise ExecutorError(f"cannot connect to Ray at {address}: {error}") from error
                stack.callback(ray.shutdown)
            pool = WorkerPool(ray, self, bundle, config, run_id)
            pool.watch_blocked_loops(check_after(self.env_attributes, env), tuple(env.reward_keys))
            try:
                await pool.start()
                yield pool
            except BaseException:
                pool.kill()
                raise
            else:
                await pool.stop()


def _bundle_of(env: Environment[Any, Any]) -> Bundle:
    try:
        return dump_bundle(type(env))
    except BundlingError as error:
        name = type(env).__qualname__
        raise ExecutorError(f"cannot bundle {name} for the Ray workers: {error}") from error
