"""Reproducible installs: bounded direct dependencies, a lock that satisfies them and is what
`make install` uses, and package data that exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _direct() -> list[Requirement]:
    project = PYPROJECT["project"]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    return [Requirement(r) for r in [*project["dependencies"], *extras]]


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.strip().partition("==")
            assert sep, f"constraints.txt pins exact versions: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def test_direct_dependencies_have_upper_bounds():
    """Every direct dependency is capped (`<`) or pinned (`==`)."""
    for req in _direct():
        assert any(s.operator in ("<", "==", "~=") for s in req.specifier), str(req)


def test_the_lock_pins_every_direct_dependency_within_its_range():
    """constraints.txt holds each direct dependency at a version pyproject allows."""
    pins = _locked()
    for req in _direct():
        version = pins.get(canonicalize_name(req.name))
        assert version is not None, f"{req.name} is not in constraints.txt"
        assert req.specifier.contains(version, prereleases=True), (str(req), version)


def test_make_install_uses_the_lock():
    """The Makefile's install (what CI runs through `make test`) applies constraints.txt."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    installs = re.findall(r"pip install[^\n]*-e '\.\[dev\]'", makefile)
    assert installs and all("-c constraints.txt" in line for line in installs)
    assert re.search(r"^\$\(STAMP\):.*constraints\.txt", makefile, re.MULTILINE)


def test_package_data_lists_only_files_that_exist():
    """Each package-data pattern matches at least one file of its package."""
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        folder = REPO.joinpath(*package.split("."))
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"{package}: {pattern} matches nothing"
