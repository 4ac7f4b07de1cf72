"""GR-BERT: triplets, hard negatives, InfoNCE by hand, MLM masking, MT/SC training, saving and loading."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path

import pytest
import torch

from dictembed.dictionary import load_chang, load_dictionary
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.triplets import build_triplets, find_target, word_tokens
from dictembed.errors import DictEmbedError
from dictembed.objectives.gloss_regularizer import GlossCollator, GlossRegularizedMLM, gloss_accuracy, info_nce
from dictembed.objectives.mlm import Masker, head_is_tied, load_masked_lm
from dictembed.training import Trainer, TrainSettings

ROWS = [
    ("bank", "a financial institution", "she deposited money at the bank"),
    ("bank", "a financial institution", "the banks closed early today"),
    ("bank", "sloping land beside a river", "they sat on the bank of the river"),
    ("run", "move fast on foot", "he ran to the station"),
    ("run", "move fast on foot", "she runs every morning"),
    ("run", "operate a machine", "they run the printer all night"),
    ("cat", "a small feline pet", "the cat slept on the sofa"),
    ("cat", "a small feline pet", "two cats played in the garden"),
    ("take off", "leave the ground", "the plane took off at noon"),
    ("bright", "giving off much light", "the bright sun rose"),
    ("bright", "quick to learn", "a bright student answered first"),
    ("play", "take part in a game", "the children played football"),
    ("play", "a dramatic work for the stage", "we watched a play at the theatre"),
    ("tree", "a tall woody plant", "an old tree fell in the storm"),
    ("river", "a large stream of water", "the river flooded the valley"),
    ("book", "a written work", "she read a book on the train"),
    ("sing", "make musical sounds with the voice", "the birds sing at dawn"),
]


def toy_dictionary() -> Dictionary:
    d = Dictionary(name="toy")
    for word, gloss, example in ROWS:
        entry = d[word] if word in d else None
        sense = next((s for s in entry.senses if s.definition == gloss), None) if entry else None
        if sense is None:
            d.add(word, gloss, [example])
        else:
            sense.examples.append(example)
    return d


@pytest.fixture(scope="module")
def small_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BertForMaskedLM without dropout over the toy rows' own words (~100 tokens: fast)."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    words = sorted({w for row in ROWS for text in row for w in re.findall(r"\w+", text.lower())} - {"banks"})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##s", "##ed", "##ing", *words]
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)})
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.2,
        hidden_dropout_prob=0.0,  # dropout noise swamps a 32-dim model's cosines at tau = 0.05
        attention_probs_dropout_prob=0.0,
    )
    path = tmp_path_factory.mktemp("small-bert")
    BertForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# ------------------------------------------------------------------------------------------- triplets
def test_find_target_inflections_case_and_spans() -> None:
    assert find_target("He ran away.", "run") == (3, 6)
    assert find_target("The Dogs barked", "dog") == (4, 8)
    assert find_target("she took off her coat", "take off") == (4, 12)
    assert find_target("he gave a quick frisk", "frisking") == (16, 21)  # the headword's own lemma
    assert find_target("a fine cathedral", "cat") is None  # whole tokens only
    assert find_target("well-being matters", "well-being") == (0, 10)
    assert [t[0] for t in word_tokens("Don't stop, (now)!")] == ["don", "t", "stop", "now"]


def test_build_triplets_counts_and_reports_unmatched(caplog: pytest.LogCaptureFixture) -> None:
    d = toy_dictionary()
    d.add("able", "having the skills", ["a capable administrator"])  # the word is not in the sentence
    with caplog.at_level(logging.WARNING):
        triplets, report = build_triplets(d, seed=0)
    assert (report.examples, report.triplets, report.unmatched) == (len(ROWS) + 1, len(ROWS), 1)
    assert report.unmatched_samples == [("able", "a capable administrator")]
    assert "1 of 18 example sentences skipped" in caplog.text
    targets = {(t.word, t.target) for t in triplets}
    assert {("bank", "banks"), ("run", "ran"), ("run", "runs"), ("take off", "took off"), ("cat", "cats")} <= targets


def test_hard_negative_is_another_gloss_of_the_same_word() -> None:
    d = Dictionary(name="senses")
    glosses = ["a financial institution", "sloping land beside a river", "a row of similar things", "a stock"]
    for gloss in glosses:
        d.add("bank", gloss, [f"the bank {i}" for i in range(10)])
    d.add("cat", "a small feline pet", ["the cat slept"])
    triplets, report = build_triplets(d, seed=3)
    assert report.single_sense == 1
    for t in triplets:
        if t.word == "cat":
            assert t.negative is None
        else:
            assert t.negative in glosses and t.negative != t.gloss
    drawn = {t.negative for t in triplets if t.word == "bank"}
    assert drawn == set(glosses)  # 40 draws reach every other gloss
    again, _ = build_triplets(d, seed=3)
    assert [t.negative for t in again] == [t.negative for t in triplets]


def test_chang_triplets_from_shared_data() -> None:
    triplets, report = build_triplets(load_chang(), seed=0)
    assert report.examples == 3548 and report.triplets + report.unmatched == report.examples
    assert report.triplets == 3548
    for t in triplets[:200]:
        assert t.context[t.span[0] : t.span[1]] == t.target and find_target(t.context, t.word) == t.span


# ------------------------------------------------------------------------------------------- InfoNCE
def test_info_nce_by_hand() -> None:
    # tau = 0.5. Queries q1 = (1, 0), q2 = (0, 1); positives p1 = (1, 0), p2 = (1, 1); hard negative n = (0, 2).
    # Cosines: q1 -> [1, 1/sqrt2, 0], q2 -> [0, 1/sqrt2, 1]; divided by tau: [2, sqrt2, 0] and [0, sqrt2, 2].
    # Row 1 (target column 0): -2 + log(e^2 + e^sqrt2 + e^0);
    # row 2 (target column 1): -sqrt2 + log(e^0 + e^sqrt2 + e^2).
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    n = torch.tensor([[0.0, 2.0]])
    r2 = math.sqrt(2)
    z = math.log(math.exp(2) + math.exp(r2) + 1)
    expected = ((-2 + z) + (-r2 + z)) / 2
    assert info_nce(q, p, n, temperature=0.5).item() == pytest.approx(expected, rel=1e-6)
    # In-batch negatives only: row 1: -2 + log(e^2 + e^sqrt2); row 2: -sqrt2 + log(1 + e^sqrt2).
    expected = ((-2 + math.log(math.exp(2) + math.exp(r2))) + (-r2 + math.log(1 + math.exp(r2)))) / 2
    assert info_nce(q, p, temperature=0.5).item() == pytest.approx(expected, rel=1e-6)
    # Ignoring row 2's hard-negative column leaves row 2 at -sqrt2 + log(1 + e^sqrt2).
    ignore = torch.tensor([[False, False, False], [False, False, True]])
    expected = ((-2 + z) + (-r2 + math.log(1 + math.exp(r2)))) / 2
    assert info_nce(q, p, n, temperature=0.5, ignore=ignore).item() == pytest.approx(expected, rel=1e-6)


# ------------------------------------------------------------------------------------- batches, MLM
def test_collator_target_positions_masks_and_ignored_columns(small_bert: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(small_bert)
    triplets, _ = build_triplets(toy_dictionary(), seed=0)
    # rows 0 and 1 share "a financial institution"; "take off" has one sense, so no hard negative
    rows = [t for t in triplets if t.word in ("bank", "take off")]
    batch = GlossCollator(tokenizer, max_length=32)(rows)
    ids, target = batch["ctx_input_ids"], batch["target"]
    assert tokenizer.convert_ids_to_tokens(ids[1][target[1]]) == ["bank", "##s"]
    assert tokenizer.decode(ids[3][target[3]]) == "took off"
    assert target.sum(1).tolist() == [1, 2, 1, 2]
    assert torch.equal(batch["target_masked_ids"][target], torch.full((6,), tokenizer.mask_token_id))
    assert torch.equal(batch["target_masked_ids"][~target], ids[~target])
    # columns: 4 glosses + 3 hard negatives (sloping, sloping, financial): a column repeating the row's own
    # gloss text is ignored, never a negative
    assert [t.negative for t in rows] == [rows[2].gloss, rows[2].gloss, rows[0].gloss, None]
    assert batch["ignore"].int().tolist() == [
        [0, 1, 0, 0, 0, 0, 1],
        [1, 0, 0, 0, 0, 0, 1],
        [0, 0, 0, 0, 1, 1, 0],
        [0, 0, 0, 0, 0, 0, 0],
    ]
    assert "mlm_input_ids" not in batch  # the objective masks it, in its step


def test_collator_rejects_truncated_target(small_bert: Path) -> None:
    from transformers import AutoTokenizer

    triplets, _ = build_triplets(toy_dictionary(), seed=0)
    late = next(t for t in triplets if t.context.endswith("river"))
    collate = GlossCollator(AutoTokenizer.from_pretrained(small_bert), max_length=5)
    assert collate.fits([late]) == [False]
    with pytest.raises(DictEmbedError, match="'bank' truncated away"):
        collate([late])


def test_a_max_length_that_fits_no_training_triplet_is_one_line(small_bert: Path, tmp_path: Path, capsys) -> None:
    """`--max-length` too short for every training triplet's target: one line saying so, not the trainer's "no
    training examples" ValueError traceback."""
    from conftest import cli_refuses

    table = tmp_path / "toy.tsv"
    table.write_text("word\tdefinition\texample\n" + "".join(f"{w}\t{g}\t{e}\n" for w, g, e in ROWS))
    argv = ["train", "--method", "gr-bert", "--model", str(small_bert), "--dictionary", str(table)]
    argv += ["--max-length", "3", "--lr-grid", "1e-3", "--output", str(tmp_path / "gr")]
    cli_refuses(capsys, argv, "training triplets", "max_length=3", "--max-length")


def test_masker_is_bert_15_80_10_10(small_bert: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(small_bert)
    torch.manual_seed(0)
    ids = torch.randint(8, len(tokenizer), (400, 100))
    masked, labels = Masker(tokenizer)(ids, torch.ones_like(ids))
    chosen = labels != -100
    assert chosen.float().mean().item() == pytest.approx(0.15, abs=0.005)
    assert torch.equal(labels[chosen], ids[chosen])
    as_mask = (masked[chosen] == tokenizer.mask_token_id).float().mean().item()
    unchanged = (masked[chosen] == ids[chosen]).float().mean().item()
    assert as_mask == pytest.approx(0.8, abs=0.02) and unchanged == pytest.approx(0.1 + 0.1 / len(tokenizer), abs=0.02)
    assert torch.equal(masked[~chosen], ids[~chosen])


def test_no_head_model_gets_tied_head_and_warning(caplog: pytest.LogCaptureFixture) -> None:
    from dictembed.paths import default_model

    with caplog.at_level(logging.WARNING, logger="dictembed.objectives.mlm"):
        model = load_masked_lm(default_model())
    assert "has no MLM head" in caplog.text and "cls.predictions" in caplog.text
    assert model.new_mlm_head is True  # what a GR-BERT run records for its model card
    assert head_is_tied(model)
    assert model.cls.predictions.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()


# ----------------------------------------------------------------------------------------- training
def fixed_batch_losses(objective: GlossRegularizedMLM, collate: GlossCollator, triplets: list) -> dict[str, float]:
    """Mean losses over 5 seeded maskings of all triplets, in eval mode (no dropout): comparable across time."""
    objective.eval()
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        outs = [objective(collate(triplets)) for _ in range(5)]
    objective.train()
    return {k: sum(float(o[k]) for o in outs) / 5 for k in ("mlm", "gloss")}


def train(small_bert: Path, arch: str, run_dir: Path) -> dict:
    from transformers import AutoTokenizer

    triplets, _ = build_triplets(toy_dictionary(), seed=0)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(small_bert)
    objective = GlossRegularizedMLM(load_masked_lm(str(small_bert)), tokenizer, arch)
    collate = GlossCollator(tokenizer, max_length=32)
    before = fixed_batch_losses(objective, collate, triplets)
    settings = TrainSettings(lr=3e-3, batch_size=6, epochs=15, warmup_ratio=0.0, log_every=1, seed=0)
    trainer = Trainer(objective, triplets, collate, settings, run_dir)
    trainer.fit()
    objective = trainer.unwrapped
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    after = fixed_batch_losses(objective, collate, triplets)
    return {"objective": objective, "records": records, "before": before, "after": after}


def test_a_killed_gr_bert_run_resumes_to_the_straight_runs_weights(small_bert: Path, tmp_path: Path) -> None:
    """The data loader collates a batch ahead of its step: MLM masks drawn there made the resumed run's masks, and
    so its weights, differ from the straight run's. The objective draws them in its step: bit for bit equal."""
    from transformers import AutoTokenizer

    triplets, _ = build_triplets(toy_dictionary(), seed=0)
    tokenizer = AutoTokenizer.from_pretrained(small_bert)
    collate = GlossCollator(tokenizer, max_length=32)
    settings = TrainSettings(lr=3e-3, batch_size=6, epochs=2, warmup_ratio=0.0, seed=0, checkpoint_every=1)

    def trainer(run_dir: Path) -> Trainer:
        torch.manual_seed(0)
        objective = GlossRegularizedMLM(load_masked_lm(str(small_bert)), tokenizer, "mt")
        return Trainer(objective, triplets, collate, settings, run_dir)

    straight = trainer(tmp_path / "straight")
    straight.fit()
    killed = trainer(tmp_path / "killed")
    killed.fit(max_steps=3)
    torch.manual_seed(99)  # another process: the global generator as it happens to be
    resumed = trainer(tmp_path / "killed")
    resumed.fit(resume=True)
    assert resumed.progress.step == straight.progress.step > 3
    ours, theirs = straight.unwrapped.state_dict(), resumed.unwrapped.state_dict()
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)


@pytest.fixture(scope="module")
def trained(small_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return {arch: train(small_bert, arch, tmp_path_factory.mktemp(arch)) for arch in ("mt", "sc")}


@pytest.mark.parametrize("arch", ["mt", "sc"])
def test_training_reduces_mlm_and_gloss_losses(trained: dict, arch: str) -> None:
    run = trained[arch]
    records = run["records"]
    assert len(records) == 45  # 17 triplets / 6 = 3 steps x 15 epochs
    # measured: MT mlm 5.20 -> 4.07, gloss 3.98 -> 0.08; SC (two MLM losses) mlm 10.40 -> 8.26, gloss 4.45 -> 0.46
    assert run["after"]["mlm"] < run["before"]["mlm"] - 0.5, run
    assert run["after"]["gloss"] < run["before"]["gloss"] - 2.0, run
    first = sum(r["gloss"] for r in records[:5]) / 5  # the training log: mean of the first and last 5 steps
    last = sum(r["gloss"] for r in records[-5:]) / 5
    assert last < first - 1.5, (first, last)
    assert all(r["loss"] == pytest.approx(r["mlm"] + 2.0 * r["gloss"], rel=1e-4) for r in records)


def test_sc_saves_only_enc2(trained: dict, small_bert: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from dictembed.encoder import Encoder

    objective = trained["sc"]["objective"]
    assert objective.kept is objective.enc2 and objective.enc1 is not None
    tokenizer = AutoTokenizer.from_pretrained(small_bert)
    Encoder(objective.kept.base_model, tokenizer, pooling="first_last_avg").save(tmp_path, full_model=objective.kept)
    saved = AutoModelForMaskedLM.from_pretrained(tmp_path).state_dict()
    enc1, enc2 = objective.enc1.state_dict(), objective.enc2.state_dict()
    assert all(torch.equal(saved[k], enc2[k].cpu()) for k in saved)
    assert not torch.equal(
        saved["bert.encoder.layer.0.attention.self.query.weight"],
        enc1["bert.encoder.layer.0.attention.self.query.weight"],
    )


def test_held_out_gloss_accuracy(trained: dict, small_bert: Path) -> None:
    from transformers import AutoTokenizer

    objective = trained["mt"]["objective"]
    triplets, _ = build_triplets(toy_dictionary(), seed=0)
    collate = GlossCollator(AutoTokenizer.from_pretrained(small_bert), max_length=32)
    result = gloss_accuracy(objective, triplets, collate, batch_size=17)
    assert objective.training  # restored
    assert 0 <= result["gloss_acc"] <= 100 and result["gloss_acc"] > 100 / 17  # above chance after training
    assert result["gloss_loss"] > 0


# ------------------------------------------------------------------------------------------ recipe
def test_recipe_saves_a_masked_lm_with_first_last_avg(
    small_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from dictembed.encoder import Encoder
    from dictembed.evaluation.lexsub import SubstituteScorer
    from dictembed.recipes.config import RunConfig
    from dictembed.recipes.gr_bert import heldout_gloss_accuracy
    from dictembed.recipes.run import train

    table = tmp_path / "toy.tsv"
    table.write_text("word\tdefinition\texample\n" + "".join(f"{w}\t{g}\t{e}\n" for w, g, e in ROWS))
    assert load_dictionary(str(table)).num_definitions() == 14  # 10 headwords: 8 train, 1 dev, 1 test
    config = RunConfig.create(
        "gr-bert",
        model=str(small_bert),
        arch="mt",
        dictionary=str(table),
        batch_size=4,
        lrs=[1e-3],
        seeds=[1],
        limit=8,
        max_length=32,
        output=str(tmp_path / "gr"),
    )
    path = train(config)
    saved = json.loads((path / "dictembed.json").read_text())
    options = saved["config"]["options"]
    assert saved["method"] == "gr-bert" and options == {"arch": "mt", "gloss_weight": 2.0, "gloss_temperature": 0.05}
    assert saved["encoder"]["pooling"] == saved["details"]["pooling"] == "first_last_avg"  # what it really uses
    assert saved["seed"] == 1 and saved["data"] == table.name and saved["train_examples"] == 8  # no machine path
    assert {"gloss_acc", "gloss_loss", "stsb_dev"} <= set(saved["dev"])
    assert saved["details"]["triplets"]["train"]["unmatched"] == 0
    assert saved["details"]["new_mlm_head"] == load_masked_lm(str(small_bert)).new_mlm_head  # as the model loaded
    before = heldout_gloss_accuracy(str(small_bert), config, seed=1)  # the untrained model, same held-out batches
    assert set(before) == {"gloss_acc", "gloss_loss"} and 0.0 <= before["gloss_acc"] <= 100.0
    with caplog.at_level(logging.WARNING):
        scorer = SubstituteScorer.from_pretrained(str(path), device="cpu")
    assert scorer.use_mlm_head and "no trained MLM head" not in caplog.text
    encoder = Encoder.load(str(path))
    assert encoder.pooling == "first_last_avg"
    assert encoder.encode(["the cat slept"]).shape == (1, 32)
