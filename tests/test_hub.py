"""Hub push (dry run, and a real push against a stubbed HfApi: nothing is sent) and the model card."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dictembed.base_model import hub_base_model
from dictembed.encoder import Encoder
from dictembed.entry_space import DefinitionSpace
from dictembed.errors import DictEmbedError
from dictembed.hub import LeftOut, push_model, upload_plan
from dictembed.model_card import render_model_card, write_model_card


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
    plan = push_model(model_dir, "someone/tiny-defsent-plus", dry_run=True)
    files = plan.files
    assert files == sorted(files) and plan.left_out == []
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
    (model_dir / "notes [draft].txt").write_text("a name that is also a pattern")
    files = push_model(model_dir, "someone/tiny", private=True, token="hf_dummy").files
    assert "dictembed.json" in files and "notes [draft].txt" in files
    (_, args, kwargs), (name, _, upload) = calls
    assert args == ("someone/tiny",) and kwargs["private"] is True and kwargs["exist_ok"] is True
    assert name == "upload_folder" and upload["repo_id"] == "someone/tiny"
    assert Path(upload["folder_path"]) == model_dir.resolve()
    from huggingface_hub.utils import filter_repo_objects

    on_disk = [p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file()]
    assert (
        sorted(filter_repo_objects(on_disk, allow_patterns=upload["allow_patterns"])) == files
    )  # what a dry run lists


def test_push_leaves_out_what_is_not_the_model(model_dir: Path, tmp_path: Path, no_network: None) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the model folder")
    (model_dir / "notes.link").symlink_to(secret)  # its target would be uploaded
    (model_dir / ".env").write_text("HF_TOKEN=hf_secret")
    (model_dir / "model.safetensors.1234.partial").write_bytes(b"half a file")
    (model_dir / ".cache").mkdir(exist_ok=True)
    (model_dir / ".cache" / "x").write_text("cache")
    plan = push_model(model_dir, "someone/tiny", dry_run=True)
    assert not {"notes.link", ".env", "model.safetensors.1234.partial", ".cache/x"} & set(plan.files)
    assert "dictembed.json" in plan.files and "model.safetensors" in plan.files
    assert plan.left_out == [
        LeftOut(".cache", "a hidden folder (1 file)"),
        LeftOut(".env", "a hidden file"),
        LeftOut("model.safetensors.1234.partial", "a staging leftover of an interrupted save"),
        LeftOut("notes.link", f"a link leading outside the folder (to {secret})"),
    ]


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


KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"


def test_files_that_look_like_credentials_are_refused_by_name_and_by_content(model_dir: Path, no_network: None) -> None:
    (model_dir / "id_rsa").write_text(KEY)
    (model_dir / "id_rsa.pub").write_text("ssh-ed25519 AAAA someone@host\n")  # a public key is no secret
    (model_dir / "secrets").mkdir()
    (model_dir / "secrets" / "credentials.json").write_text('{"password": "x"}')
    (model_dir / "deploy.pem").write_text("certificate")
    (model_dir / "hf_token").write_text("hf_abc")
    (model_dir / "notes.txt").write_text("\n" + KEY)  # a key under another name
    plan = upload_plan(model_dir)
    refused = {item.path: item.reason for item in plan.left_out}
    assert refused == {
        "deploy.pem": "looks like a credential: a PEM key or certificate (named deploy.pem)",
        "hf_token": "looks like a credential: a token file (named hf_token)",
        "id_rsa": "looks like a credential: an SSH private key (named id_rsa)",
        "notes.txt": "looks like a credential: a private key (its first line)",
        "secrets/credentials.json": "looks like a credential: a credentials file (named credentials.json)",
    }
    assert all(item.credential for item in plan.left_out)
    assert {"id_rsa.pub", "tokenizer.json", "tokenizer_config.json", "model.safetensors"} <= set(plan.files)
    sent = upload_plan(model_dir, include_secrets=True)
    assert set(refused) <= set(sent.files) and sent.left_out == []


def test_links_that_lead_out_or_nowhere_are_named(model_dir: Path, tmp_path: Path, no_network: None) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "data.bin").write_bytes(b"not the model")
    (model_dir / "data").symlink_to(outside)
    (model_dir / "gone.json").symlink_to(tmp_path / "no-such-file")
    (model_dir / "entry_space" / "same.json").symlink_to(model_dir / "dictembed.json")  # inside: sent
    (model_dir / ".env").write_text("HF_TOKEN=hf_secret")
    (model_dir / "notes.txt").symlink_to(".env")  # inside, to a file left out
    plan = upload_plan(model_dir)
    assert plan.left_out == [
        LeftOut(".env", "a hidden file"),
        LeftOut("data", f"a link leading outside the folder (to {outside})"),
        LeftOut("gone.json", f"a dangling link (to {tmp_path / 'no-such-file'})"),
        LeftOut("notes.txt", "a link to .env, a hidden file"),
    ]
    assert "entry_space/same.json" in plan.files


def test_a_pipe_in_the_folder_is_named_not_read(model_dir: Path, no_network: None) -> None:
    os.mkfifo(model_dir / "feed")
    assert upload_plan(model_dir).left_out == [LeftOut("feed", "not a plain file (a pipe, socket or device)")]


def test_weights_outside_the_folder_are_an_error(model_dir: Path, tmp_path: Path, no_network: None) -> None:
    weights = (model_dir / "model.safetensors").rename(tmp_path / "weights.safetensors")
    (model_dir / "model.safetensors").symlink_to(weights)
    with pytest.raises(DictEmbedError) as info:
        push_model(model_dir, "someone/tiny", dry_run=True)
    expected = (
        f"{model_dir} has no weights to push: model.safetensors is a link leading outside the folder (to {weights})"
    )
    assert str(info.value) == expected
    (model_dir / "model.safetensors").unlink()
    with pytest.raises(DictEmbedError, match=f"^{model_dir} has no weights to push: model.safetensors is missing$"):
        push_model(model_dir, "someone/tiny", dry_run=True)


def test_a_cut_weights_file_or_run_record_is_never_pushed(model_dir: Path, no_network: None) -> None:
    assert "model.safetensors" in upload_plan(model_dir).files
    weights, record = model_dir / "model.safetensors", model_dir / "dictembed.json"
    whole = weights.read_bytes()
    for cut in (b"", whole[: len(whole) // 2][:40]):
        weights.write_bytes(cut)
        with pytest.raises(DictEmbedError, match=f"^{weights}: not a whole safetensors file"):
            upload_plan(model_dir)
    weights.write_bytes(whole)
    record.write_text(record.read_text()[:20])
    with pytest.raises(DictEmbedError, match=f"^{record}: corrupt run record"):
        upload_plan(model_dir)


def test_sharded_weights_need_every_shard(model_dir: Path, no_network: None) -> None:
    (model_dir / "model.safetensors").rename(model_dir / "model-00001-of-00002.safetensors")
    (model_dir / "model-00002-of-00002.safetensors").write_bytes(b"shard")
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (model_dir / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "model-00002-of-00002.safetensors" in upload_plan(model_dir).files
    (model_dir / "model-00002-of-00002.safetensors").rename(model_dir / "model-00002-of-00002.safetensors.partial")
    with pytest.raises(DictEmbedError, match="model-00002-of-00002.safetensors is missing$"):
        upload_plan(model_dir)


def test_push_command_names_and_counts_what_it_leaves_out(
    model_dir: Path, tmp_path: Path, no_network: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from conftest import cli_refuses, cli_succeeds

    (model_dir / "id_rsa").write_text(KEY)
    (model_dir / "gone").symlink_to(tmp_path / "nothing")
    argv = ["push", "--model", str(model_dir), "--repo", "user/name", "--dry-run"]
    out, _ = cli_succeeds(capsys, argv)
    files = upload_plan(model_dir, include_secrets=True).files
    assert out.splitlines()[0] == f"would upload {len(files) - 1} file(s) to user/name, left out 2"
    assert "  id_rsa: looks like a credential: an SSH private key (named id_rsa)" in out.splitlines()
    assert f"  gone: a dangling link (to {tmp_path / 'nothing'})" in out.splitlines()
    assert out.rstrip().endswith("(--include-secrets uploads the files that look like credentials)")
    out, _ = cli_succeeds(capsys, [*argv, "--json"])
    report = json.loads(out)
    assert report["files"] == [f for f in files if f != "id_rsa"]
    assert report["left_out"] == [
        {"path": "gone", "reason": f"a dangling link (to {tmp_path / 'nothing'})"},
        {"path": "id_rsa", "reason": "looks like a credential: an SSH private key (named id_rsa)"},
    ]
    out, _ = cli_succeeds(capsys, [*argv, "--json", "--include-secrets"])
    assert "id_rsa" in json.loads(out)["files"]
    (model_dir / "model.safetensors").unlink()
    cli_refuses(capsys, argv, str(model_dir), "model.safetensors is missing")


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


# ----------------------------------------------------------------- a weightless ONNX export
@pytest.fixture()
def int8_export(model_dir: Path, tmp_path: Path) -> Path:
    """`dictembed export --quantize int8` of the tiny model: its graph, no torch weights."""
    from dictembed.backends.onnx.export import export

    return export(model_dir, tmp_path / "int8", quantize="int8")


def test_a_weightless_export_pushes_its_graph_for_its_weights(int8_export: Path, no_network: None) -> None:
    files = upload_plan(int8_export).files
    assert "model.safetensors" not in files and {"onnx/export.json", "onnx/model_qint8.onnx"} <= set(files)
    card = (int8_export / "README.md").read_text()  # the loads that work without the weights
    assert 'backend="onnx", model_kwargs={"file_name": "model_qint8.onnx"}' in card
    assert 'OnnxQueryEncoder.open("path/to/int8")' in card and "Encoder.load(" not in card
    (int8_export / "onnx" / "model_qint8.onnx").unlink()
    with pytest.raises(DictEmbedError, match=r"has no weights to push: onnx/model_qint8.onnx is missing$"):
        upload_plan(int8_export)
    (int8_export / "onnx" / "export.json").write_text("{")
    with pytest.raises(DictEmbedError, match=r"export\.json is corrupt \(JSONDecodeError: "):
        upload_plan(int8_export)


def test_an_export_whose_weights_are_left_out_is_not_pushed_as_weightless(
    int8_export: Path, tmp_path: Path, no_network: None
) -> None:
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(b"weights")
    (int8_export / "model.safetensors").symlink_to(outside)  # a --keep-weights export, its weights a link out
    with pytest.raises(DictEmbedError, match="has no weights to push: model.safetensors is a link"):
        upload_plan(int8_export)


def _fake_hub(monkeypatch: pytest.MonkeyPatch, repo: Path, cache: Path) -> list[str]:
    """snapshot_download and hf_hub_download of the repo "org/tiny" served from the folder `repo`, into a
    cache laid out as the Hub's (snapshots/<revision>/); returns the single files asked for."""
    import fnmatch
    import shutil

    import huggingface_hub

    snapshot = cache / "models--org--tiny" / "snapshots" / "0123abcd"
    asked: list[str] = []

    def snapshot_download(
        repo_id: str, ignore_patterns: list[str] | None = None, allow_patterns: list[str] | None = None, **kwargs: Any
    ) -> str:
        assert repo_id == "org/tiny"
        for file in repo.rglob("*"):
            name = file.relative_to(repo).as_posix()
            allowed = allow_patterns is None or any(fnmatch.fnmatch(name, p) for p in allow_patterns)
            if file.is_file() and allowed and not any(fnmatch.fnmatch(name, p) for p in ignore_patterns or []):
                (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, snapshot / name)
        return str(snapshot)

    def hf_hub_download(repo_id: str, filename: str, revision: str | None = None, **kwargs: Any) -> str:
        assert repo_id == "org/tiny" and revision == snapshot.name
        asked.append(filename)
        if not (repo / filename).is_file():
            raise FileNotFoundError(filename)  # the Hub's EntryNotFoundError, as far as the caller cares
        (snapshot / filename).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / filename, snapshot / filename)
        return str(snapshot / filename)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    return asked


def test_a_pushed_export_loads_from_the_hub_with_its_graph(
    int8_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dictembed.backends.onnx.query import OnnxQueryEncoder
    from dictembed.model_folder import ModelFolder

    monkeypatch.chdir(tmp_path)
    asked = _fake_hub(monkeypatch, int8_export, tmp_path / "cache")
    folder = ModelFolder.open("org/tiny")
    assert asked == ["onnx/export.json", "onnx/model_qint8.onnx"]
    assert ModelFolder.open("org/tiny").path == folder.path and len(asked) == 2  # at hand now: not asked again
    assert (folder.path / "onnx" / "model_qint8.onnx").read_bytes() == (
        int8_export / "onnx" / "model_qint8.onnx"
    ).read_bytes()
    sentences = ["a dog barks", "a cat purrs on the mat"]
    np.testing.assert_array_equal(
        OnnxQueryEncoder.open("org/tiny").encode(sentences), OnnxQueryEncoder.open(int8_export).encode(sentences)
    )


def test_a_graph_the_hub_cannot_give_is_one_line_naming_it(
    int8_export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dictembed.errors import ModelLoadError
    from dictembed.model_folder import ModelFolder

    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    import shutil

    shutil.copytree(int8_export, repo)
    (repo / "onnx" / "model_qint8.onnx").unlink()  # offline, the graph not in the cache: the Hub cannot give it
    _fake_hub(monkeypatch, repo, tmp_path / "cache")
    with pytest.raises(
        ModelLoadError, match=r"^model 'org/tiny': its ONNX export's graph onnx/model_qint8\.onnx could"
    ):
        ModelFolder.open("org/tiny")


def test_a_hub_repo_with_weights_fetches_no_graph(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dictembed.model_folder import ModelFolder

    monkeypatch.chdir(tmp_path)
    asked = _fake_hub(monkeypatch, model_dir, tmp_path / "cache")
    assert (ModelFolder.open("org/tiny").path / "model.safetensors").is_file() and asked == []


def test_transformers_loads_a_hub_name_from_the_snapshot_the_folder_check_fetched(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`data stats`, `head learn` and the MLM loads read a Hub name through `ModelFolder.open`, never through
    transformers' own download."""
    from transformers import AutoTokenizer

    from dictembed.loading import load_pretrained

    monkeypatch.chdir(tmp_path)
    _fake_hub(monkeypatch, model_dir, tmp_path / "cache")
    tokenizer = load_pretrained(AutoTokenizer, "org/tiny")
    snapshot = tmp_path / "cache" / "models--org--tiny" / "snapshots" / "0123abcd"
    assert tokenizer.name_or_path == str(snapshot)
    assert tokenizer.tokenize("dog cat") == load_pretrained(AutoTokenizer, str(model_dir)).tokenize("dog cat")
    assert not (snapshot / "model.safetensors").exists()  # a tokenizer fetches its small files alone


def test_a_hub_name_the_hub_cannot_give_fails_in_one_line_without_transformers_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import huggingface_hub
    import transformers
    from conftest import cli_refuses

    def offline(*args: Any, **kwargs: Any) -> str:
        raise huggingface_hub.errors.LocalEntryNotFoundError("offline")

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("transformers was asked to download a Hub name")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", never)
    error = cli_refuses(capsys, ["data", "stats", "--model", "org/missing"], "org/missing")
    assert "the Hugging Face Hub could not provide it (LocalEntryNotFoundError" in error
