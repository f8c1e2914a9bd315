"""The driver's side of a Ray run (``WorkerPool``): it starts the worker actors, sends each
group to the least busy one, replaces workers that are lost and settles a group whose code
blocks its worker's event loop past the rollout deadline."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import cloudpickle

from benchmax.bundle import Bundle
from benchmax.results import TrajectoryGroup
from benchmax.runner._config import RunConfig, mask_secrets
from benchmax.runner._errors import ExecutorError
from benchmax.runner._ray_blocked import BEAT_SECONDS, LoopState, settled_group
from benchmax.runner._ray_worker import GroupFailed, Ready, _GroupWorker
from benchmax.runner._run import GroupJob, _providers
from benchmax.trajectory import LogEntry

if TYPE_CHECKING:
    from benchmax.runner._ray import RayExecutor

__all__ = ["WorkerPool"]

logger = logging.getLogger("benchmax.runner._ray")

_WATCH = "benchmax-watch"  # the concurrency group (own thread and loop) of loop_state


@dataclass(slots=True)
class _Worker:
    handle: Any
    number: int
    node: str = "?"
    in_flight: int = 0
    alive: bool = True


class WorkerPool:
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
            ready: Ready = await asyncio.wait_for(
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

    async def run(self, job: GroupJob) -> TrajectoryGroup:
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
            if isinstance(reply, GroupFailed):
                self._failed_logs[job.example_index] = reply.logs
                raise reply.error
            return reply

    async def _reply(
        self, worker: _Worker, job: GroupJob
    ) -> TrajectoryGroup | GroupFailed | LoopState:
        """The worker's reply for ``job``; past the deadline, the state of the loop that
        ``job``'s code blocked (the worker then replaced) instead."""
        ref = worker.handle.run.remote(job)
        if self._deadline is None:
            reply: TrajectoryGroup | GroupFailed = await ref
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
            result: TrajectoryGroup | GroupFailed = waiting.result()
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
