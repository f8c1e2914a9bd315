"""``RayExecutor``: run a run's groups on a Ray cluster (the ``benchmax[ray]`` extra).

The calling process (the driver) keeps everything a local run keeps: the results file and
its lock, the header check, resume, progress and the report. Workers are Ray actors: each
checks the bundle's compatibility, loads it once, constructs the environment with the
run's constructor arguments and runs many groups at once on its own event loop with the
same ``GroupCollector`` the local runner uses, so the lines it sends back are the lines a
local run writes. Ray is imported only when a run starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import cloudpickle

from benchmax._secret_masking import mask_standard_streams, remember
from benchmax._value_checks import is_int_at_least, is_non_empty_str
from benchmax.bundle import (
    Bundle,
    BundlingError,
    dump_bundle,
    load_bundle,
    validate_bundle_compatibility,
)
from benchmax.envs.base._limits import LIMIT_NAMES, apply_limits
from benchmax.envs.environment import Environment
from benchmax.runner._config import RunConfig, mask_secrets
from benchmax.runner._errors import ExecutorError
from benchmax.runner._ray_blocked import (
    BEAT_SECONDS,
    LoopHeartbeat,
    LoopState,
    check_after,
    group_context,
    settled_group,
)
from benchmax.runner._ray_reaper import reaping_local_ray
from benchmax.runner._records import LogEntry
from benchmax.runner._run import (
    GroupCollector,
    GroupDispatch,
    GroupJob,
    GroupResult,
    _providers,
)
from benchmax.trajectory import Trajectory

__all__ = ["RAY_MISSING", "RayExecutor"]

logger = logging.getLogger(__name__)

RAY_MISSING = "Ray is not installed; install it with: pip install 'benchmax[ray]'"

_UV_HOOK_SWITCH = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
_WATCH = "benchmax-watch"  # the concurrency group (own thread and loop) of loop_state


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
            pool = _WorkerPool(ray, self, bundle, config, run_id)
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


@dataclass(frozen=True, slots=True)
class _Ready:
    """What a worker reports after trying to load the bundle (``reason`` when it failed)."""

    node_ip: str
    node_id: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class _GroupFailed:
    """``run_group`` raised on the worker: the error, re-raised by the driver."""

    error: BaseException
    logs: list[LogEntry]


class _GroupWorker:
    """The body of a Ray worker actor: one environment, many groups at once."""

    def __init__(
        self,
        bundle: Bundle,
        config: RunConfig,
        run_id: str,
        constructor_args: dict[str, Any],
        env_attributes: dict[str, Any],
    ) -> None:
        self._bundle = bundle
        self._config = config
        self._run_id = run_id
        self._constructor_args = constructor_args
        self._env_attributes = env_attributes
        self._collector: GroupCollector | None = None
        self._stack = contextlib.ExitStack()
        self._heartbeat = LoopHeartbeat()

    async def loop_state(self) -> LoopState:
        """How the groups' loop is doing; called in its own concurrency group (thread)."""
        return self._heartbeat.state()

    async def start(self) -> _Ready:
        import ray

        self._heartbeat.start()
        # What this worker prints reaches Ray's session logs and the driver's terminal:
        # the run's credentials are masked in it, as the driver masks its own output.
        remember(*self._config.secrets())
        mask_standard_streams()

        context = ray.get_runtime_context()
        # Ray leaves this public helper unannotated; it returns the node's IP as a str.
        node_ip: str = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        node_id = context.get_node_id()
        try:
            env = self._load()
        except Exception as error:
            reason = mask_secrets(f"{type(error).__name__}: {error}", self._config.secrets())
            return _Ready(node_ip, node_id, re.sub(r"\s+", " ", reason).strip())
        self._collector = GroupCollector(env, self._config, self._run_id)
        self._stack.enter_context(self._collector.pipeline.attached())
        return _Ready(node_ip, node_id, None)

    def _load(self) -> Environment[Any, Any]:
        validate_bundle_compatibility(self._bundle.metadata)
        env_class, bundled_args = load_bundle(self._bundle, instantiate=False)
        env = env_class(**{**bundled_args, **self._constructor_args})
        attributes = dict(self._env_attributes)
        apply_limits(
            env, {name: attributes.pop(name) for name in LIMIT_NAMES if name in attributes}
        )
        for name, value in attributes.items():  # anything else the caller sets
            setattr(env, name, value)
        return env

    async def run(self, job: GroupJob) -> GroupResult | _GroupFailed:
        # In a context of its own that names the group, which every task it starts inherits:
        # loop_state finds the group whose code blocks the loop.
        context = group_context(job.example_index)
        return await asyncio.create_task(self._run(job), context=context)

    async def _run(self, job: GroupJob) -> GroupResult | _GroupFailed:
        assert self._collector is not None, "start() must succeed first"
        try:
            result = await self._collector.collect(job)
        except Exception as error:
            return _GroupFailed(_portable(error), self._collector.failed_logs(job))
        return GroupResult(group=result.group, trajectories=_as_json(result.trajectories))

    async def close(self) -> None:
        self._stack.close()
        if self._collector is not None:
            await self._collector.env.aclose()


def _as_json(trajectories: tuple[Trajectory, ...]) -> tuple[Trajectory, ...]:
    """``trajectories`` holding plain JSON values only: what the results file would hold.

    The results writer encodes with ``default=str``, so a round trip through the same
    encoding yields identical lines and nothing unpicklable crosses the wire.
    """
    return tuple(
        Trajectory.from_json(json.loads(json.dumps(t.to_json(), ensure_ascii=False, default=str)))
        for t in trajectories
    )


def _portable(error: BaseException) -> BaseException:
    """``error`` when it pickles, else a ``RuntimeError`` carrying its type and message."""
    try:
        cloudpickle.dumps(error)
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


@dataclass(slots=True)
class _Worker:
    handle: Any
    number: int
    node: str = "?"
    in_flight: int = 0
    alive: bool = True


class _WorkerPool:
    """The driver's view of the workers: picks one per group and replaces lost ones."""

    def __init__(
        self, ray: ModuleType, executor: RayExecutor, bundle: Bundle, config: RunConfig, run_id: str
    ) -> None:
        self._ray = ray
        self._executor = executor
        self._secrets = config.secrets()
        self._failed_logs: dict[int, list[LogEntry]] = {}
        self._start_timeout = executor.worker_start_timeout
        workers = executor.workers
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._size = workers
        self.capacity = workers * executor.worker_concurrency
        self._replacements_left = (
            executor.max_worker_replacements
            if executor.max_worker_replacements is not None
            else workers
        )
        worker_config = dataclasses.replace(config, auth_providers=_providers(config), output=None)
        shipped = (worker_config, dict(executor.constructor_args), dict(executor.env_attributes))
        try:
            cloudpickle.dumps(shipped)
        except Exception as error:  # an auth provider or argument that cannot be pickled
            reason = self._masked(_line(error))
            raise ExecutorError(f"cannot send the run to the Ray workers: {reason}") from None
        self._args = (ray.put(bundle), ray.put(worker_config), run_id, *shipped[1:])
        options = dict(executor.worker_options)
        # Ray takes concurrency groups only where the class is made remote.
        groups = {**options.pop("concurrency_groups", {}), _WATCH: 1}
        self._options: dict[str, Any] = {
            "max_concurrency": executor.worker_concurrency + 4,
            "max_restarts": 0,
            "scheduling_strategy": "SPREAD",
            "num_cpus": 0,
            **options,
        }
        self._run_id = run_id
        self._actor_class = ray.remote(concurrency_groups=groups)(_GroupWorker)
        self._workers: list[_Worker] = []
        self._handles: list[Any] = []  # every actor started, ready or not
        self._numbers = 0
        self._changed = asyncio.Event()
        self._starting = 0
        self._last_loss = ""
        self._split = config.split
        self._deadline: float | None = None
        self._reward_keys: tuple[str, ...] = ()
        self._blocked_limit = executor.blocked_worker_seconds

    def watch_blocked_loops(self, deadline: float | None, reward_keys: tuple[str, ...]) -> None:
        """Check a group's worker for a blocked loop ``deadline`` seconds after sending it
        (``None``: never); a group settled for it gets zeros under ``reward_keys``."""
        self._deadline = deadline
        self._reward_keys = reward_keys

    async def start(self) -> None:
        await asyncio.gather(*(self._add() for _ in range(self._size)))

    async def _add(self) -> None:
        self._numbers += 1
        name = f"benchmax-{self._run_id}-w{self._numbers}"
        handle = self._actor_class.options(**self._options, name=name).remote(*self._args)
        self._handles.append(handle)
        worker = _Worker(handle, self._numbers)
        self._starting += 1
        try:
            ready: _Ready = await asyncio.wait_for(
                _awaited(worker.handle.start.remote()), self._start_timeout
            )
        except self._ray.exceptions.RayActorError as error:
            raise ExecutorError(
                f"Ray worker {worker.number} died while starting: {self._masked(_line(error))}"
            ) from None
        except TimeoutError:
            self._ray.kill(worker.handle)
            raise ExecutorError(
                f"Ray worker {worker.number} did not start within {self._start_timeout:g} s "
                "(can any node provide the resources it asks for?)"
            ) from None
        finally:
            self._starting -= 1
            self._changed.set()
        worker.node = f"{ready.node_ip} (node {ready.node_id[:12]})"
        if ready.reason is not None:
            self._ray.kill(worker.handle)
            raise ExecutorError(
                f"Ray worker on node {worker.node} cannot load the environment bundle: "
                f"{ready.reason}"
            )
        self._workers.append(worker)

    async def _pick(self) -> _Worker:
        while True:
            alive = [w for w in self._workers if w.alive]
            if alive:
                return min(alive, key=lambda w: w.in_flight)
            if not self._starting:
                raise ExecutorError(f"every Ray worker was lost; the last: {self._last_loss}")
            self._changed.clear()
            await self._changed.wait()

    async def run(self, job: GroupJob) -> GroupResult:
        exceptions = self._ray.exceptions
        while True:
            worker = await self._pick()
            worker.in_flight += 1
            began = time.monotonic()
            try:
                reply = await self._reply(worker, job)
            except exceptions.RayActorError as error:
                await self._lost(worker, error, job)
                job = job.retried()
                continue
            except exceptions.ObjectLostError as error:
                logger.warning(
                    "the result of example %d was lost (%s); running it again",
                    job.example_index,
                    _line(error),
                )
                job = job.retried()
                continue
            except exceptions.RayTaskError as error:
                raise ExecutorError(
                    f"Ray worker on node {worker.node} failed: {self._masked(_line(error))}"
                ) from None
            finally:
                worker.in_flight -= 1
            if isinstance(reply, LoopState):
                assert self._deadline is not None
                return settled_group(
                    job,
                    reply,
                    deadline=self._deadline,
                    seconds=time.monotonic() - began,
                    reward_keys=self._reward_keys,
                    split=self._split,
                    secrets=self._secrets,
                )
            if isinstance(reply, _GroupFailed):
                self._failed_logs[job.example_index] = reply.logs
                raise reply.error
            return reply

    async def _reply(
        self, worker: _Worker, job: GroupJob
    ) -> GroupResult | _GroupFailed | LoopState:
        """The worker's reply for ``job``; past the deadline, the state of the loop that
        ``job``'s code blocked (the worker then replaced) instead."""
        ref = worker.handle.run.remote(job)
        if self._deadline is None:
            reply: GroupResult | _GroupFailed = await ref
            return reply
        waiting = asyncio.ensure_future(_awaited(ref))
        waiting.add_done_callback(_retrieved)
        try:
            timeout = self._deadline
            while not (await asyncio.wait({waiting}, timeout=timeout))[0]:
                blocked = await self._blocked(worker, job)
                if blocked is not None:
                    return blocked
                timeout = BEAT_SECONDS * 4
            result: GroupResult | _GroupFailed = waiting.result()
            return result
        finally:
            waiting.cancel()

    async def _blocked(self, worker: _Worker, job: GroupJob) -> LoopState | None:
        """The loop state when ``job``'s code has blocked ``worker``'s loop for
        ``blocked_worker_seconds``; the worker is then killed and replaced."""
        if not worker.alive:
            return None  # retired for another group: this one's reply fails and it runs again
        probe = worker.handle.loop_state.options(concurrency_group=_WATCH).remote()
        try:
            state: LoopState = await asyncio.wait_for(_awaited(probe), self._blocked_limit)
        except TimeoutError:  # not even its watch thread answers
            state = LoopState(self._blocked_limit, None, None)
        except self._ray.exceptions.RayActorError:
            return None  # gone: the reply fails too
        if state.blocked_seconds < self._blocked_limit or not worker.alive:
            return None
        if state.example_index not in (None, job.example_index):
            return None  # another group's code blocks it: that group's check acts
        worker.alive = False
        with contextlib.suppress(Exception):
            self._ray.kill(worker.handle)
        hook = state.hook or "code that could not be located"
        logger.warning(
            "Ray worker %d on node %s: its event loop has been blocked for %.1f s by %s after "
            "the rollout deadline of example %d (a synchronous sleep or loop inside async def); "
            "the worker is replaced and the group settled as rollout_timeout",
            worker.number,
            worker.node,
            state.blocked_seconds,
            hook,
            job.example_index,
        )
        self._last_loss = f"worker {worker.number} on node {worker.node}: blocked by {hook}"
        await self._add()
        return state

    def failed_group_logs(self, example_index: int) -> list[LogEntry]:
        return self._failed_logs.pop(example_index, [])

    async def _lost(self, worker: _Worker, error: BaseException, job: GroupJob) -> None:
        logger.warning(
            "Ray worker %d on node %s was lost; example %d runs again as attempt %d",
            worker.number,
            worker.node,
            job.example_index,
            job.attempt + 1,
        )
        if not worker.alive:
            return
        worker.alive = False
        with contextlib.suppress(Exception):  # gone already, or unreachable: never reused
            self._ray.kill(worker.handle)
        self._last_loss = f"worker {worker.number} on node {worker.node}: {_line(error)}"
        if self._replacements_left > 0:
            self._replacements_left -= 1
            await self._add()

    def _masked(self, text: str) -> str:
        return mask_secrets(text, self._secrets)

    async def stop(self) -> None:
        """Close every live worker's environment, then end the actors."""
        closing = [w.handle.close.remote() for w in self._workers if w.alive]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), 30)
        self.kill()

    def kill(self) -> None:
        """End every actor this pool started (also those still starting)."""
        for handle in self._handles:
            with contextlib.suppress(Exception):
                self._ray.kill(handle)


async def _awaited(ref: Any) -> Any:
    return await ref


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a reply nobody waits for any more as seen (its worker was killed)."""
    if not future.cancelled():
        future.exception()


def _line(error: BaseException) -> str:
    """The first line of ``error``'s message (Ray's carry tracebacks)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
