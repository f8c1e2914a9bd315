"""resolve_model without torch: local directories, built-in names, Hub ids and bad specs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmax.training import BUILTIN_MODELS, resolve_model
from benchmax.training._models import BuiltinModel, _cached, model_cache_dir


def test_a_model_or_adapter_directory_resolves_to_its_path(tmp_path: Path) -> None:
    model = tmp_path / "checkpoints" / "step-3"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "x"}))
    assert resolve_model(str(model)) == str(model.resolve())
    assert resolve_model(str(adapter)) == str(adapter.resolve())


def test_hub_ids_are_passed_through() -> None:
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    )


def test_a_bare_word_is_never_a_hub_id_and_a_typo_gets_did_you_mean() -> None:
    builtin = "model 'smollm2-135m-instrct' is not a local directory, a built-in name"
    with pytest.raises(ValueError, match=re.escape(builtin)) as raised:
        resolve_model("smollm2-135m-instrct")
    assert str(raised.value).endswith("did you mean 'smollm2-135m-instruct'?")
    with pytest.raises(ValueError, match="Hugging Face Hub id") as raised:
        resolve_model("gpt2")
    assert "did you mean" not in str(raised.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "non-empty string"),
        ("   ", "non-empty string"),
        ("./no-such-dir", "'./no-such-dir' does not exist"),
        ("/no/such/checkpoint", "does not exist"),
        ("runs/a/checkpoints", "does not exist"),
        ("not a model!", "not a local directory, a built-in name (smollm2-135m-instruct)"),
    ],
)
def test_bad_specs_are_refused_with_what_was_wrong(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        resolve_model(spec)


def test_directories_that_are_no_model_are_refused(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="is a file"):
        resolve_model(str(tmp_path / "weights.bin"))
    with pytest.raises(ValueError, match=r"neither config\.json .* nor adapter_config\.json"):
        resolve_model(str(tmp_path))


def test_a_converted_builtin_model_is_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCHMAX_CACHE_DIR", str(tmp_path / "root"))
    assert model_cache_dir() == tmp_path / "root" / "models"
    assert model_cache_dir(tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.delenv("BENCHMAX_CACHE_DIR")
    assert model_cache_dir() == Path.home() / ".cache" / "benchmax" / "models"
    # A complete conversion (its marker written last) is used as is, nothing converted.
    done = tmp_path / "cache" / "smollm2-135m-instruct"
    done.mkdir(parents=True)
    (done / "benchmax-model.json").write_text("{}")
    assert resolve_model("smollm2-135m-instruct", cache_dir=tmp_path / "cache") == str(done)
    assert set(BUILTIN_MODELS) == {"smollm2-135m-instruct"}


def test_a_builtin_model_whose_package_is_missing_says_what_to_install(tmp_path: Path) -> None:
    missing = BuiltinModel(
        name="nothing",
        description="a model from a package that is not installed",
        package="benchmax_no_such_package",
        gguf_file="none.gguf",
        requirement="benchmax-no-such-package",
    )
    with pytest.raises(ModuleNotFoundError, match="install benchmax-no-such-package"):
        _cached(missing, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-made
