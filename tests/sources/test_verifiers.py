"""VerifiersEnv against verifiers 0.4's own loader and scorer, with test env packages.

verifiers pins mcp==2.0.0 and openai<3, so it is not in the project's lock; these tests
run with ``uv run --with 'verifiers>=0.4.0,<0.4.1' pytest tests/sources/test_verifiers.py``
(``.ci/run``) and are skipped elsewhere. The env packages (``verifiers_envs/``) are made
importable on ``sys.path`` (with ``examples/verifiers_arith``), where verifiers' loader
finds them by taskset id.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import cloudpickle
import pytest
from tests.sources.running import run_config

from benchmax.runner import run_environment
from benchmax.sources.verifiers import VerifiersEnv
from benchmax.testing import MockModelServer, RecordedRequest, message_text
from benchmax.trajectory import Trajectory

vf = pytest.importorskip("verifiers.v1")

ENVS = Path(__file__).resolve().parent / "verifiers_envs"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "verifiers_arith"


@pytest.fixture(autouse=True)
def env_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ENVS))
    monkeypatch.syspath_prepend(str(EXAMPLE))


def numbers(question: str) -> tuple[int, int]:
    a, b = (int(n) for n in re.findall(r"\d+", question)[:2])
    return a, b


def rollout_index(request: RecordedRequest) -> int:
    match = re.search(r"\.r(\d+)$", request.session)
    return int(match.group(1)) if match else 0


def answering(body: dict[str, Any], request: RecordedRequest) -> Any:
    """Rollout k: right and boxed, bare, wrong, right only inside <think>; with tools,
    first ``calc_add`` and then the boxed tool result."""
    messages = body["messages"]
    a, b = numbers(message_text(next(m for m in messages if m["role"] == "user")["content"]))
    if body.get("tools"):
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return {
                "content": None,
                "tool_calls": [{"name": "calc_add", "arguments": {"a": a, "b": b}}],
            }
        return f"The tool says \\boxed{{{message_text(results[0]['content'])}}}"
    return [
        f"<think>{a} plus {b}</think>So \\boxed{{{a + b}}}",
        f"{a + b}",
        f"\\boxed{{{a + b + 1}}}",
        f"<think>\\boxed{{{a + b}}}</think>done",
    ][rollout_index(request) % 4]


async def verifiers_scores(task: Any, reply: str) -> dict[str, float]:
    """What verifiers' own Task.score gives a trace of the same prompt and reply (the
    reasoning removed, as a server's reasoning parser would)."""
    from verifiers.v1.graph import MessageNode
    from verifiers.v1.trace import AgentInfo, TraceTask

    content = re.sub(r"<think>.*?</think>", "", reply, flags=re.DOTALL)
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig()),
        nodes=[
            MessageNode(message=vf.SystemMessage(content=task.data.system_prompt)),
            MessageNode(parent=0, message=vf.UserMessage(content=task.data.prompt)),
            MessageNode(parent=1, sampled=True, message=vf.AssistantMessage(content=content)),
        ],
    )
    await task.score(trace)
    scores = {name: reward.score for name, reward in trace.rewards.items()}
    return {**scores, **trace.metrics}


async def test_rewards_and_metrics_are_verifiers_own_scores_of_the_same_replies() -> None:
    env = VerifiersEnv("verifiers-arith", {"num_tasks": 3, "seed": 2})
    assert env.reward_keys == ("correct", "formatted", "reply_chars")
    assert env.reward_weights == {"correct": 1.0, "formatted": 0.25, "reply_chars": 0.0}
    assert env.max_turns == 1
    tasks = {task.data.prompt: task for task in vf.load_environment(
        vf.resolve_env_config({"taskset": {"id": "verifiers-arith", "num_tasks": 3, "seed": 2}})
    ).taskset}  # fmt: skip
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(answering) as mock:
        report = await run_environment(env, run_config(mock, group_size=4), on_group=groups.append)
    assert report.rollouts_by_reason == {"finished": 12}
    seen = set()
    for group in groups:
        for trajectory in group:
            prompt = message_text(trajectory.messages[1]["content"])
            reply = message_text(trajectory.messages[-1]["content"])
            expected = await verifiers_scores(tasks[prompt], reply)
            assert trajectory.rewards == pytest.approx(expected)
            seen.add((expected["correct"], expected["formatted"]))
    assert seen == {(1.0, 1.0), (0.0, 0.0), (0.0, 1.0)}


async def test_the_dataset_is_the_tasksets_tasks_with_stable_ids() -> None:
    env = VerifiersEnv("verifiers_arith", {"num_tasks": 3})
    train = await env.create_dataset("train", Path("."))
    again = await VerifiersEnv("verifiers-arith", {"num_tasks": 3}).create_dataset(
        "eval", Path(".")
    )
    assert [e.id for e in train] == [e.id for e in again] and len({e.id for e in train}) == 3
    first = train[0].payload
    assert first["prompt_messages"][0] == {
        "role": "system",
        "content": "You are a careful calculator.",
    }
    assert first["prompt_messages"][1]["role"] == "user"
    assert first["verifiers"]["task"]["answer"] == sum(
        numbers(first["prompt_messages"][1]["content"])
    )
    assert len(await env.create_dataset("train", Path("."), max_examples=2)) == 2
    other = VerifiersEnv("verifiers-arith", {"num_tasks": 3}, eval_env_args={"seed": 9})
    evaluation = await other.create_dataset("eval", Path("."))
    assert {e.id for e in evaluation}.isdisjoint({e.id for e in train})


async def test_a_toolsets_tools_run_in_the_chat_loop() -> None:
    env = VerifiersEnv("verifiers-arith", {"num_tasks": 2, "task": {"tools": True}})
    assert env.max_turns == 10
    [spec] = await env.list_tools()
    assert spec["function"]["name"] == "calc_add"
    assert spec["function"]["parameters"]["required"] == ["a", "b"]
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(answering) as mock:
        report = await run_environment(env, run_config(mock, group_size=1), on_group=groups.append)
    assert report.rollouts_by_reason == {"finished": 2}
    for (trajectory,) in groups:
        a, b = numbers(message_text(trajectory.messages[1]["content"]))
        [result] = [m for m in trajectory.messages if m["role"] == "tool"]
        assert result["content"] == str(a + b)
        assert trajectory.rewards["correct"] == 1.0


async def test_a_tasksets_shared_toolset_is_set_up_once_and_its_errors_reach_the_model() -> None:
    from bm_vf_refused.taskset import EchoToolset

    env = VerifiersEnv("bm-vf-refused", {"shared_tools": True})
    [spec] = await env.list_tools()
    assert spec["function"]["name"] == "echo_say"

    def speaker(body: dict[str, Any], request: RecordedRequest) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if len(results) < 2:
            text = "hello" if not results else ""
            return {
                "content": None,
                "tool_calls": [{"name": "echo_say", "arguments": {"text": text}}],
            }
        return "done"

    EchoToolset.setups = 0
    groups: list[tuple[Trajectory, ...]] = []
    async with MockModelServer(speaker) as mock:
        report = await run_environment(env, run_config(mock, group_size=2), on_group=groups.append)
    assert report.rollouts_by_reason == {"finished": 4}
    assert EchoToolset.setups == 1  # once for the run, not per rollout
    loud, refused = [m for m in groups[0][0].messages if m["role"] == "tool"]
    assert loud["content"] == "HELLO"
    assert "Error executing tool echo_say: nothing to say" in message_text(refused["content"])


async def test_the_env_pickles_and_scores_after_loading() -> None:
    env = VerifiersEnv("verifiers-arith", {"num_tasks": 1})
    copy = pickle.loads(cloudpickle.dumps(env))
    async with MockModelServer(answering) as mock:
        report = await run_environment(copy, run_config(mock, group_size=1))
    assert report.reward_stats["correct"].mean == 1.0


async def test_keyed_scores_settle_the_rollout_as_reward_error() -> None:
    env = VerifiersEnv("bm-vf-refused", {"task": {"keyed": True}})
    async with MockModelServer(lambda body, request: "hi") as mock:
        report = await run_environment(env, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"reward_error": 2}


async def test_a_zero_weight_metric_returning_nan_does_not_decide_the_rollout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """verifiers PR #1546: a zero-weight metric never decides the reward. Its NaN used to
    turn a correct rollout into ``reward_error``."""
    env = VerifiersEnv("bm-vf-refused", {"task": {"nan_metric": True}})
    assert env.reward_weights == {"graded": 1.0, "odd": 0.0}
    async with MockModelServer(lambda body, request: "hi") as mock:
        report = await run_environment(env, run_config(mock, group_size=1))
    assert report.rollouts_by_reason == {"finished": 2}
    assert report.reward_stats["graded"].mean == 1.0
    assert report.reward_stats["odd"].mean == 0.0
    assert any("'odd' scored nan" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    ("env_id", "env_args", "message"),
    [
        ("bm-vf-missing", {}, "env_id 'bm-vf-missing': taskset 'bm-vf-missing' not found"),
        (
            "verifiers-arith",
            {"num_taskz": 1},
            "env_args: num_taskz: Extra inputs are not permitted",
        ),
        ("verifiers-arith", {"num_tasks": 0}, "loads no task"),
        ("verifiers-arith", {"id": "x"}, "env_args must not set 'id'"),
        ("bm-vf-multi", {}, "its Env is PairEnv, a multi-agent environment"),
        ("bm-vf-refused", {"variant": "stop"}, "declares @vf.stop hooks (enough)"),
        ("bm-vf-refused", {"variant": "runtime"}, "@vf.reward in_box needs a runtime"),
        ("bm-vf-refused", {"variant": "container"}, "needs a container (NEEDS_CONTAINER)"),
        (
            "bm-vf-refused",
            {"variant": "setup"},
            "overrides setup(), which needs a verifiers runtime",
        ),
        ("bm-vf-refused", {"variant": "state"}, "shares rollout state (Counter)"),
    ],
)
def test_unsupported_parts_and_bad_arguments_are_one_error_naming_them(
    env_id: str, env_args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        VerifiersEnv(env_id, env_args)
    assert message in str(raised.value) and "\n" not in str(raised.value)


async def test_a_task_whose_user_speaks_first_is_refused_when_the_dataset_is_made() -> None:
    env = VerifiersEnv("bm-vf-refused", {"prompt": False})
    with pytest.raises(ValueError, match=r"has no prompt \(its user opens the conversation\)"):
        await env.create_dataset("train", Path("."))


def test_a_wrong_type_is_a_type_error_naming_the_argument() -> None:
    with pytest.raises(TypeError, match="env_id must be a taskset id"):
        VerifiersEnv(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="env_args must be a JSON object"):
        VerifiersEnv("verifiers-arith", [1])  # type: ignore[arg-type]
