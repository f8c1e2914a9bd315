"""New environment projects that run at once: ``benchmax init DIR [--template NAME]``.

``create_project(Path("my-env"), "qa")`` writes ``env.py``, ``data/train.jsonl`` and
``data/eval.jsonl``, a mock policy (``policy.py``), tests, a README with the run /
validate / view commands and a ``pyproject.toml`` depending on this benchmax (and
declaring the environment under its project name in the ``benchmax.environments``
entry points, so ``benchmax run NAME`` finds it once installed): a path
dependency on the source checkout it runs from (found with ``benchmax_source``; written
relative to the project, so no absolute path of the machine is in any file), so
``uv run`` inside resolves no other distribution of that name, else the installed
version exactly. The templates are package data (``templates/<name>/``, files ending in
``.tmpl``; ``templates/common/`` holds what every project gets).
"""

from __future__ import annotations

import os
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

import benchmax
from benchmax.errors import BenchmaxError

__all__ = [
    "TEMPLATES",
    "ScaffoldError",
    "Template",
    "benchmax_requirement",
    "benchmax_source",
    "create_project",
]


class ScaffoldError(BenchmaxError, ValueError):
    """The project cannot be created here (the message says why)."""


@dataclass(frozen=True, slots=True)
class Template:
    """One project template: its environment ``target``, mock ``policy`` and the
    ``--env-arg`` options its commands need with the mock (``env_args``) or a real model."""

    name: str
    summary: str
    class_name: str
    policy: str
    env_args: str = ""
    real_env_args: str = ""
    uses_tools: bool = False
    uses_judge: bool = False

    @property
    def target(self) -> str:
        return f"env.py:{self.class_name}"


TEMPLATES: Final[dict[str, Template]] = {
    "qa": Template(
        "qa",
        "short-answer questions, scored by exact match of the tagged answer.",
        "QAEnv",
        "policy.py:reply",
    ),
    "tools": Template(
        "tools",
        "questions answered by looking facts up with a tool over several turns.",
        "ToolsEnv",
        "policy.py:reply",
        uses_tools=True,
    ),
    "judge": Template(
        "judge",
        "open answers graded by a judge model against rubrics.",
        "JudgeEnv",
        "policy.py:respond",
        env_args=" --env-arg judge_base_url=@mock",
        real_env_args=(
            " --env-arg judge_base_url=https://judge.example/v1 --env-arg judge_model=JUDGE"
            " --auth judge=JUDGE_API_KEY"
        ),
        uses_judge=True,
    ),
}
"""The templates by name: ``qa`` (the default), ``tools`` and ``judge``."""

_SUFFIX = ".tmpl"
_SPECIAL_NAMES = {"gitignore": ".gitignore", "python-version": ".python-version"}
_JUDGE_NOTE = """

The judge is a second model: `--env-arg judge_base_url=URL` and `--env-arg judge_model=NAME`
point at it, and `--auth judge=VARIABLE` gives it a key from an environment variable (the
environment holds only the name `judge`, through `InjectedAuth`). With the embedded mock,
`@mock` stands for the mock's own URL and the mock policy plays the judge too."""


def benchmax_source() -> Path | None:
    """The root of the source checkout this benchmax runs from, or ``None`` when it is
    an installed distribution: the package sits in ``ROOT/src/benchmax`` beside a
    ``ROOT/pyproject.toml`` whose project is ``benchmax``."""
    package = Path(benchmax.__file__).resolve().parent
    root = package.parent.parent
    pyproject = root / "pyproject.toml"
    if package.parent.name != "src" or not pyproject.is_file():
        return None
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == "benchmax" else None


def benchmax_requirement() -> tuple[str, Path | None]:
    """``(requirement, source)``: ``("benchmax", checkout)`` from a source checkout,
    else ``("benchmax==VERSION", None)`` for the installed version."""
    source = benchmax_source()
    if source is not None:
        return "benchmax", source
    return f"benchmax=={benchmax.__version__}", None


def _project_name(directory: Path) -> str:
    """The directory's name as a distribution name: accents dropped (``ünï`` → ``uni``),
    other characters outside ``[A-Za-z0-9._-]`` as ``-``, lower case."""
    plain = unicodedata.normalize("NFKD", directory.resolve().name)
    plain = plain.encode("ascii", "ignore").decode("ascii")
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", plain).strip("-._").lower()
    return name or "benchmax-env"


def _pyproject(name: str, template: Template, directory: Path) -> str:
    requirement, source = benchmax_requirement()
    lines = [
        "[project]",
        f'name = "{name}"',
        'version = "0.1.0"',
        'description = "A benchmax environment"',
        'requires-python = "==3.12.*"',
        f'dependencies = ["{requirement}"]',
        "",
        "# The environment's installed name: `benchmax run " + name + " --data data`.",
        '[project.entry-points."benchmax.environments"]',
        f'"{name}" = "env:{template.class_name}"',
        "",
        "[dependency-groups]",
        'dev = ["pytest>=8.4", "pytest-asyncio>=1.2"]',
        "",
        "[build-system]",
        'requires = ["hatchling"]',
        'build-backend = "hatchling.build"',
        "",
        "# The wheel holds the environment module; rename env.py (and the entry point above)",
        "# to a name of its own before publishing it beside other environments.",
        "[tool.hatch.build.targets.wheel]",
        'only-include = ["env.py"]',
    ]
    if source is not None:
        # Relative to the project: no absolute path of this machine goes into it.
        try:
            relative = Path(os.path.relpath(source.resolve(), directory.resolve())).as_posix()
        except ValueError:  # another drive (Windows): no relative path exists
            relative = source.as_posix()
        path = relative.replace("\\", "\\\\").replace('"', '\\"')
        lines += [
            "",
            "# The benchmax source checkout that created this project (relative to it).",
            "[tool.uv.sources]",
            f'benchmax = {{ path = "{path}", editable = true }}',
        ]
    lines += [
        "",
        "[tool.pytest.ini_options]",
        'pythonpath = ["."]',
        'testpaths = ["tests"]',
        'asyncio_mode = "auto"',
        'asyncio_default_fixture_loop_scope = "function"',
        "",
    ]
    return "\n".join(lines)


def _render(text: str, template: Template, name: str) -> str:
    values = {
        "name": name,
        "summary": template.summary[:1].upper() + template.summary[1:],
        "class_name": template.class_name,
        "target": template.target,
        "policy": template.policy,
        "env_args": template.env_args,
        "real_env_args": template.real_env_args,
        "tools_line": "its tools, " if template.uses_tools else "",
        "judge_note": _JUDGE_NOTE if template.uses_judge else "",
    }
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def _files(folder: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.is_dir():
            found += _files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(_SUFFIX):
            stem = entry.name.removesuffix(_SUFFIX)
            found.append((prefix + _SPECIAL_NAMES.get(stem, stem), entry))
    return found


def create_project(directory: Path, template: str = "qa") -> list[Path]:
    """Write a new project of ``template`` into ``directory`` (created when missing) and
    return the files written, in order.

    Raises ``ScaffoldError`` for an unknown template, a ``directory`` that is a file or
    not empty, and ``OSError`` when a file cannot be written.
    """
    if template not in TEMPLATES:
        raise ScaffoldError(f"unknown template {template!r} (choose {', '.join(TEMPLATES)})")
    directory = Path(directory)
    if directory.exists():
        if not directory.is_dir():
            raise ScaffoldError(f"{directory} exists and is not a directory")
        if any(directory.iterdir()):
            raise ScaffoldError(
                f"{directory} is not empty: init writes only into a new or empty directory"
            )
    chosen = TEMPLATES[template]
    name = _project_name(directory)
    root = resources.files("benchmax.scaffold") / "templates"
    files = _files(root / "common") + _files(root / template)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for relative, source in files:
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            _render(source.read_text(encoding="utf-8"), chosen, name), encoding="utf-8"
        )
        written.append(target)
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(_pyproject(name, chosen, directory), encoding="utf-8")
    written.append(pyproject)
    return written
