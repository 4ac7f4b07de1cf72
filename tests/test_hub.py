"""Hub push (dry run, and a real push against a stubbed HfApi: nothing is sent) and the model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.hub import push_model
from dictembed.model_card import hub_base_model, render_model_card, write_model_card


@pytest.fixture()
def model_dir(bert_path: Path, tmp_path: Path) -> Path:
    """A saved tiny model with a DefSent+ entry space, as a training run leaves it."""
    encoder = Encoder.load(str(bert_path), pooling="mean")
    folder = encoder.save(tmp_path / "m", {"method": "defsent-plus", "entry_space": "definitions-amp"})
    words = ["dog", "cat", "car"]
    DefinitionSpace(words, np.ones((len(words), encoder.dim)), "cosine", 0.05, "definitions-amp").save(folder)
    return folder


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HfApi call that could reach the Hub fails the test."""
    from huggingface_hub import HfApi

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the dry run touched the Hub")

    for name in ("create_repo", "upload_folder", "upload_file", "create_commit", "whoami", "repo_exists"):
        monkeypatch.setattr(HfApi, name, fail)


# ----------------------------------------------------------------- push
def test_dry_run_lists_the_whole_folder_and_sends_nothing(model_dir: Path, no_network: None) -> None:
    files = push_model(model_dir, "someone/tiny-defsent-plus", dry_run=True)
    assert files == sorted(files)
    expected = {
        "dictembed.json",
        "modules.json",
        "config.json",
        "README.md",
        "entry_space/space.json",
        "entry_space/tensors.safetensors",
        "1_Pooling/config.json",
    }
    assert expected <= set(files)
    on_disk = {p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file()}
    assert set(files) == on_disk
    assert all("\\" not in f and not f.startswith("/") for f in files)


def test_push_creates_the_repo_and_uploads_the_folder(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import HfApi

    calls: list[tuple[str, tuple, dict]] = []
    monkeypatch.setattr(HfApi, "create_repo", lambda self, *a, **k: calls.append(("create_repo", a, k)))
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, *a, **k: calls.append(("upload_folder", a, k)))
    files = push_model(model_dir, "someone/tiny", private=True, token="hf_dummy")
    assert "dictembed.json" in files
    (_, args, kwargs), (name, _, upload) = calls
    assert args == ("someone/tiny",) and kwargs["private"] is True and kwargs["exist_ok"] is True
    assert name == "upload_folder" and upload["repo_id"] == "someone/tiny"
    assert Path(upload["folder_path"]) == model_dir.resolve()
    assert upload["allow_patterns"] == files  # exactly what a dry run lists


def test_push_leaves_out_what_is_not_the_model(
    model_dir: Path, tmp_path: Path, no_network: None, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the model folder")
    (model_dir / "notes.link").symlink_to(secret)  # its target would be uploaded
    (model_dir / ".env").write_text("HF_TOKEN=hf_secret")
    (model_dir / "model.safetensors.1234.partial").write_bytes(b"half a file")
    (model_dir / ".cache").mkdir(exist_ok=True)
    (model_dir / ".cache" / "x").write_text("cache")
    files = push_model(model_dir, "someone/tiny", dry_run=True)
    assert not {"notes.link", ".env", "model.safetensors.1234.partial", ".cache/x"} & set(files)
    assert "dictembed.json" in files and "model.safetensors" in files
    assert "notes.link" in caplog.text and ".env" in caplog.text


def test_push_network_failure_of_any_kind_is_one_line(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import HfApi

    class ConnectError(Exception):  # an HTTP client's own error type, not an OSError
        pass

    def fail(self, *args, **kwargs):
        raise ConnectError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(HfApi, "create_repo", fail)
    with pytest.raises(DictEmbedError, match="cannot push .* name resolution"):
        push_model(model_dir, "someone/tiny", token="hf_dummy")


def test_push_failure_is_one_line(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import HfApi

    def offline(self: Any, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("Offline mode is enabled.\nmore detail")

    monkeypatch.setattr(HfApi, "create_repo", offline)
    with pytest.raises(DictEmbedError, match="cannot push .* to 'someone/tiny': Offline mode is enabled.$"):
        push_model(model_dir, "someone/tiny")


@pytest.mark.parametrize("missing", ["modules.json", "config.json"])
def test_refuses_a_folder_that_is_not_a_model(model_dir: Path, missing: str, no_network: None) -> None:
    (model_dir / missing).unlink()
    with pytest.raises(DictEmbedError, match=f"{model_dir.name} is not a dictembed/sentence-transformers") as info:
        push_model(model_dir, "someone/tiny", dry_run=True)
    assert missing in str(info.value) and "\n" not in str(info.value)


def test_refuses_a_missing_folder(tmp_path: Path, no_network: None) -> None:
    with pytest.raises(DictEmbedError, match="nowhere is not a folder"):
        push_model(tmp_path / "nowhere", "someone/tiny", dry_run=True)


# ----------------------------------------------------------------- model card
REALISTIC = {
    "base_model": "sentence-transformers/all-MiniLM-L6-v2",
    "method": "defsent-plus",
    "entry_space": "definitions-amp",
    "pst_step": 1,
    "data": "wordnet",
    "lr": 1e-4,
    "seed": 0,
    "dev": {"mrr": 0.4312, "top1": 31.5, "top3": 48.0, "top10": 62.25, "stsb_dev": 84.9321},
    "throughput": 61.5,
    "train_examples": 3000,
    "final_loss": 1.234,
    "config": {
        "method": "defsent-plus",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "pooling": "mean",
        "pooler": "none",
        "entries": "amp",
        "pst_steps": 1,
        "ica": "none",
        "similarity": "cosine",
        "temperature": 0.05,
        "dictionary": "wordnet",
        "seeds": [0, 1, 2],
        "lrs": [1e-4],
        "batch_size": 16,
        "epochs": 1,
        "limit": 3000,
    },
    "encoder": {"pooling": "mean", "modules": [], "max_length": 128, "normalize": False, "dim": 384},
    "selection": {
        "selected_on": "stsb_dev",
        "best_lr": 1e-4,
        "best_seed": 0,
        "by_lr": {"0.0001": {"stsb_dev": {"mean": 84.81, "sd": 0.15}}},
    },
    "evaluation": {"sts": {"avg": 80.63}},
}


def front_matter(card: str) -> dict[str, Any]:
    """The card's YAML front matter, parsed with PyYAML when installed, else read line by line."""
    empty, front, body = card.split("---\n", 2)
    assert empty == "" and body.startswith("\n")
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is usually installed
        data: dict[str, Any] = {}
        for line in front.splitlines():
            if line.startswith("- "):
                data.setdefault("tags", []).append(line[2:].strip('"'))
            elif line.endswith(":"):
                continue
            else:
                key, value = line.split(": ", 1)
                data[key] = value.strip('"')
        return data
    return yaml.safe_load(front)


def test_card_for_a_training_run(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    path = write_model_card(tmp_path / "m", REALISTIC)
    assert path == tmp_path / "m" / "README.md"
    card = path.read_text(encoding="utf-8")
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers"
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert {"dictembed", "sentence-transformers", "sentence-similarity", "feature-extraction", "defsent-plus"} <= set(
        meta["tags"]
    )
    assert "DefSent+" in card and "quasi-isotropic or isotropic vector space of unlimited dictionary entries" in card
    assert "@misc{liu2024defsentplus" in card and "Liu, Xiaodong" in card
    assert "| stsb_dev | 84.9321 |" in card and "| top10 | 62.25 |" in card  # dev figures
    assert "84.81 ± 0.15" in card and "| sts/avg | 80.63 |" in card  # selection and test figures
    assert "| limit | 3000 |" in card and "| temperature | 0.05 |" in card and "| lr | 0.0001 |" in card
    assert 'SentenceTransformer("path/to/m")' in card
    assert 'dictembed predict --model path/to/m "a long-necked African animal"' in card


def test_card_counts_the_saved_entry_space(model_dir: Path) -> None:
    card = (model_dir / "README.md").read_text(encoding="utf-8")  # written by Encoder.save
    assert "definitions-amp" in card
    card = render_model_card({"method": "defsent-plus"}, model_dir, model_id="someone/tiny")
    assert "| entries | 3 |" in card and "| similarity | cosine |" in card
    assert 'Encoder.load("someone/tiny")' in card


def test_card_for_a_plain_save_with_a_local_base(tmp_path: Path) -> None:
    local = tmp_path / "my-bert"
    local.mkdir()
    record = {"base_model": str(local), "encoder": {"pooling": "prompt", "max_length": 64}}
    card = render_model_card(record, tmp_path / "plain")
    meta = front_matter(card)
    assert "base_model" not in meta and meta["tags"][0] == "dictembed"
    assert "`my-bert`, a local folder" in card and str(tmp_path) not in card
    assert "import SentenceTransformer" not in card and "which sentence-transformers cannot reproduce" in card
    assert 'Encoder.load("path/to/plain")' in card
    assert "Citation" not in card and "dictembed predict" not in card


def test_card_for_an_empty_record() -> None:
    card = render_model_card({})
    assert front_matter(card)["library_name"] == "sentence-transformers"
    assert "## Usage" in card


@pytest.mark.parametrize("method,title", [("defsent", "DefSent: Sentence Embeddings using Definition Sentences")])
def test_card_cites_defsent(method: str, title: str) -> None:
    card = render_model_card({"method": method, "base_model": "bert-base-uncased"})
    assert front_matter(card)["base_model"] == "bert-base-uncased"
    assert title in card and "Tsukagoshi, Hayato and Sasano, Ryohei and Takeda, Koichi" in card


def test_hub_base_model_names() -> None:
    from dictembed.paths import default_model

    assert hub_base_model(default_model()) == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub_base_model("roberta-base") == "roberta-base"
    assert hub_base_model("/no/such/folder") is None and hub_base_model(None) is None


def test_a_card_names_local_dictionaries_without_their_folders(tmp_path: Path) -> None:
    record = {"method": "defsent-plus", "config": {"dictionary": f"wordnet,{tmp_path / 'mine.tsv'}"}}
    card = render_model_card(record)
    assert "| dictionary | wordnet,mine.tsv |" in card and str(tmp_path) not in card
