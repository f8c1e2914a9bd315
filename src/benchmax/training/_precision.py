"""Which precision a ``benchmax train`` run trains in (``--dtype``), decided without torch.

The weights (the optimizer's master copy) are always loaded and updated in fp32, whatever
dtype the checkpoint was saved in: a bf16 checkpoint trained as bf16 weights loses most
small updates to rounding (at lr 1e-5 over 3 steps, 15% of the weights moved vs 100% in
fp32). ``bf16``/``fp16`` only add autocast to the forward and backward passes (TRL's,
i.e. transformers', ``bf16=True``/``fp16=True`` mixed precision).
"""

from __future__ import annotations

from typing import Literal

from benchmax.training._errors import TrainingError

__all__ = ["MASTER_DTYPE", "Autocast", "autocast_for"]

MASTER_DTYPE = "float32"
"""The dtype every model is loaded in (``from_pretrained(dtype=...)``)."""

type Autocast = Literal["fp32", "bf16", "fp16"]


def autocast_for(dtype: str, *, cuda: bool, cuda_bf16: bool) -> Autocast:
    """The autocast a run uses for ``--dtype dtype`` on this machine (``cuda``: a CUDA GPU
    is used; ``cuda_bf16``: it supports bf16). ``auto`` is ``bf16`` on a GPU that supports
    it, else ``fp32``; ``bf16`` also runs on a CPU (torch's CPU autocast); ``fp16`` needs
    a CUDA GPU. Raises :class:`TrainingError` for ``fp16`` without one, ``bf16`` on a GPU
    without bf16, or an unknown ``dtype``."""
    if dtype == "auto":
        return "bf16" if cuda and cuda_bf16 else "fp32"
    if dtype == "fp32":
        return "fp32"
    if dtype == "bf16":
        if cuda and not cuda_bf16:
            raise TrainingError("--dtype bf16: this GPU does not support bf16 (use fp16 or fp32)")
        return "bf16"
    if dtype == "fp16":
        if not cuda:
            raise TrainingError("--dtype fp16 needs a CUDA GPU (use bf16 or fp32 on a CPU)")
        return "fp16"
    raise TrainingError(f"unknown --dtype {dtype!r} (use auto, fp32, bf16 or fp16)")
