"""``benchmax train`` with a typo in a built-in model's name: refused at once with "did
you mean", before anything is loaded or downloaded, and no run directory is left behind
(no torch needed: the refusal comes first)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from benchmax.cli import cli

ARITHMETIC = Path(__file__).resolve().parents[2] / "examples" / "arithmetic"


def test_a_builtin_name_with_a_typo_gets_did_you_mean_and_writes_nothing(
    tmp_path: Path,
) -> None:
    output = tmp_path / "run"
    args = [
        "train",
        f"{ARITHMETIC}/env.py:ArithmeticEnv",
        "--data", str(ARITHMETIC),
        "--model", "smollm2-135m-instrct",
        "--output-dir", str(output),
    ]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    assert "did you mean 'smollm2-135m-instruct'?" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not output.exists()
