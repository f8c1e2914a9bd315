"""The import surface and signatures of ``benchmax.bundle``."""

from __future__ import annotations

import inspect

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


def test_every_contract_name_imports_from_the_package() -> None:
    for name in CONTRACT_NAMES:
        assert callable(getattr(benchmax.bundle, name)), name
    assert set(benchmax.bundle.__all__) <= set(CONTRACT_NAMES)


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
