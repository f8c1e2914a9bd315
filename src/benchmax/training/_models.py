"""Stand-in for the sampler branch's model loading (same interface).

``resolve_model(spec)`` gives a local Hugging Face directory as it is, else the spec
unchanged (a hub id); ``load_model(spec)`` loads it with ``AutoModelForCausalLM`` and
``AutoTokenizer``. The sampler branch replaces this file (built-in names, GGUF conversion).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["load_model", "resolve_model"]


def resolve_model(spec: str, *, cache_dir: str | Path | None = None) -> str:
    """A local directory (made absolute) or the spec as given (a hub id)."""
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.is_dir() else spec


def load_model(
    spec: str, *, cache_dir: str | Path | None = None, dtype: Any = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``spec`` (``from_pretrained``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = resolve_model(spec, cache_dir=cache_dir)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(where)
    return model, tokenizer
