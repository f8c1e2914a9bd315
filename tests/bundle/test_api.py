"""The import surface and signatures of ``benchmax.bundle``."""

from __future__ import annotations

import inspect
import pickle
import pickletools

import benchmax.bundle

CONTRACT_NAMES = [
    "Bundle",
    "BundleMetadata",
    "BundlingError",
    "IncompatibleBenchmaxError",
    "IncompatiblePythonError",
    "IncompatibleRuntimeError",
    "bundle_digest",
    "dump_bundle",
    "load_bundle",
    "unregistered_local_refs",
    "validate_bundle_compatibility",
    "_benchmax_version",
    "_get_source",
    "_project_root_for_module",
    "_module_is_project_local",
    "save_bundle",
    "read_bundle",
]
ADDED_NAMES = ["BundleError"]
"""Names added beyond the contract (``BundleError``: the package's base, issue 35)."""


def test_every_contract_name_imports_from_the_package() -> None:
    for name in CONTRACT_NAMES:
        assert callable(getattr(benchmax.bundle, name)), name
    assert set(benchmax.bundle.__all__) <= {*CONTRACT_NAMES, *ADDED_NAMES}


def test_signatures() -> None:
    kinds = inspect.Parameter
    dump = inspect.signature(benchmax.bundle.dump_bundle).parameters
    assert list(dump) == [
        "env_class",
        "constructor_args",
        "pip_dependencies",
        "local_modules",
        "env_class_source",
        "auto_local_modules",
    ]
    assert dump["env_class"].kind is kinds.POSITIONAL_OR_KEYWORD
    assert all(p.kind is kinds.KEYWORD_ONLY for n, p in dump.items() if n != "env_class")
    assert [p.default for n, p in dump.items() if n != "env_class"] == [
        None,
        None,
        None,
        None,
        True,
    ]
    load = inspect.signature(benchmax.bundle.load_bundle).parameters
    assert list(load) == ["bundle", "instantiate"]
    assert load["instantiate"].kind is kinds.KEYWORD_ONLY and load["instantiate"].default is True


def test_contract_names_are_defined_in_benchmax_bundle() -> None:
    # Pickles refer to classes and functions by defining module; the private submodules that
    # implement them are not part of the contract.
    for name in CONTRACT_NAMES:
        assert getattr(benchmax.bundle, name).__module__ == "benchmax.bundle", name


def test_pickles_of_bundle_objects_refer_to_the_public_module() -> None:
    metadata = benchmax.bundle.BundleMetadata((), "3.12", "0.2.0", None)
    for value in (
        benchmax.bundle.Bundle(b"", metadata),
        benchmax.bundle.BundlingError("message"),
        benchmax.bundle.IncompatibleBenchmaxError("message"),
    ):
        data = pickle.dumps(value, protocol=0)
        globals_used = {arg for op, arg, _ in pickletools.genops(data) if op.name == "GLOBAL"}
        assert f"benchmax.bundle {type(value).__name__}" in globals_used
        assert not any("._" in name.split()[0] for name in globals_used)
        restored = pickle.loads(data)
        assert type(restored) is type(value) and repr(restored) == repr(value)


def test_seam_signatures_are_annotated_as_documented() -> None:
    seams = {
        "_benchmax_version": "() -> 'str'",
        "_get_source": ("(env_class: 'type[Environment[Any, RolloutAttempt]]') -> 'str | None'"),
        "_project_root_for_module": "(module: 'ModuleType') -> 'Path | None'",
        "_module_is_project_local": (
            "(module_name: 'str', project_roots: 'tuple[Path, ...]') -> 'bool'"
        ),
        "unregistered_local_refs": "(pickled: 'bytes') -> 'list[str]'",
        "bundle_digest": "(bundle: 'Bundle') -> 'str'",
        "validate_bundle_compatibility": "(metadata: 'BundleMetadata') -> 'None'",
    }
    for name, signature in seams.items():
        assert str(inspect.signature(getattr(benchmax.bundle, name))) == signature, name
