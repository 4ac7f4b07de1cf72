import logging
from pathlib import Path

import numpy as np
import pytest

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.evaluation.senteval import (
    cv_selected_accuracy,
    dev_selected_accuracy,
    evaluate_senteval,
    load_binary,
    load_mrpc,
    load_sst2,
    load_trec,
    nested_cv_accuracy,
    pair_features,
)

VOCAB = ["good", "bad", "abbr", "desc", "enty", "hum", "loc", "num"] + [f"w{i}" for i in range(8)]


class BagOfWords:
    """Deterministic word-count vectors over VOCAB; records every batch it is asked to encode."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, sentences: list[str]) -> np.ndarray:
        self.calls.append(list(sentences))
        out = np.zeros((len(sentences), len(VOCAB)))
        for i, sentence in enumerate(sentences):
            for word in sentence.split():
                out[i, VOCAB.index(word)] += 1
        return out


def noisy(word: str, i: int) -> str:
    """`word` plus two filler words that vary with i (shared by every class)."""
    return f"w{i % 8} {word} w{(i // 8) % 8}"


def write_toy_senteval(root: Path) -> None:
    base = root / "senteval"
    files = {
        "MR/rt-polarity.pos": [noisy("good", i) for i in range(30)],
        "MR/rt-polarity.neg": [noisy("bad", i) for i in range(30)],
        "CR/custrev.pos": [noisy("good", i) for i in range(20)] + [""],
        "CR/custrev.neg": [noisy("bad", i) for i in range(20)],
        "SUBJ/subj.objective": [noisy("good", i) for i in range(20)],
        "SUBJ/subj.subjective": [noisy("bad", i) for i in range(20)],
        "MPQA/mpqa.pos": ["good"] * 10 + [noisy("good", i) for i in range(10)],
        "MPQA/mpqa.neg": ["bad"] * 10 + [noisy("bad", i) for i in range(10)],
    }
    for split, n in (("train", 20), ("dev", 6), ("test", 6)):
        files[f"SST/binary/sentiment-{split}"] = [
            f"{noisy(w, i)} \t{y}" for i in range(n) for w, y in (("good", 1), ("bad", 0))
        ]
    coarse = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    for name, n in (("train_5500.label", 12), ("TREC_10.label", 3)):
        files[f"TREC/{name}"] = [f"{c}:x {noisy(c.lower(), i)}" for i in range(n) for c in coarse]
    header = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    for split, n in (("train", 24), ("test", 8)):
        rows = [f"1\t{i}\t{i}\tw{i % 8} w{(i + 3) % 8}\tw{(i + 3) % 8} w{i % 8}" for i in range(n)]
        rows += [f"0\t{i}\t{i}\tw{i % 8} w{(i + 3) % 8}\tw{(i + 1) % 8} w{(i + 5) % 8}" for i in range(n)]
        files[f"MRPC/msr_paraphrase_{split}.txt"] = [header] + rows
    for name, lines in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture
def toy_root(tmp_path: Path) -> Path:
    write_toy_senteval(tmp_path)
    return tmp_path


def test_all_tasks_on_separable_toy_data(toy_root: Path, caplog: pytest.LogCaptureFixture):
    model = BagOfWords()
    with caplog.at_level(logging.WARNING):
        scores = evaluate_senteval(model, data_dir=toy_root, folds=3, inner_folds=2)
    assert set(scores) == {"MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "MRPC/F1", "avg"}
    for key, value in scores.items():
        assert value == pytest.approx(100.0), key
    assert "skipped 1 empty line(s)" in caplog.text and "custrev.pos" in caplog.text
    # one encode call per task, each sentence once: MPQA has 10 copies of "good" and of "bad"
    assert len(model.calls) == 7 and all(len(c) == len(set(c)) for c in model.calls)
    assert len(model.calls[3]) == 22


def test_nested_cv_picks_first_best_c_per_fold(toy_root: Path):
    data = load_binary("MR", toy_root)
    x = BagOfWords().encode(data.sentences)
    result = nested_cv_accuracy(x, data.labels, seed=1111, folds=4, inner_folds=3)
    assert result.accuracy == pytest.approx(100.0)
    assert result.chosen_c == [0.25] * 4  # every C scores 100 inside: ties go to the first, as in SentEval


def test_dev_selection_follows_the_dev_split():
    # train: feature x predicts the label, class 0 is the majority
    x_train = np.array([[-1.0]] * 30 + [[1.0]] * 10)
    y_train = np.array([0] * 30 + [1] * 10)
    x_eval = np.array([[-1.0], [1.0], [1.0], [-1.0]])
    grid = (1e-6, 1e3)  # 1e-6: almost no slope, always predicts the majority class 0
    agree = (x_eval, np.array([0, 1, 1, 0]))
    majority = (x_eval, np.array([0, 0, 0, 0]))
    result = dev_selected_accuracy((x_train, y_train), agree, agree, grid=grid)
    assert result.chosen_c == [1e3] and result.accuracy == pytest.approx(100.0)
    result = dev_selected_accuracy((x_train, y_train), majority, agree, grid=grid)
    assert result.chosen_c == [1e-6] and result.accuracy == pytest.approx(50.0)


def test_pair_features_are_u_v_absdiff_product():
    u, v = np.array([[1.0, -2.0]]), np.array([[3.0, 4.0]])
    np.testing.assert_array_equal(pair_features(u, v), [[1.0, -2.0, 3.0, 4.0, 2.0, 6.0, 3.0, -8.0]])


def test_unknown_task_is_rejected():
    with pytest.raises(DictEmbedError, match="STS12"):
        evaluate_senteval(BagOfWords(), tasks=["STS12"])


def test_real_file_row_counts():
    assert len(load_binary("MR").sentences) == 10662
    cr = load_binary("CR")
    assert (len(cr.sentences), cr.skipped, int(cr.labels.sum())) == (3771, 4, 2405)
    assert len(load_binary("SUBJ").sentences) == 10000
    assert load_binary("MPQA").skipped == 3
    assert [len(load_sst2(s).sentences) for s in ("train", "dev", "test")] == [67349, 872, 1821]
    train = load_trec("train")
    assert len(train.sentences) == 5452 and "sister\u00f0city" in " ".join(train.sentences)  # ISO-8859-1
    test = load_trec("test")
    assert len(test.sentences) == 500 and test.sentences[0] == "How far is it from Denver to Aspen ?"
    assert np.bincount(test.labels).tolist() == [9, 138, 94, 65, 81, 113]
    mrpc = load_mrpc("train")
    assert len(mrpc.labels) == 4076 and len(load_mrpc("test").labels) == 1725
    assert int(mrpc.labels.sum()) == 2753


def test_malformed_files_name_file_and_line(toy_root: Path):
    sst = toy_root / "senteval" / "SST" / "binary" / "sentiment-dev"
    sst.write_text("fine film\t1\nawful\t2\n")
    with pytest.raises(DataFormatError, match=r"sentiment-dev:2: label '2'"):
        load_sst2("dev", toy_root)
    sst.write_text("fine film 1\n")
    with pytest.raises(DataFormatError, match=r"sentiment-dev:1: expected 'sentence<TAB>label'"):
        load_sst2("dev", toy_root)
    trec = toy_root / "senteval" / "TREC" / "TREC_10.label"
    trec.write_text("NUM:dist How far ?\nWHO:x Who ?\n", encoding="latin-1")
    with pytest.raises(DataFormatError, match=r"TREC_10\.label:2: expected 'COARSE:fine question'"):
        load_trec("test", toy_root)
    mrpc = toy_root / "senteval" / "MRPC" / "msr_paraphrase_test.txt"
    mrpc.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tonly one string\n")
    with pytest.raises(DataFormatError, match=r"msr_paraphrase_test\.txt:2: expected 5"):
        load_mrpc("test", toy_root)


def test_damaged_files_are_named_not_scored(toy_root: Path):
    """A lone carriage return would run sentences together, an empty class would leave scikit-learn a traceback:
    each names its file; a UTF-8 byte order mark in a Latin-1 file and a tab after a TREC label are read right."""
    senteval = toy_root / "senteval"
    pos = senteval / "MR" / "rt-polarity.pos"
    pos.write_bytes(b"w0 good w1\rw1 good w0\nw2 good w2\n")
    with pytest.raises(DataFormatError, match=r"rt-polarity\.pos:1: a carriage return"):
        load_binary("MR", toy_root)
    pos.write_bytes(b"")
    with pytest.raises(DataFormatError, match=r"rt-polarity\.pos: no sentences; MR needs both classes"):
        load_binary("MR", toy_root)
    pos.write_bytes(b"\xef\xbb\xbfw0 good w1\nw1 good w0\n")
    assert load_binary("MR", toy_root).sentences[0] == "w0 good w1"
    train = senteval / "SST" / "binary" / "sentiment-train"
    train.write_text("fine film\t1\ngood film\t1\n")
    with pytest.raises(DataFormatError, match=r"sentiment-train: every sentence has label 1: a classifier needs 2"):
        load_sst2("train", toy_root)
    train.write_text("")
    with pytest.raises(DataFormatError, match=r"sentiment-train: no labelled sentences"):
        load_sst2("train", toy_root)
    assert load_sst2("test", toy_root).labels.size  # one class is enough to score a test split
    trec = senteval / "TREC" / "TREC_10.label"
    trec.write_text("DESC:manner\tHow do you do ?\nNUM:dist How far ?\n", encoding="latin-1")
    assert load_trec("test", toy_root).sentences == ["How do you do ?", "How far ?"]
    mrpc = senteval / "MRPC" / "msr_paraphrase_train.txt"
    mrpc.write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    with pytest.raises(DataFormatError, match=r"msr_paraphrase_train\.txt: no labelled sentences"):
        load_mrpc("train", toy_root)


def test_parallel_folds_give_the_same_result() -> None:
    """--jobs only spreads the folds over processes: accuracies and chosen C are those of one process."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 6))
    y = (x[:, 0] + 0.5 * rng.normal(size=120) > 0).astype(int)
    one = nested_cv_accuracy(x, y, seed=3, folds=4, inner_folds=3)
    two = nested_cv_accuracy(x, y, seed=3, folds=4, inner_folds=3, jobs=2)
    assert (one.accuracy, one.chosen_c) == (two.accuracy, two.chosen_c)
    assert 60 < one.accuracy <= 100
    parallel = cv_selected_accuracy((x, y), (x[:30], y[:30]), seed=3, folds=3, jobs=2)
    serial = cv_selected_accuracy((x, y), (x[:30], y[:30]), seed=3, folds=3)
    assert parallel.chosen_c == serial.chosen_c and np.array_equal(parallel.predictions, serial.predictions)


def test_a_missing_file_of_the_last_task_fails_before_anything_is_encoded(toy_root: Path) -> None:
    (toy_root / "senteval" / "MRPC" / "msr_paraphrase_test.txt").unlink()
    model = BagOfWords()
    with pytest.raises(DataFormatError, match="msr_paraphrase_test.txt"):
        evaluate_senteval(model, data_dir=toy_root, folds=3, inner_folds=2)
    assert model.calls == []  # six tasks' encodes and fits not spent on a run that cannot finish
