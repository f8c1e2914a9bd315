"""TrainConfig, its TOML file and the command line built from it: no torch needed.

Bad input to ``benchmax train`` is refused before anything heavy is imported, with one
line naming the option or the file's key.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import json
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmax.cli import cli
from benchmax.results._run_directory import RunDirectory
from benchmax.results._step_metrics import step_metrics, tracker_metrics
from benchmax.training import ConfigError, TrainConfig, read_metrics
from benchmax.training._config import (
    config_differences,
    config_settings,
    config_toml,
    read_config_file,
)
from benchmax.trajectory import ModelCall, Trajectory

REPO = Path(__file__).resolve().parents[2]
ARITHMETIC = REPO / "examples" / "arithmetic"
TARGET = f"{ARITHMETIC}/env.py:ArithmeticEnv"


def base(tmp_path: Path, **values: object) -> TrainConfig:
    return TrainConfig(model="some/model", output_dir=tmp_path / "out", **values)  # type: ignore[arg-type]


def test_defaults_are_documented_and_every_field_is_a_setting(tmp_path: Path) -> None:
    config = base(tmp_path)
    settings = config_settings()
    assert [s.name for s in settings] == [f.name for f in dataclasses.fields(TrainConfig)]
    assert all(s.doc for s in settings)
    flags = {s.name: s.flag for s in settings}
    assert flags["group_size"] == "--group-size" and flags["env_args"] == "--env-arg"
    assert flags["target"] == ""  # the positional TARGET
    assert (config.steps, config.group_size, config.loss, config.torch_threads) == (
        20,
        4,
        "dapo",
        1,
    )
    assert config.served_model == "policy"
    assert base(tmp_path, base_url="http://h:8000/v1").served_model == "some/model"


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"steps": 0}, "steps"),
        ({"group_size": 1}, "group_size"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"beta": -0.1}, "beta"),
        ({"top_p": 1.5}, "top_p"),
        ({"temperature": 0}, "temperature"),
        ({"loss": "ppo"}, "loss"),
        ({"report_to": ("mlflow",)}, "report_to"),
        ({"report_to": "wandb"}, "report_to"),
        ({"lora": -1}, "lora"),
        ({"seed": True}, "seed"),
        ({"steps": 2.0}, "steps"),
        ({"base_url": "localhost:8000"}, "base_url"),
        ({"env_args": {"not a name": 1}}, "env_args"),
        ({"auth": {"judge": ""}}, "auth"),
        ({"eval_examples": 0}, "eval_examples"),
        ({"num_processes": 0}, "num_processes"),
        ({"num_processes": 3}, "num_processes"),  # 4 prompts per step: a group would split
        ({"accelerate_config": 3}, "accelerate_config"),
        ({"min_token_coverage": 1.5}, "min_token_coverage"),
        ({"min_token_coverage": -0.1}, "min_token_coverage"),
    ],
)
def test_a_bad_value_names_its_field(tmp_path: Path, values: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        base(tmp_path, **values)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}: ")


def test_model_and_output_dir_are_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model: is required"):
        TrainConfig(output_dir=tmp_path)
    with pytest.raises(ConfigError, match="output_dir: is required"):
        TrainConfig(model="m")


def test_the_saved_file_reads_back_as_the_same_config(tmp_path: Path) -> None:
    config = base(
        tmp_path,
        target="env.py:Env",
        env_args={"n": 3, "name": "x", "nested": {"a": [1, 2]}},
        auth={"judge": "JUDGE_KEY"},
        report_to=("tensorboard",),
        lora=8,
        eval_examples=5,
    )
    path = tmp_path / "config.toml"
    path.write_text(config_toml(config))
    again = TrainConfig(**read_config_file(path))
    assert again == config
    assert config_differences(config, again) == []


def test_an_unknown_key_in_the_file_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\ngroup-size = 8\n')
    with pytest.raises(ConfigError) as caught:
        read_config_file(path)
    assert caught.value.key == "group-size"
    assert str(path) in str(caught.value) and "did you mean group_size" in str(caught.value)


def test_a_wrongly_typed_value_in_the_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text('steps = "ten"\n')
    with pytest.raises(ConfigError, match=r"steps: must be an integer, got 'ten' \(in "):
        read_config_file(path)
    path.write_text("steps = [\n")
    with pytest.raises(ValueError, match="is not valid TOML"):
        read_config_file(path)


def test_a_resume_may_change_only_the_schedule(tmp_path: Path) -> None:
    saved = base(tmp_path)
    assert config_differences(saved, dataclasses.replace(saved, steps=40, resume=True)) == []
    # a check, not how the run trains: a resume may loosen or tighten it
    assert config_differences(saved, dataclasses.replace(saved, min_token_coverage=0.5)) == []
    changed = config_differences(saved, dataclasses.replace(saved, learning_rate=1e-3))
    assert changed == ["learning_rate was 1e-05, now 0.001"]


# ---- the command line ------------------------------------------------------------------------


def train(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["train", *(str(a) for a in args)])
    return result.exit_code, result.output


def test_bad_options_are_refused_naming_the_option(tmp_path: Path) -> None:
    common = [TARGET, "--data", ARITHMETIC, "--model", "m", "--output-dir", tmp_path / "o"]
    code, output = train(*common, "--steps", "0")
    assert code == 3 and "Error: invalid --steps: must be an integer >= 1, got 0" in output
    code, output = train(*common, "-k", "1")
    assert "invalid --group-size: must be an integer >= 2" in output
    code, output = train(*common, "--top-p", "2")
    assert "invalid --top-p: must be > 0 and <= 1, got 2.0" in output
    code, output = train(*common, "--loss", "ppo")
    assert code == 2 and "--loss" in output
    code, output = train(*common, "--env-arg", "x")
    assert "invalid --env-arg 'x'" in output
    code, output = train(TARGET, "--data", ARITHMETIC, "--output-dir", tmp_path / "o")
    assert "invalid --model: is required" in output
    code, output = train(*common[:1], "--data", tmp_path / "nowhere", *common[3:])
    assert "data directory not found" in output
    code, output = train(f"{ARITHMETIC}/env.py:Missing", *common[1:])
    assert code == 3 and "has no 'Missing'" in output
    code, output = train("--data", ARITHMETIC, "--model", "m", "--output-dir", tmp_path / "o")
    assert code == 2 and "TARGET is required" in output


def test_the_config_file_is_read_and_options_override_it(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        f'target = "{TARGET}"\ndata = "{ARITHMETIC}"\nmodel = "m"\n'
        f'output_dir = "{tmp_path / "o"}"\nsteps = 0\n'
    )
    code, output = train("--config", path)
    assert f"invalid steps in {path}: must be an integer >= 1" in output
    code, output = train("--config", path, "--steps", "-3")
    assert "invalid --steps: must be an integer >= 1, got -3" in output
    path.write_text('model = "m"\nlearning_rte = 0.1\n')
    code, output = train("--config", path)
    assert code == 3 and f"learning_rte: unknown key in {path}" in output
    code, output = train("--config", tmp_path / "missing.toml")
    assert "cannot read config file" in output


def test_several_processes_are_checked_before_anything_is_launched(tmp_path: Path) -> None:
    common = [TARGET, "--data", ARITHMETIC, "--model", "m", "--output-dir", tmp_path / "o"]
    code, output = train(*common, "--num-processes", "3", "--prompts-per-step", "4")
    assert code == 3 and "invalid --num-processes: must divide prompts_per_step (4)" in output
    code, output = train(*common, "--num-processes", "2", "--accelerate-config", tmp_path / "a")
    assert code == 3 and f"accelerate config file not found: {tmp_path / 'a'}" in output
    assert not (tmp_path / "o").exists()


def test_the_python_api_needs_a_launcher_for_several_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.arithmetic.env import ArithmeticEnv

    from benchmax.training import TrainError
    from benchmax.training import train as train_run

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    config = base(tmp_path, num_processes=2, prompts_per_step=2)
    with pytest.raises(TrainError, match="num_processes 2 needs a launcher: run benchmax train"):
        train_run(config, ArithmeticEnv)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what accelerate launch sets for FSDP
    with pytest.raises(TrainError, match="DeepSpeed and FSDP need --base-url"):
        train_run(base(tmp_path), ArithmeticEnv)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(TrainError, match="WORLD_SIZE must be a positive integer, got 'two'"):
        train_run(base(tmp_path), ArithmeticEnv)
    assert not (tmp_path / "out").exists()


def test_resume_without_a_run_says_what_is_missing(tmp_path: Path) -> None:
    code, output = train(
        TARGET, "--data", ARITHMETIC, "--model", "m", "--output-dir", tmp_path / "o", "--resume"
    )
    assert code == 3 and "nothing to resume" in output and "no config.toml" in output


# ---- run directory and metrics ---------------------------------------------------------------


def rollout(step: int, group: int, index: int, reward: float, reason: str = "finished") -> dict:
    trajectory = Trajectory(
        rollout_id=f"trl-{step - 1}-{group}-{index}",
        example_id=f"ex{group}",
        termination_reason=reason,
        rewards={"correct": reward, "bare": 0.0},
        example_index=(step - 1) * 2 + group,
        group_index=index,
        step=step,
        weights_version=step - 1,
        model_calls=(ModelCall(prompt_token_ids=(1, 2), completion_token_ids=(3,) * (index + 1)),),
    )
    return dict(trajectory.to_json())


def test_a_resume_cuts_what_later_steps_wrote(tmp_path: Path) -> None:
    layout = RunDirectory(tmp_path)
    header = {"type": "header", "format": "benchmax.results/1", "run_id": "r", "definition": {}}
    lines = [header] + [rollout(s, g, i, 1.0) for s in (1, 2, 3) for g in (0, 1) for i in (0, 1)]
    layout.rollouts.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"torn')
    layout.metrics.write_text("".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3)))
    for step in (0, 2, 3):
        layout.eval_dir.mkdir(exist_ok=True)
        layout.eval_file(step).write_text("{}\n")
        layout.eval_file(step).with_suffix(".report.json").write_text("{}")
    for step in (2, 3):
        layout.checkpoint(step).mkdir(parents=True)
        (layout.checkpoint(step) / "trainer_state.json").write_text("{}")
    assert layout.checkpoint_steps() == [2, 3] and layout.holds_run()
    layout.cut_after(2)
    kept = [json.loads(line) for line in layout.rollouts.read_text().splitlines()]
    assert kept[0] == header and {line["step"] for line in kept[1:]} == {1, 2}
    assert [m["step"] for m in read_metrics(layout.metrics)] == [1, 2]
    assert layout.eval_steps() == [0, 2] and layout.checkpoint_steps() == [2]
    assert not layout.eval_file(3).with_suffix(".report.json").exists()


def test_step_metrics_summarize_the_groups() -> None:
    groups = [
        [Trajectory.from_json(rollout(1, 0, i, r)) for i, r in enumerate((1.0, 0.0))],
        [Trajectory.from_json(rollout(1, 1, i, 1.0)) for i in range(2)],
        [
            Trajectory.from_json(rollout(1, 2, 0, 0.0, "model_error")),
            Trajectory.from_json(rollout(1, 2, 1, 1.0)),
        ],
    ]
    line = step_metrics(1, groups, None, weights_version=0)
    assert line["rollouts"] == 6 and line["groups"] == 3
    assert line["rewards"] == {"correct": pytest.approx(4 / 6), "bare": 0.0}
    assert line["reward"] == pytest.approx(4 / 6)
    # Group 2 is flat, group 3 has one trainable rollout: two groups without signal.
    assert line["zero_variance_group_share"] == pytest.approx(2 / 3)
    assert line["termination_reasons"] == {"finished": 5, "model_error": 1}
    assert line["non_trainable_share"] == pytest.approx(1 / 6)
    # TRL's advantages: (r - mean) / (sample std + 1e-4); [1, 0] has sample std sqrt(1/2)
    assert line["advantage"]["max"] == pytest.approx(0.5 / (0.5**0.5 + 1e-4))
    assert line["advantage"]["min"] == pytest.approx(-0.5 / (0.5**0.5 + 1e-4))
    assert line["completion_tokens"]["max"] == 2.0
    flat = tracker_metrics(line)
    assert flat["benchmax/rewards/correct"] == pytest.approx(4 / 6)
    assert flat["benchmax/termination/model_error"] == 1.0


def test_a_key_pasted_as_an_auth_variable_is_not_repeated(tmp_path: Path) -> None:
    """``auth = {judge = "sk-..."}`` used to answer "names environment variable sk-...,
    which is not set": the key itself, in the terminal."""
    from benchmax.training._trainer import TrainError, _providers

    config = TrainConfig(
        model="some/model",
        output_dir=tmp_path / "out",
        auth={"judge": "sk-live-Zq81xPastedKey0042"},
    )
    with pytest.raises(TrainError) as caught:
        _providers(config, None)
    assert str(caught.value) == (
        "auth judge takes the name of the environment variable holding the key, not the key "
        "itself: the 26 characters given are not a variable name (not repeated here, in case "
        "they are the key)"
    )
    unset = dataclasses.replace(config, auth={"judge": "BENCHMAX_TEST_UNSET_JUDGE_KEY"})
    with pytest.raises(TrainError, match="BENCHMAX_TEST_UNSET_JUDGE_KEY, which is not set"):
        _providers(unset, None)


# ---- precision, batching, schedule and the numbers TRL trains with ---------------------------

NEW_OPTIONS: dict[str, object] = {
    "dtype": "bf16",
    "micro_batch_size": 4,
    "max_sequence_tokens": 1024,
    "gradient_checkpointing": False,
    "save_total_limit": 2,
    "lr_schedule": "cosine",
    "warmup_steps": 3,
    "weight_decay": 0.01,
    "max_grad_norm": 0.5,
    "scale_rewards": "batch",
    "epsilon": 0.2,
    "epsilon_high": 0.28,
    "eval_temperature": 0.0,
}


def test_the_new_options_round_trip_through_the_config_file(tmp_path: Path) -> None:
    config = base(tmp_path, **NEW_OPTIONS)
    path = tmp_path / "config.toml"
    path.write_text(config_toml(config))
    again = TrainConfig(**read_config_file(path))
    assert again == config
    assert {name: getattr(again, name) for name in NEW_OPTIONS} == NEW_OPTIONS
    assert config_differences(config, dataclasses.replace(again, save_total_limit=5)) == []
    assert config_differences(config, dataclasses.replace(again, dtype="fp32")) == [
        "dtype was 'bf16', now 'fp32'"
    ]
    defaults = base(tmp_path)
    assert (defaults.dtype, defaults.micro_batch_size, defaults.gradient_checkpointing) == (
        "auto",
        None,
        True,
    )
    assert (defaults.accumulation_steps, config.accumulation_steps) == (1, 4)


def test_the_new_options_are_read_from_the_file_and_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    lines = [f'target = "{TARGET}"', f'data = "{ARITHMETIC}"', 'model = "m"']
    lines += [f'output_dir = "{tmp_path / "o"}"', 'dtype = "fp16"', "micro_batch_size = 3"]
    path.write_text("\n".join(lines) + "\n")
    code, output = train("--config", path)
    assert code == 3 and f"invalid micro_batch_size in {path}: must divide the 16" in output
    code, output = train("--config", path, "--micro-batch-size", "5")
    assert "invalid --micro-batch-size: must divide the 16 rollouts" in output
    code, output = train("--config", path, "--micro-batch-size", "4", "--scale-rewards", "std")
    assert code == 2 and "--scale-rewards" in output
    code, output = train("--help")
    for flag in (
        "--dtype", "--micro-batch-size", "--max-sequence-tokens", "--gradient-checkpointing",
        "--no-gradient-checkpointing", "--save-total-limit", "--lr-schedule", "--warmup-steps",
        "--weight-decay", "--max-grad-norm", "--scale-rewards", "--epsilon", "--epsilon-high",
        "--eval-temperature",
    ):  # fmt: skip
        assert flag in output, flag


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"dtype": "fp64"}, "dtype"),
        ({"micro_batch_size": 0}, "micro_batch_size"),
        ({"micro_batch_size": 3}, "micro_batch_size"),
        ({"max_sequence_tokens": 0}, "max_sequence_tokens"),
        ({"max_sequence_tokens": 64, "base_url": "http://h:8000/v1"}, "max_sequence_tokens"),
        ({"save_total_limit": 0}, "save_total_limit"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"lr_schedule": "step"}, "lr_schedule"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"max_grad_norm": float("inf")}, "max_grad_norm"),
        ({"scale_rewards": True}, "scale_rewards"),
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon_high": 0}, "epsilon_high"),
        ({"eval_temperature": -1}, "eval_temperature"),
        ({"gradient_checkpointing": "yes"}, "gradient_checkpointing"),
    ],
)
def test_a_bad_new_option_names_its_field(
    tmp_path: Path, values: dict[str, object], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        base(tmp_path, **values)
    assert caught.value.key == key


def test_dr_grpo_does_not_scale_advantages_unless_asked() -> None:
    def scaling(**values: object) -> str:
        return TrainConfig(model="m", output_dir=Path("o"), **values).advantage_scaling  # type: ignore[arg-type]

    assert scaling() == "group"
    assert scaling(loss="dr_grpo") == "none"
    assert scaling(loss="dr_grpo", scale_rewards="group") == "group"
    assert scaling(loss="grpo", scale_rewards="none") == "none"
    assert scaling(scale_rewards="batch") == "batch"


def test_trl_advantages_use_the_sample_std_plus_1e_4() -> None:
    from benchmax.results import trl_advantages

    group = [0.0, 1.0, 1.0, None]
    std = (((0 - 2 / 3) ** 2 + 2 * (1 - 2 / 3) ** 2) / 2) ** 0.5  # Bessel: n - 1 = 2
    (scaled,) = trl_advantages([group], "group")
    assert scaled == pytest.approx([(r - 2 / 3) / (std + 1e-4) for r in (0, 1, 1)] + [0.0])
    (plain,) = trl_advantages([group], "none")
    assert plain == pytest.approx([-2 / 3, 1 / 3, 1 / 3, 0.0])
    flat, single = trl_advantages([[0.5, 0.5], [1.0, None]], "group")
    assert flat == [0.0, 0.0] and single == [0.0, 0.0]  # no spread; one scored rollout
    batch = trl_advantages([[0.0, 1.0], [1.0, 1.0]], "batch")
    batch_std = (((0 - 0.75) ** 2 + 3 * (1 - 0.75) ** 2) / 3) ** 0.5
    assert batch[0] == pytest.approx([-0.5 / (batch_std + 1e-4), 0.5 / (batch_std + 1e-4)])
    assert batch[1] == [0.0, 0.0]


def test_the_step_line_records_the_advantages_trl_trains_with() -> None:
    def rollout(reward: float, reason: str = "finished") -> Trajectory:
        return Trajectory(
            rollout_id=f"r{reward}",
            example_id="e",
            termination_reason=reason,
            rewards={"r": reward},
        )

    group = [rollout(0.0), rollout(1.0), rollout(1.0), rollout(0.0, "model_error")]
    grouped = step_metrics(1, [group], None, weights_version=0)
    std = (((0 - 2 / 3) ** 2 + 2 * (1 - 2 / 3) ** 2) / 2) ** 0.5
    assert grouped["advantage"]["max"] == pytest.approx((1 - 2 / 3) / (std + 1e-4))
    assert grouped["advantage"]["min"] == pytest.approx((0 - 2 / 3) / (std + 1e-4))
    dr = step_metrics(1, [group], None, weights_version=0, scale_rewards="none")
    assert (dr["advantage"]["min"], dr["advantage"]["max"]) == pytest.approx((-2 / 3, 1 / 3))


def test_the_logprob_gap_and_the_masked_share_reach_the_metrics_line() -> None:
    from benchmax.results import trainer_metrics

    picked = trainer_metrics(
        {
            "loss": 0.1,
            "sampling/logprob_gap/mean": 0.003,
            "sampling/is_masked_sequence_share": 0.25,
            "sampling/sampling_logp_difference/mean": 0.004,
        }
    )
    assert (picked["logprob_gap"], picked["is_masked_share"], picked["trl_logprob_gap"]) == (
        0.003,
        0.25,
        0.004,
    )


def test_a_cpu_run_says_what_will_make_a_step_slow(tmp_path: Path) -> None:
    from benchmax.training._trainer import _slow_cpu_note

    note = _slow_cpu_note(base(tmp_path), 135_000_000)  # SmolLM2-135M, P = K = 4, 256 tokens
    assert note is not None and "16 rollouts" in note and "--max-tokens" in note
    assert _slow_cpu_note(base(tmp_path), 100_000) is None  # the tests' tiny model
    small = base(tmp_path, group_size=2, prompts_per_step=2, max_tokens=16)
    assert _slow_cpu_note(small, 135_000_000) is None


# ---- one run per directory, torn checkpoints, a full disk ------------------------------------


def run_config(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "o"
    model = tmp_path / "model"  # a local directory: the model name check passes it
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    path = tmp_path / "run.toml"
    path.write_text(
        f'target = "{TARGET}"\ndata = "{ARITHMETIC}"\nmodel = "{model}"\noutput_dir = "{out}"\n'
    )
    return path, out


def test_a_second_run_into_a_held_directory_writes_nothing(tmp_path: Path) -> None:
    """The loser used to rewrite config.toml before the results lock stopped it, so the
    printed resume command continued the winner's run with the loser's settings."""
    path, out = run_config(tmp_path)
    layout = RunDirectory(out)
    with layout.claimed():  # the winner, training
        layout.config.write_text("# the winner's settings\n")
        code, output = train("--config", path, "--learning-rate", "0.5")
        assert code == 3 and "is in use by another training run" in output
        assert layout.config.read_text() == "# the winner's settings\n"
        code, output = train("--config", path, "--resume")
        assert code == 3 and "is in use by another training run" in output
    assert sorted(p.name for p in out.iterdir()) == [".train.lock", "config.toml"]


def test_a_run_killed_before_its_first_checkpoint_resumes_from_the_start(tmp_path: Path) -> None:
    """``--resume`` said "nothing to resume" and a fresh run "already holds a training run",
    each sending the user to the other."""
    path, out = run_config(tmp_path)
    layout = RunDirectory(out)
    out.mkdir()
    layout.config.write_text(path.read_text())
    layout.rollouts.write_text('{"type": "header"}\n')
    code, output = train("--config", path)
    assert code == 3 and "already holds a training run: it has no checkpoint yet" in output
    assert "pass --resume to start it over" in " ".join(output.split())
    code, output = train("--config", layout.config, "--resume")
    # The checks pass: what stops it here is only the missing trl extra.
    assert "nothing to resume" not in output and "needs the trl extra" in output


def safetensors_bytes() -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    return struct.pack("<Q", len(header)) + header + bytes(16)


def torch_file_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return buffer.getvalue()


def complete_checkpoint(layout: RunDirectory, step: int) -> Path:
    folder = layout.checkpoint(step)
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log": [1, 2]}))
    (folder / "model.safetensors").write_bytes(safetensors_bytes())
    (folder / "optimizer.pt").write_bytes(torch_file_bytes())
    return folder


@pytest.mark.parametrize(
    ("name", "cut", "problem"),
    [
        ("trainer_state.json", lambda data: data[: len(data) // 2], "not valid JSON"),
        ("model.safetensors", lambda data: data[:-5], "cut short"),
        ("model.safetensors", lambda data: data[:20], "cut inside its header"),
        ("model.safetensors", lambda data: data[:3], "shorter than a safetensors header"),
        ("optimizer.pt", lambda data: data[:-30], "not a complete torch file"),
        ("optimizer.pt", lambda data: b"", "the file is empty"),
    ],
)
def test_a_torn_checkpoint_is_named_with_its_file_and_the_fix(
    tmp_path: Path, name: str, cut: Any, problem: str
) -> None:
    path, out = run_config(tmp_path)
    layout = RunDirectory(out)
    out.mkdir()
    layout.config.write_text(path.read_text().replace("\n", "\nsteps = 5\n", 1))
    complete_checkpoint(layout, 1)
    torn = complete_checkpoint(layout, 2)
    assert layout.torn_checkpoint_file(2) is None
    (torn / name).write_bytes(cut((torn / name).read_bytes()))
    found = layout.torn_checkpoint_file(2)
    assert found is not None and found[0] == torn / name and problem in found[1]
    assert layout.torn_checkpoint_file(1) is None
    code, output = train("--config", layout.config, "--resume")
    text = " ".join(output.split())
    assert code == 3 and f"checkpoint {torn} is torn: {name}: " in text and problem in text
    assert "it continues from step-1, the last complete checkpoint" in text
    assert "Traceback" not in output
    # The fix the message names works: the checks pass (only the trl extra is missing).
    shutil.rmtree(torn)
    code, output = train("--config", layout.config, "--resume")
    assert "torn" not in output and "needs the trl extra" in output
    # The only checkpoint torn: the message says the run starts over.
    (layout.checkpoint(1) / name).write_bytes(b"")
    code, output = train("--config", layout.config, "--resume")
    assert "it starts over, as no other checkpoint is complete" in " ".join(output.split())


def test_a_full_disk_is_recognized_whatever_raised_it() -> None:
    from benchmax.cli._train_command import _disk_full

    with pytest.raises(OSError) as real:
        with open("/dev/full", "wb", buffering=0) as handle:
            handle.write(b"x")
    assert _disk_full(real.value)
    torch_error = RuntimeError(
        "[enforce fail at inline_container.cc:664] . unexpected pos 6400 vs 6292"
    )
    assert _disk_full(torch_error)
    try:
        try:
            raise real.value
        except OSError as cause:
            raise RuntimeError("saving the checkpoint failed") from cause
    except RuntimeError as chained:
        assert _disk_full(chained)
    assert not _disk_full(RuntimeError("CUDA out of memory"))
    assert not _disk_full(OSError(errno.EACCES, "Permission denied"))
