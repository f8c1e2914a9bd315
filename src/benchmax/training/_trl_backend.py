"""The TRL side of ``benchmax train``: the GRPOConfig, the trainer and its callback.

Imported only by ``train`` (it imports torch, transformers and TRL). One rollout_func call
per optimizer step: a step's generation batch is ``prompts_per_step`` distinct rows, each
repeated ``group_size`` times (TRL's ``RepeatSampler``); with ``num_processes`` N each process
gets ``prompts_per_step / N`` whole groups of the step. With ``micro_batch_size`` M, TRL's
``per_device_train_batch_size`` is M and ``gradient_accumulation_steps`` =
``steps_per_generation`` = (P x K / N) / M, so TRL generates once per step, splits each
process's batch into micro-batches and steps the optimizer once after the last;
``num_iterations=1``, so step N trains on exactly the rollouts sampled for it (and TRL
needs no "old" logprobs: the weights do not change within a step).
As each epoch begins, the callback sets the sampler's shuffle to that epoch's
(``_epoch_order``), so a resumed run replays the data order of an uninterrupted one across
epoch boundaries too.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import torch
from accelerate import PartialState
from transformers import PrinterCallback, TrainerCallback
from transformers.utils import logging as transformers_logging
from trl import GRPOConfig

from benchmax.training._branching_trainer import BranchingGRPOTrainer
from benchmax.training._config import TrainConfig
from benchmax.training._epoch_order import epoch_index, replay_epoch_order
from benchmax.training._logprob_gap import LogprobGapProbe
from benchmax.training._precision import autocast_for

__all__ = ["TrainingHooks", "grpo_config", "lora_config", "make_trainer"]

transformers_logging.disable_progress_bar()  # "Writing model shards" bars at every save
# TRL 1.16 calls transformers 5's old gradient-checkpointing names on every generation; the
# FutureWarnings say nothing a benchmax user can act on (the option is
# --gradient-checkpointing, which passes the new name).
warnings.filterwarnings(
    "ignore",
    message=r"`(is_gradient_checkpointing|gradient_checkpointing_(enable|disable))` is deprecated",
    category=FutureWarning,
)
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is what benchmax uses


class TrainingHooks(Protocol):
    """What the trainer tells the run (``benchmax.training._trainer``)."""

    def step_begun(self, step: int) -> None: ...

    def step_ended(self, step: int) -> tuple[bool, bool]:
        """After the optimizer step: ``(save a checkpoint, stop training)``."""
        ...

    def tracker_logs(self, step: int) -> Mapping[str, float]: ...

    def logged(self, step: int, logs: Mapping[str, object]) -> None: ...

    def saved(self, step: int, checkpoint: Path) -> None: ...


def grpo_config(config: TrainConfig, checkpoints: Path) -> GRPOConfig:
    """TRL's configuration for ``config`` (checkpoints are written under ``checkpoints``).

    ``TrainingError`` when ``config.dtype`` cannot run here (``autocast_for``)."""
    on_gpu = torch.cuda.is_available()
    autocast = autocast_for(
        config.dtype, cuda=on_gpu, cuda_bf16=on_gpu and torch.cuda.is_bf16_supported()
    )
    # Each process trains its share of whole groups (prompts_per_step is per step, not per
    # process; TRL's RepeatSampler deals the step's groups out in order).
    micro = config.micro_batch_size or config.process_batch_size
    schedule = config.lr_schedule
    if schedule == "constant" and config.warmup_steps:
        schedule = "constant_with_warmup"
    server: dict[str, object] = {}
    if config.base_url is not None:
        root = config.base_url.rstrip("/")
        server = {
            "use_vllm": True,
            "vllm_mode": "server",
            "vllm_server_base_url": root.removesuffix("/v1"),
        }
    return GRPOConfig(
        output_dir=str(checkpoints),
        per_device_train_batch_size=micro,
        num_generations=config.group_size,
        gradient_accumulation_steps=config.accumulation_steps,
        steps_per_generation=config.accumulation_steps,
        num_iterations=1,
        max_steps=config.steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type=schedule,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        beta=config.beta,
        loss_type=config.loss,
        scale_rewards=config.advantage_scaling,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        activation_checkpointing=config.gradient_checkpointing,  # transformers 5: the new name
        temperature=config.temperature,
        top_p=config.top_p,
        max_completion_length=config.max_tokens,
        logging_steps=1,
        report_to=list(config.report_to) or "none",
        use_cpu=not on_gpu,
        bf16=autocast == "bf16",
        fp16=autocast == "fp16",
        save_strategy="no",  # the run decides when to save (TrainingHooks.step_ended)
        seed=config.seed,
        disable_tqdm=True,
        log_level="warning",
        **server,
    )


def lora_config(config: TrainConfig) -> Any:
    """PEFT's ``LoraConfig`` for ``--lora RANK`` (every linear layer, alpha = 2 x rank), or
    ``None`` without it."""
    if not config.lora:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora,
        lora_alpha=2 * config.lora,
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


class _Callback(TrainerCallback):  # type: ignore[misc]  # transformers is untyped here
    def __init__(self, hooks: TrainingHooks) -> None:
        self.hooks = hooks

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Each epoch's data order as an uninterrupted run draws it, resumed or not.
        loader = kwargs.get("train_dataloader")
        if loader is not None:
            epoch = epoch_index(
                int(state.global_step), len(loader), int(args.gradient_accumulation_steps)
            )
            replay_epoch_order(loader, epoch)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.hooks.step_begun(state.global_step + 1)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        save, stop = self.hooks.step_ended(state.global_step)
        if save:
            control.should_save = True
        if stop:
            control.should_training_stop = True

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if logs and "loss" in logs:
            self.hooks.logged(state.global_step, logs)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        written = Path(args.output_dir) / f"checkpoint-{step}"
        target = Path(args.output_dir) / f"step-{step}"
        # Every process has written its part (rank 0 the weights, each its RNG state)
        # before rank 0 renames the directory; the others wait for the rename.
        state_of_processes = PartialState()
        state_of_processes.wait_for_everyone()
        if state.is_world_process_zero and written.is_dir():
            if target.exists():
                shutil.rmtree(target)
            written.rename(target)
        state_of_processes.wait_for_everyone()
        if target.is_dir():
            self.hooks.saved(step, target)


def make_trainer(
    config: TrainConfig,
    *,
    model: Any,
    tokenizer: Any,
    dataset_rows: list[dict[str, object]],
    reward: Callable[..., Any],
    rollout_func: Callable[..., Any],
    hooks: TrainingHooks,
    checkpoints: Path,
) -> Any:
    """A ``GRPOTrainer`` (a ``BranchingGRPOTrainer``: every branch of a rollout trains,
    with the rollout's advantage) wired to ``hooks``: its log records carry
    ``hooks.tracker_logs`` (so ``report_to`` trackers get the per-key rewards and
    termination reasons)."""
    from datasets import Dataset

    probe = LogprobGapProbe()

    class Trainer(BranchingGRPOTrainer):
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            watch = self.model.training  # training micro-batches only
            with probe.watching(model, inputs) if watch else contextlib.nullcontext():
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if "loss" in logs:
                logs.update(probe.take())
                logs.update(hooks.tracker_logs(self.state.global_step))
            super().log(logs, start_time)

    trainer = Trainer(
        model=model,
        processing_class=tokenizer,
        args=grpo_config(config, checkpoints),
        train_dataset=Dataset.from_list(dataset_rows),
        reward_funcs=[reward],
        rollout_func=rollout_func,
        peft_config=lora_config(config),
        callbacks=[_Callback(hooks)],
    )
    trainer.remove_callback(PrinterCallback)  # the run reports its own progress
    return trainer
