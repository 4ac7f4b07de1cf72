"""`finetune_stsb`'s arguments and `output_dir`, refused in one line naming them before anything loads or trains: a
folder that holds something else is never written over, a file is no folder, and a setting that cannot train is
not found out deep inside torch or numpy."""

from __future__ import annotations

from pathlib import Path

import pytest

from dictembed.errors import DictEmbedError
from dictembed.evaluation import sts_supervised as sup


@pytest.fixture()
def nothing_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading STS-B or a model raises: a refusal must come before either."""

    def loaded(*args: object, **kwargs: object) -> None:
        raise RuntimeError("work started")

    monkeypatch.setattr(sup, "load_stsb_pairs", loaded)
    monkeypatch.setattr(sup, "load_bi_encoder", loaded)


def finetune(**kwargs: object) -> dict:
    settings: dict = {"limit": 8, "device": "cpu", "precision": "fp32"} | kwargs
    return sup.finetune_stsb("m", **settings)


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_holding_no_model_is_never_written_over(tmp_path: Path, overwrite: bool) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    with pytest.raises(DictEmbedError, match=rf"output_dir {tmp_path} is a non-empty folder that holds no model"):
        finetune(output_dir=tmp_path, overwrite=overwrite)
    assert notes.read_text(encoding="utf-8") == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.usefixtures("nothing_loads")
def test_a_file_is_no_output_dir(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.write_text("a file", encoding="utf-8")
    with pytest.raises(DictEmbedError, match=rf"output_dir {target} is a file; name a folder"):
        finetune(output_dir=target)
    with pytest.raises(DictEmbedError, match=rf"output_dir {target} is a file"):
        sup.finetune_stsb_seeds("m", 1.0, [0], output_dir=target, device="cpu", precision="fp32")
    assert target.read_text(encoding="utf-8") == "a file"


@pytest.mark.usefixtures("nothing_loads")
def test_a_model_folder_is_replaced_only_with_overwrite(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(DictEmbedError, match=rf"output_dir {tmp_path} already holds a model; pass overwrite=True"):
        finetune(output_dir=tmp_path)
    with pytest.raises(RuntimeError, match="work started"):  # past the checks
        finetune(output_dir=tmp_path, overwrite=True)
    with pytest.raises(RuntimeError, match="work started"):  # a missing or empty folder passes
        finetune(output_dir=tmp_path / "new")


@pytest.mark.usefixtures("nothing_loads")
def test_every_seed_folder_is_checked_before_the_first_seed_trains(tmp_path: Path) -> None:
    (tmp_path / "seed1").mkdir()
    (tmp_path / "seed1" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(DictEmbedError, match=r"seed1 is a non-empty folder that holds no model"):
        sup.finetune_stsb_seeds("m", 1.0, [0, 1], output_dir=tmp_path, device="cpu", precision="fp32")


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("batch_size", 0),
        ("batch_size", "16"),
        ("lr", -1.0),
        ("lr", 0.0),
        ("lr", float("nan")),
        ("lr", "2e-5"),
        ("seed", -1),
        ("seed", 2**32),
        ("seed", 1.5),
        ("ratio", "0.5"),
        ("ratio", 0.0),
        ("ratio", float("nan")),
        ("epochs", 0),
        ("epochs", 2.5),
        ("limit", 0),
        ("limit", "8"),
        ("pooling", "attention"),
    ],
)
def test_settings_that_cannot_train_are_refused_first(name: str, value: object) -> None:
    with pytest.raises(DictEmbedError, match=rf"{name}|pooling") as info:
        finetune(**{name: value})
    assert repr(value) in str(info.value)


@pytest.mark.usefixtures("nothing_loads")
@pytest.mark.parametrize("seeds", [[0, -1], "01", [], 0])
def test_every_seed_is_checked_before_the_first_trains(seeds: object) -> None:
    with pytest.raises(DictEmbedError, match="seed"):
        sup.finetune_stsb_seeds("m", 1.0, seeds, device="cpu", precision="fp32")  # type: ignore[arg-type]
