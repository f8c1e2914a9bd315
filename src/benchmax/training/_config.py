"""``TrainConfig``: every setting of a ``benchmax train`` run, declared once.

Each field carries its type, default and documentation; the command line options
(``--steps`` ...) and the TOML config file keys (``steps = 20`` ...) are derived from
these declarations (:func:`config_settings`), so the three never disagree. This module
imports neither torch nor TRL.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmax._value_checks import is_int_at_least
from benchmax.training._errors import TrainingError

__all__ = [
    "DTYPES",
    "LOSS_TYPES",
    "LR_SCHEDULES",
    "REPORT_TO",
    "SCALE_REWARDS",
    "RESUMABLE_CHANGES",
    "ConfigError",
    "Setting",
    "TrainConfig",
    "config_differences",
    "config_settings",
    "config_toml",
    "read_config_file",
]

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
"""TRL 1.16's ``GRPOConfig.loss_type`` values (see TRL's docs for each formula)."""

DTYPES = ("auto", "fp32", "bf16", "fp16")
"""``--dtype`` values: the weights are always loaded and updated in fp32 (the master copy);
``bf16``/``fp16`` add that autocast to the forward and backward passes, ``auto`` is ``bf16``
on a CUDA GPU that supports it and ``fp32`` otherwise (docs/training.md, "Precision")."""

LR_SCHEDULES = ("constant", "linear", "cosine")
"""``--lr-schedule`` values: transformers' schedules after ``--warmup-steps`` of linear warmup."""

SCALE_REWARDS = ("auto", "group", "batch", "none")
"""``--scale-rewards`` values: TRL's ``scale_rewards`` (the advantage is ``r - group mean``,
divided by the group's or the batch's sample std + 1e-4, or not divided: ``none``);
``auto`` is ``none`` for ``--loss dr_grpo`` (Dr. GRPO) and ``group`` otherwise."""

REPORT_TO = ("trackio", "tensorboard", "wandb")
"""The experiment trackers TRL reports to (``report_to``)."""

type Kind = Literal["str", "path", "int", "float", "bool", "choice", "choices", "pairs", "table"]


class ConfigError(TrainingError, ValueError):
    """A setting that cannot be used: ``key`` names it, the message says why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.reason = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.key, self.reason), self.__dict__ or None)


def _setting(
    kind: Kind,
    default: Any,
    doc: str,
    *,
    flag: str | None = None,
    short: str | None = None,
    metavar: str | None = None,
    choices: tuple[str, ...] = (),
) -> Any:
    factory: Callable[[], dict[str, object]] | None = None
    if isinstance(default, dict):
        factory, default = dict, dataclasses.MISSING
    metadata = {
        "kind": kind,
        "doc": doc,
        "flag": flag,
        "short": short,
        "metavar": metavar,
        "choices": choices,
    }
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainConfig:
    """One GRPO training run (``benchmax train``; ``benchmax.training.train(config, env)``).

    Every field is also a command line option (``--steps`` for ``steps``) and a key of
    the TOML config file (``steps = 20``); ``__post_init__`` raises :class:`ConfigError`
    naming the first field that is wrong. Paths are kept as given.
    """

    target: str | None = _setting(
        "str",
        None,
        "The environment, as benchmax run takes it: path/to/file.py:Class, "
        "package.module:Class or a bundle file (the Python API takes the class itself "
        "and only records this).",
        flag="",
        metavar="TARGET",
    )
    data: Path = _setting(  # noqa: RUF009  # a Path is immutable
        "path", Path("."), "Data directory passed to create_dataset as base_dir.", metavar="DIR"
    )
    model: str = _setting(
        "str",
        "",
        "The policy: a local Hugging Face model directory, a built-in name "
        "(smollm2-135m-instruct) or a Hub id.",
        metavar="MODEL",
    )
    output_dir: Path = _setting(  # noqa: RUF009  # a Path is immutable
        "path",
        Path(),
        "Run directory: config.toml, rollouts.jsonl, metrics.jsonl, eval/, checkpoints/.",
        metavar="DIR",
    )
    env_args: Mapping[str, object] = _setting(
        "pairs",
        {},
        "Constructor arguments of the environment (--env-arg KEY=VALUE, the value parsed "
        "as JSON, else kept as a string; a [env_args] table in the file).",
        flag="--env-arg",
        metavar="KEY=VALUE",
    )
    auth: Mapping[str, str] = _setting(
        "table",
        {},
        "InjectedAuth names bound to the environment variable holding their bearer key "
        "(--auth NAME=VAR; an [auth] table in the file).",
        metavar="NAME=VAR",
    )
    steps: int = _setting("int", 20, "Optimizer steps to train for.", metavar="N")
    group_size: int = _setting(
        "int",
        4,
        "Rollouts per prompt (GRPO's group, TRL's num_generations; at least 2).",
        short="-k",
        metavar="K",
    )
    prompts_per_step: int = _setting(
        "int", 4, "Distinct training examples per step (each run as one group).", metavar="P"
    )
    max_examples: int | None = _setting(
        "int", None, "Train on the first N examples of the train split (default all).", metavar="N"
    )
    learning_rate: float = _setting(
        "float", 1e-5, "AdamW peak learning rate (see --lr-schedule).", metavar="LR"
    )
    lr_schedule: str = _setting(
        "choice",
        "constant",
        "Learning rate after the warmup: constant, linear or cosine decay to 0 at --steps.",
        metavar="SCHEDULE",
        choices=LR_SCHEDULES,
    )
    warmup_steps: int = _setting(
        "int", 0, "Optimizer steps of linear warmup from 0 to the learning rate.", metavar="N"
    )
    weight_decay: float = _setting("float", 0.0, "AdamW weight decay.", metavar="WD")
    max_grad_norm: float = _setting(
        "float", 1.0, "Clip the gradient to this global L2 norm (0: no clipping).", metavar="NORM"
    )
    beta: float = _setting(
        "float",
        0.0,
        "KL coefficient against the base model (0: no KL term and no reference copy).",
        metavar="BETA",
    )
    loss: str = _setting("choice", "dapo", "TRL's loss_type.", metavar="LOSS", choices=LOSS_TYPES)
    scale_rewards: str = _setting(
        "choice",
        "auto",
        "How advantages are scaled (TRL's scale_rewards): group or batch sample std + 1e-4, "
        "or none; auto: none for --loss dr_grpo, else group.",
        metavar="HOW",
        choices=SCALE_REWARDS,
    )
    epsilon: float = _setting(
        "float", 0.2, "Lower clipping range of the policy ratio (1 - epsilon).", metavar="EPS"
    )
    epsilon_high: float | None = _setting(
        "float",
        None,
        "Upper clipping range (1 + epsilon_high; DAPO's clip-higher uses 0.28); default --epsilon.",
        metavar="EPS",
    )
    temperature: float = _setting(
        "float", 1.0, "Sampling temperature (also TRL's logit scaling), above 0.", metavar="T"
    )
    top_p: float = _setting("float", 1.0, "Nucleus sampling top_p, in (0, 1].", metavar="P")
    max_tokens: int = _setting(
        "int", 256, "Cap on tokens generated per model call (max_tokens).", metavar="N"
    )
    max_sequence_tokens: int | None = _setting(
        "int",
        None,
        "A rollout's whole token budget (prompt, every turn's completion and tool output): a "
        "reply is cut where the sequence reaches it (output_exceeded), a turn whose prompt "
        "already fills it ends the rollout as context_exceeded (embedded sampler only).",
        metavar="N",
    )
    dtype: str = _setting(
        "choice",
        "auto",
        "Precision: fp32 master weights always; bf16/fp16 autocast on top (auto: bf16 on a "
        "CUDA GPU that supports it, else fp32; fp16 needs a CUDA GPU).",
        metavar="DTYPE",
        choices=DTYPES,
    )
    micro_batch_size: int | None = _setting(
        "int",
        None,
        "Sequences per forward/backward pass (gradient accumulation; still one optimizer step "
        "per P x K rollouts, which it must divide); default all P x K at once.",
        metavar="N",
    )
    gradient_checkpointing: bool = _setting(
        "bool",
        True,
        "Recompute activations in the backward pass (less memory, ~30% more compute).",
        flag="--gradient-checkpointing/--no-gradient-checkpointing",
    )
    seed: int = _setting(
        "int",
        0,
        "Run seed: TRL's data order and initialisation, and every rollout's sampling seed "
        "(derived from it, the step and the rollout's place in its group).",
        metavar="N",
    )
    lora: int = _setting(
        "int",
        0,
        "LoRA rank (PEFT adapters on every linear layer, alpha = 2 x rank); 0 trains every weight.",
        metavar="RANK",
    )
    eval_every: int = _setting(
        "int",
        0,
        "Run the eval split every N steps; it always runs before step 1 and after the last "
        "(0: only then).",
        metavar="N",
    )
    eval_examples: int | None = _setting(
        "int", None, "Evaluate on the first N eval examples (default all).", metavar="N"
    )
    eval_group_size: int = _setting("int", 4, "Rollouts per eval example.", metavar="K")
    eval_temperature: float | None = _setting(
        "float",
        None,
        "Sampling temperature of the evaluations (0: greedy); default --temperature.",
        metavar="T",
    )
    save_every: int = _setting(
        "int",
        0,
        "Write checkpoints/step-N every N steps; the last step is always saved (0: only it).",
        metavar="N",
    )
    save_total_limit: int | None = _setting(
        "int",
        None,
        "Keep only the newest N checkpoints (older step-N directories are deleted); default all.",
        metavar="N",
    )
    resume: bool = _setting(
        "bool", False, "Continue the run in --output-dir from its last checkpoint."
    )
    force: bool = _setting(
        "bool",
        False,
        "Train even where a check refuses the run (an environment offering tools to a "
        "model whose chat template drops them).",
    )
    report_to: tuple[str, ...] = _setting(
        "choices",
        (),
        "Experiment trackers TRL logs to (repeatable); default none.",
        metavar="TRACKER",
        choices=REPORT_TO,
    )
    base_url: str | None = _setting(
        "str",
        None,
        "A vLLM server started with trl vllm-serve (http://HOST:PORT/v1): rollouts sample "
        "from it and TRL syncs the weights to it after every step (needs a GPU and vllm). "
        "Default: an embedded sampler serving the live weights.",
        metavar="URL",
    )
    model_name: str | None = _setting(
        "str",
        None,
        "Model name sent with every request (default: policy for the embedded sampler, "
        "MODEL with --base-url).",
        metavar="NAME",
    )
    min_token_coverage: float = _setting(
        "float",
        0.95,
        "Stop the run when a step's trainable rollouts put less than this share of their "
        "sampled tokens into training samples (token_coverage in metrics.jsonl; 0: never).",
        metavar="SHARE",
    )
    torch_threads: int = _setting(
        "int",
        1,
        "torch CPU threads (1 ran ~10x faster than 2 on a shared 2-core machine; raise it "
        "on an idle many-core one).",
        metavar="N",
    )
    num_processes: int = _setting(
        "int",
        1,
        "Data-parallel processes (one per GPU; gloo on CPU): benchmax train launches them with "
        "accelerate. Each runs whole groups of --prompts-per-step / N prompts; rank 0 writes "
        "the run directory. Under accelerate launch or torchrun the launcher's count is used.",
        metavar="N",
    )
    accelerate_config: Path | None = _setting(  # noqa: RUF009  # a Path is immutable
        "path",
        None,
        "An accelerate config file (accelerate config) for the --num-processes launch, e.g. "
        "DeepSpeed ZeRO or FSDP; sharded configs need --base-url (the embedded sampler "
        "cannot sample a sharded model).",
        metavar="FILE",
    )

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.accelerate_config is not None:
            accelerate: object = self.accelerate_config
            if not isinstance(accelerate, str | Path) or not str(accelerate).strip():
                raise ConfigError("accelerate_config", "must be a file path")
            set_(self, "accelerate_config", Path(accelerate))
        for name in ("data", "output_dir"):
            value = getattr(self, name)
            if isinstance(value, str):
                value = Path(value)
            if not isinstance(value, Path) or not str(value).strip():
                raise ConfigError(name, "must be a directory path")
            set_(self, name, value)
        if str(self.output_dir) == ".":
            raise ConfigError("output_dir", "is required: the run directory to write")
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model", "is required: a model directory, built-in name or hub id")
        for name in ("target", "base_url", "model_name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(name, "must be a non-empty string")
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            raise ConfigError("base_url", f"must be an http(s) URL, got {self.base_url!r}")
        _check_mapping(self, "env_args", values=None)
        _check_mapping(self, "auth", values=str)
        minimums = {
            "steps": 1,
            "group_size": 2,
            "prompts_per_step": 1,
            "max_tokens": 1,
            "lora": 0,
            "eval_every": 0,
            "eval_group_size": 1,
            "save_every": 0,
            "torch_threads": 1,
            "num_processes": 1,
            "warmup_steps": 0,
        }
        for name, minimum in minimums.items():
            if not is_int_at_least(getattr(self, name), minimum):
                value = getattr(self, name)
                raise ConfigError(name, f"must be an integer >= {minimum}, got {value!r}")
        if self.prompts_per_step % self.num_processes:
            raise ConfigError(
                "num_processes",
                f"must divide prompts_per_step ({self.prompts_per_step}): each process runs "
                f"whole groups, got {self.num_processes}",
            )
        for name in (
            "max_examples",
            "eval_examples",
            "max_sequence_tokens",
            "micro_batch_size",
            "save_total_limit",
        ):
            value = getattr(self, name)
            if value is not None and not is_int_at_least(value, 1):
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError("seed", f"must be an integer, got {self.seed!r}")
        _check_number(self, "learning_rate", low=0.0, low_open=True)
        _check_number(self, "beta", low=0.0)
        _check_number(self, "temperature", low=0.0, low_open=True)
        _check_number(self, "top_p", low=0.0, low_open=True, high=1.0)
        _check_number(self, "min_token_coverage", low=0.0, high=1.0)
        _check_number(self, "weight_decay", low=0.0)
        _check_number(self, "max_grad_norm", low=0.0)
        _check_number(self, "epsilon", low=0.0, low_open=True)
        for name in ("epsilon_high", "eval_temperature"):
            if getattr(self, name) is not None:
                _check_number(self, name, low=0.0, low_open=name == "epsilon_high")
        for name, choices in (
            ("loss", LOSS_TYPES),
            ("lr_schedule", LR_SCHEDULES),
            ("scale_rewards", SCALE_REWARDS),
            ("dtype", DTYPES),
        ):
            value = getattr(self, name)
            if value not in choices:
                raise ConfigError(name, f"must be one of {', '.join(choices)}, got {value!r}")
        if not isinstance(self.gradient_checkpointing, bool):
            raise ConfigError("gradient_checkpointing", "must be true or false")
        batch = self.process_batch_size
        if self.micro_batch_size is not None and batch % self.micro_batch_size:
            raise ConfigError(
                "micro_batch_size",
                f"must divide the {batch} rollouts of a step each process trains "
                f"(prompts_per_step x group_size / num_processes), got {self.micro_batch_size}",
            )
        if self.max_sequence_tokens is not None and self.base_url is not None:
            raise ConfigError(
                "max_sequence_tokens",
                "applies to the embedded sampler only: with base_url start the server with "
                "vLLM's --max-model-len N instead",
            )
        if not isinstance(self.resume, bool):
            raise ConfigError("resume", "must be true or false")
        report: object = self.report_to
        if isinstance(report, str) or not isinstance(report, tuple | list):
            raise ConfigError("report_to", "must be a list of tracker names")
        for tracker in report:
            if tracker not in REPORT_TO:
                raise ConfigError("report_to", f"must name {', '.join(REPORT_TO)}, got {tracker!r}")
        set_(self, "report_to", tuple(dict.fromkeys(report)))

    @property
    def advantage_scaling(self) -> Literal["group", "batch", "none"]:
        """TRL's ``scale_rewards`` for this run (``scale_rewards`` with ``auto`` resolved:
        ``none`` for ``dr_grpo``, else ``group``)."""
        if self.scale_rewards == "batch":
            return "batch"
        if self.scale_rewards == "none" or (
            self.scale_rewards == "auto" and self.loss == "dr_grpo"
        ):
            return "none"
        return "group"

    @property
    def process_batch_size(self) -> int:
        """Rollouts each process trains per step: ``P x K / num_processes``."""
        return self.prompts_per_step * self.group_size // self.num_processes

    @property
    def accumulation_steps(self) -> int:
        """Micro-batches per optimizer step on each process (``P x K / N / micro_batch_size``;
        1 without one)."""
        batch = self.process_batch_size
        return batch // (self.micro_batch_size or batch)

    @property
    def served_model(self) -> str:
        """The model name requests carry (``model_name``, else ``policy`` or ``model``)."""
        if self.model_name is not None:
            return self.model_name
        return self.model if self.base_url is not None else "policy"


def _check_mapping(config: TrainConfig, name: str, *, values: type | None) -> None:
    value = getattr(config, name)
    if not isinstance(value, Mapping):
        raise ConfigError(name, "must be a table of names to values")
    for key, item in value.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ConfigError(name, f"key {key!r} is not a Python name")
        if values is not None and (not isinstance(item, values) or not item):
            raise ConfigError(name, f"{key} must name an environment variable")
    object.__setattr__(config, name, dict(value))


def _check_number(
    config: TrainConfig,
    name: str,
    *,
    low: float,
    low_open: bool = False,
    high: float | None = None,
) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(name, f"must be a finite number, got {value!r}")
    if value < low or (low_open and value == low) or (high is not None and value > high):
        bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if high else "")
        raise ConfigError(name, f"must be {bound}, got {value!r}")
    object.__setattr__(config, name, float(value))


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of :class:`TrainConfig` as the command line and the config file see it."""

    name: str
    kind: Kind
    default: Any
    doc: str
    flag: str
    """``--steps``; empty for ``target`` (the command's positional TARGET)."""
    short: str | None
    metavar: str | None
    choices: tuple[str, ...]


def config_settings() -> tuple[Setting, ...]:
    """Every field of :class:`TrainConfig`, in declaration order."""
    settings = []
    for item in dataclasses.fields(TrainConfig):
        meta = item.metadata
        default = item.default
        if item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        flag = meta["flag"] if meta["flag"] is not None else "--" + item.name.replace("_", "-")
        settings.append(
            Setting(
                name=item.name,
                kind=meta["kind"],
                default=default,
                doc=meta["doc"],
                flag=flag,
                short=meta["short"],
                metavar=meta["metavar"],
                choices=meta["choices"],
            )
        )
    return tuple(settings)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The settings a TOML config file holds, as :class:`TrainConfig` keyword values.

    Keys are the field names (``group_size = 8``; ``[env_args]`` and ``[auth]`` tables).
    Raises :class:`ConfigError` naming the key and the file for an unknown key or a value
    of the wrong type, ``OSError``/``ValueError`` (with the file named) when it cannot be
    read or is not TOML. Values are checked fully when the config is built.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise OSError(f"cannot read config file {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"config file {path} is not valid TOML: {error}") from None
    settings = {setting.name: setting for setting in config_settings()}
    values: dict[str, Any] = {}
    for key, value in data.items():
        setting = settings.get(key)
        if setting is None:
            close = [name for name in settings if key.replace("-", "_") == name]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(key, f"unknown key in {path}{hint}")
        try:
            values[key] = _from_toml(setting, value)
        except ConfigError as error:
            raise ConfigError(key, f"{error.reason} (in {path})") from None
    return values


def _from_toml(setting: Setting, value: object) -> object:
    kind = setting.kind
    if kind == "path":
        if not isinstance(value, str):
            raise ConfigError(setting.name, f"must be a path string, got {value!r}")
        return Path(value)
    if kind in ("pairs", "table"):
        if not isinstance(value, dict):
            raise ConfigError(setting.name, "must be a table")
        return value
    if kind == "choices":
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise ConfigError(setting.name, "must be a list of names")
        return tuple(value)
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    expected = {"str": str, "choice": str, "int": int, "float": float, "bool": bool}[kind]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(setting.name, f"must be {_KIND_NAMES[kind]}, got {value!r}")
    return value


_KIND_NAMES = {
    "str": "a string",
    "choice": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
}


def config_toml(config: TrainConfig) -> str:
    """``config`` as a TOML config file (every key; unset optional keys left out),
    readable by :func:`read_config_file`."""
    import tomli_w

    data: dict[str, object] = {}
    for setting in config_settings():
        value = getattr(config, setting.name)
        if value is None or (isinstance(value, Mapping) and not value):
            continue
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = _toml_safe(dict(value))
        data[setting.name] = value
    return tomli_w.dumps(data)


def _toml_safe(value: object) -> object:
    """JSON-shaped constructor arguments as TOML can hold them (TOML has no null)."""
    if value is None:
        raise ConfigError("env_args", "a null value cannot be written to config.toml")
    if isinstance(value, dict):
        return {str(k): _toml_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_toml_safe(v) for v in value]
    return value


RESUMABLE_CHANGES = frozenset(
    {
        "steps",
        "eval_every",
        "save_every",
        "save_total_limit",
        "resume",
        "force",
        "report_to",
        "torch_threads",
        "target",
        "min_token_coverage",
    }
)
"""Settings a resumed run may change (what it trains on, and how, stays the same)."""


def config_differences(saved: TrainConfig, current: TrainConfig) -> list[str]:
    """``key: was X, now Y`` for every setting outside :data:`RESUMABLE_CHANGES` that
    differs between the saved run and this one (``[]``: it can be resumed)."""
    differences = []
    for setting in config_settings():
        if setting.name in RESUMABLE_CHANGES:
            continue
        old, new = getattr(saved, setting.name), getattr(current, setting.name)
        if isinstance(old, Path) and isinstance(new, Path):
            old, new = old.absolute(), new.absolute()
        if old != new:
            differences.append(f"{setting.name} was {old!r}, now {new!r}")
    return differences
