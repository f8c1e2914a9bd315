"""Running groups of rollouts: the one path every group takes (private; above ``envs``).

``benchmax run`` (locally and on every Ray worker), ``rescore``, ``collect_group`` (and
the TRL rollout function on it), and both validation paths run their groups here, so a
group is recorded the same way wherever it runs. What the pipeline owns:

* ``GroupPipeline.run(Group(...))``: binds the credentials and the hooks' default
  deadlines (``HookDeadlines``), observes the rollouts the environment reports, files
  every log record under its rollout (secrets masked), calls
  ``Environment.run_group`` and builds one ``benchmax.trajectory.Trajectory`` per request
  (transcript, model calls, timings, usage, annotations, logs, final outcome, placement);
* ``run_pool(items, work, concurrency=N)``: at most N groups at once; the first failure
  stops new groups, lets those in flight finish and is raised;
* ``RolloutLogCapture`` (``log_capture``): the handler that attributes records to rollouts.

What a caller decides: how its requests are made (rollout ids, endpoint, sampling args),
the ``Placement`` (run id, example index, attempt) and what happens to a finished group
(a results file, a trainer's callback, a validation verdict). A caller, in full::

    pipeline = GroupPipeline(env, auth_providers={"judge": judge_auth}, secrets=[judge_key])

    async def one(example_index: int) -> None:
        group = Group(requests_for(example_index), Placement("run-1", example_index))
        finished = await pipeline.run(group)        # a TrajectoryGroup
        save(finished.trajectories)

    with pipeline.attached():                       # one log handler for the whole run
        await run_pool(range(len(examples)), one, concurrency=8)

``pipeline.run`` raises what ``run_group`` raises (a contract error); the records that
group logged are then ``pipeline.take_failed_logs(group.rollout_ids)``.
"""

from benchmax._group_pipeline.log_capture import RolloutLogCapture
from benchmax._group_pipeline.pipeline import Group, GroupPipeline, Placement
from benchmax._group_pipeline.pool import run_pool
from benchmax._hook_deadlines import DEFAULT_HOOK_SECONDS, HookDeadlines

__all__ = [
    "DEFAULT_HOOK_SECONDS",
    "Group",
    "GroupPipeline",
    "HookDeadlines",
    "Placement",
    "RolloutLogCapture",
    "run_pool",
]
