"""Attribution rules of the runner's log handler."""

from __future__ import annotations

import logging

import pytest

from benchmax._group_pipeline.log_capture import RolloutLogCapture
from benchmax.envs.logging import group_context, rollout_context


@pytest.fixture
def capture() -> RolloutLogCapture:
    handler = RolloutLogCapture(logging.INFO, secrets=["tok-12345678"])
    handler.track(["r1", "r2"])
    with handler.attached():
        yield handler


def messages(capture: RolloutLogCapture, rollout_id: str) -> list[str]:
    return [entry["message"] for entry in capture.take(rollout_id)]


def test_records_inside_a_rollout_context_belong_to_it(capture: RolloutLogCapture) -> None:
    with rollout_context("r1"):
        logging.getLogger("anything").warning("inside r1")
    assert messages(capture, "r1") == ["inside r1"]
    assert messages(capture, "r2") == []


def test_records_naming_a_rollout_in_extra_belong_to_it(capture: RolloutLogCapture) -> None:
    with rollout_context("r1"):  # the structured field wins over the context
        logging.getLogger("benchmax.envs.environment").warning(
            "benchmax.rollout.terminated rollout_id=%s termination_reason=%s",
            "r2",
            "context_exceeded",
            extra={"rollout_id": "r2"},
        )
    assert messages(capture, "r2") == [
        "benchmax.rollout.terminated rollout_id=r2 termination_reason=context_exceeded"
    ]
    assert messages(capture, "r1") == []


def test_records_naming_several_rollouts_go_to_each(capture: RolloutLogCapture) -> None:
    logging.getLogger("benchmax.envs.environment").error(
        "benchmax.rollout.failed rollout_id=group termination_reason=judge_error: down",
        extra={"rollout_ids": ("r1", "r2", "r1", "untracked")},
    )
    with group_context(["r2"]):
        logging.getLogger("user").warning("group hook")
    expected = "benchmax.rollout.failed rollout_id=group termination_reason=judge_error: down"
    assert messages(capture, "r1") == [expected]
    assert messages(capture, "r2") == [expected, "group hook"]


def test_message_text_is_never_parsed_for_ids(capture: RolloutLogCapture) -> None:
    logging.getLogger("benchmax.envs.environment").warning(
        "benchmax.rollout.terminated rollout_id=r1 termination_reason=context_exceeded"
    )
    logging.getLogger("other.module").warning("rollout_id=r1 but not from run_group")
    logging.getLogger("user").warning("bad extra", extra={"rollout_id": 7})
    assert capture.take("r1") == [] and capture.take("r2") == []


def test_unattributed_and_untracked_records_are_dropped(capture: RolloutLogCapture) -> None:
    logging.getLogger("user").warning("outside any rollout")
    with rollout_context("someone-else"):
        logging.getLogger("user").warning("another run")
    logging.getLogger("user").warning("named but untracked", extra={"rollout_id": "r9"})
    assert capture.take("r1") == [] and capture.take("r2") == []


def test_level_secrets_and_tracebacks(capture: RolloutLogCapture) -> None:
    logger = logging.getLogger("user")
    logger.setLevel(logging.DEBUG)
    try:
        with rollout_context("r1"):
            logger.debug("too quiet")
            try:
                raise RuntimeError("bad token tok-12345678")
            except RuntimeError:
                logger.exception("failed with tok-12345678")
    finally:
        logger.setLevel(logging.NOTSET)
    [entry] = capture.take("r1")
    assert entry["message"] == "failed with ***"
    assert entry["level"] == "ERROR"
    assert "RuntimeError: bad token ***" in entry["exception"]
    assert "tok-12345678" not in str(entry)


def test_take_forgets_the_rollout(capture: RolloutLogCapture) -> None:
    with rollout_context("r1"):
        logging.getLogger("user").warning("once")
    assert messages(capture, "r1") == ["once"]
    with rollout_context("r1"):
        logging.getLogger("user").warning("after take")
    assert capture.take("r1") == []


def test_unowned_records_still_reach_the_terminal_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With no other handler, a record no rollout owns is printed as Python would have."""
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers.clear()  # pytest's own capture handlers
    handler = RolloutLogCapture(logging.WARNING, secrets=["tok-12345678"])
    handler.track(["r1"])
    try:
        with handler.attached():
            logging.getLogger("user").warning("outside the rollouts, key tok-12345678")
            logging.getLogger("user").info("too quiet for the last resort")
            with rollout_context("r1"):
                logging.getLogger("user").warning("kept for r1")
    finally:
        root.handlers[:] = saved
    printed = capsys.readouterr().err
    assert printed == "outside the rollouts, key ***\n"
    assert messages(handler, "r1") == ["kept for r1"]


def test_unowned_records_are_left_to_other_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    other = logging.getLogger("user.handled")
    collected: list[str] = []
    sink = logging.Handler()
    sink.emit = lambda record: collected.append(record.getMessage())  # type: ignore[method-assign]
    other.addHandler(sink)
    handler = RolloutLogCapture(logging.WARNING)
    try:
        with handler.attached():
            other.warning("handled elsewhere")
    finally:
        other.removeHandler(sink)
    assert collected == ["handled elsewhere"]
    assert "handled elsewhere" not in capsys.readouterr().err
