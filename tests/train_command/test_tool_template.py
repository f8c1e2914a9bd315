"""No silent nothing: an environment offering tools to a model whose chat template drops
them is refused before a run directory is written (``--force`` goes on), and the built-in
SmolLM2 is loaded with a template that renders tools. Run with
``uv run --group trl pytest -m train``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")

from examples.calculator.env import CalculatorEnv
from tests.train_command.test_benchmax_train import benchmax_train
from tests.trl_training.tiny_policy import build_model, build_tokenizer

from benchmax.training import BUILTIN_MODELS
from benchmax.training._tool_template import dropped_tools, offered_tools

pytestmark = pytest.mark.train

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator"
NO_TOOLS_TEMPLATE = (  # ChatML that ignores tools, as SmolLM2's own template does
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_a_template_is_checked_by_rendering_the_tool_names() -> None:
    tools = offered_tools(CalculatorEnv())
    tokenizer = build_tokenizer()  # lists the tools in the system turn
    assert dropped_tools(tokenizer, tools) == []
    tokenizer.chat_template = NO_TOOLS_TEMPLATE
    assert dropped_tools(tokenizer, tools) == ["add", "multiply"]
    shipped = BUILTIN_MODELS["smollm2-135m-instruct"].chat_template_path
    assert shipped is not None
    tokenizer.chat_template = shipped.read_text()
    assert dropped_tools(tokenizer, tools) == []


def test_train_refuses_tools_the_template_drops(tmp_path: Path) -> None:
    model = tmp_path / "model"
    tokenizer = build_tokenizer()
    tokenizer.chat_template = NO_TOOLS_TEMPLATE
    build_model(tokenizer).save_pretrained(model)
    tokenizer.save_pretrained(model)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "eval"):
        shutil.copy(CALCULATOR / "eval.jsonl", data / f"{split}.jsonl")
    output = tmp_path / "run"
    args = [
        f"{CALCULATOR}/env.py:CalculatorEnv",
        "--data", str(data),
        "--model", str(model),
        "--output-dir", str(output),
        "-k", "2",
        "--prompts-per-step", "1",
    ]  # fmt: skip
    refused = benchmax_train(*args)
    assert refused.returncode == 3, refused.stderr[-3000:]
    message = " ".join(refused.stderr.split())
    assert "offers tools (add, multiply)" in message and "does not render" in message
    assert "pass --force to train anyway" in message
    assert not output.exists()
