"""Packaging: what pyproject.toml declares, and the one-line install hint of a missing optional extra."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

import dictembed
from dictembed.extras import EXTRAS, MissingExtraError, require

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as a package
    tomllib = pytest.importorskip("tomli")

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
EXTRA_NAMES = ["plot", "gcide", "lexsub", "finetune", "onnx", "mteb", "serve", "zh", "experiments"]
OUTSIDE_ALL = ["openvino"]  # extras the code names that `all` leaves out (large wheels)


@pytest.fixture(scope="module")
def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]


def test_requires_python_is_3_10_without_an_upper_cap(project) -> None:
    spec = SpecifierSet(project["requires-python"])
    assert [(s.operator, s.version) for s in spec] == [(">=", "3.10")]
    assert all(version in spec for version in ["3.10", "3.11", "3.12", "3.13", "3.20", "4.0"])
    assert "3.9" not in spec


def test_torch_is_a_lower_bound_not_a_pin(project) -> None:
    requirements = {Requirement(dep).name: Requirement(dep) for dep in project["dependencies"]}
    assert "torch" in requirements
    assert not [s for s in requirements["torch"].specifier if s.operator in ("==", "===", "<", "<=", "~=")]
    assert not [dep for dep in project["dependencies"] if re.match(r"\s*torch\s*==", dep)]


def test_extras_are_declared(project) -> None:
    extras = project["optional-dependencies"]
    assert set(EXTRA_NAMES + ["all"]) <= set(extras)
    assert set(EXTRAS) == set(EXTRA_NAMES + OUTSIDE_ALL) <= set(extras)  # every extra the code names is installable
    (everything,) = extras["all"]
    assert set(Requirement(everything).extras) == set(EXTRA_NAMES) and Requirement(everything).name == "dictembed"


def test_console_script_and_version(project) -> None:
    assert project["scripts"]["dictembed"] == "dictembed.cli:main"
    assert project["version"] == dictembed.__version__


@pytest.mark.parametrize("extra", EXTRA_NAMES + OUTSIDE_ALL)
def test_require_names_the_pip_install_of_a_missing_extra(extra, monkeypatch) -> None:
    modules, _ = EXTRAS[extra]
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingExtraError, match=re.escape(f'pip install "dictembed[{extra}]"')) as raised:
        require(extra)
    assert "\n" not in str(raised.value)
