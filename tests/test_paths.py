"""Where the shared evaluation data is found."""

from __future__ import annotations

import pytest

from dictembed import paths
from dictembed.errors import DictEmbedError


@pytest.fixture()
def project(tmp_path, monkeypatch):
    """A project checkout at tmp/project (its package three levels down), the cwd elsewhere, no $DICTEMBED_DATA_DIR."""
    package = tmp_path / "project" / "src" / "dictembed"
    package.mkdir(parents=True)
    monkeypatch.setattr(paths, "__file__", str(package / "paths.py"))
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path


@pytest.mark.parametrize("marker", ["README.md", "sts", "senteval", "lexsub"])
def test_a_shared_data_folder_is_found_by_its_readme_or_a_set_folder(project, marker) -> None:
    """A folder fetched into the documented layout without the README was "not found"."""
    data = project / "shared" / "data"
    data.mkdir(parents=True)
    (data / marker).write_text("") if marker.endswith(".md") else (data / marker).mkdir()
    assert paths.data_dir() == data.resolve()


def test_a_folder_without_any_set_is_not_the_shared_data(project) -> None:
    data = project / "shared" / "data"
    data.mkdir(parents=True)
    (data / "notes.txt").write_text("not a set")
    with pytest.raises(DictEmbedError, match=f"shared data folder not found .*set {paths.DATA_ENV} to the folder"):
        paths.data_dir()


def test_the_environment_variable_wins(project, monkeypatch) -> None:
    (project / "shared" / "data" / "sts").mkdir(parents=True)
    monkeypatch.setenv(paths.DATA_ENV, str(project / "mine"))
    assert paths.data_dir() == project / "mine"
