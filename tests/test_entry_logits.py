"""Cosine entry logits (`dictembed.entry_logits`): the hand-computed value, the one order of operations that the
spaces and the leak-free evaluation share, and the one default temperature."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from dictembed.entry_logits import ENTRY_TEMPERATURE, cosine_logits, cosine_query
from dictembed.entry_space import DefinitionSpace, MatrixSpace
from dictembed.recipes.defsent_plus import DefSentPlus, DefSentPlusOptions


def test_cosine_logits_match_hand_computed_values() -> None:
    h = torch.tensor([[0.0, 2.0], [3.0, 4.0]])
    entries = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    # cos((0, 2), (3, 0)) = 0, cos((0, 2), (1, 1)) = 1/√2; cos((3, 4), (3, 0)) = 3/5, cos((3, 4), (1, 1)) = 7/(5√2)
    expected = torch.tensor([[0.0, 2**-0.5], [0.6, 7 / (5 * 2**0.5)]]) / 0.5
    torch.testing.assert_close(cosine_logits(h, entries, 0.5), expected)
    torch.testing.assert_close(cosine_query(h, 0.5), torch.tensor([[0.0, 2.0], [1.2, 1.6]]))
    unit = F.normalize(entries, dim=-1)  # rows a space keeps: not normalised twice
    assert torch.equal(cosine_logits(h, unit, 0.5, unit_entries=True), cosine_logits(h, entries, 0.5))
    # a batch of pairs, [B, 1, d] x [B, 1, d]: each row against its own entry
    pairs = cosine_logits(h[:, None], entries[:, None], 0.5)
    assert pairs.shape == (2, 1, 1)
    torch.testing.assert_close(pairs[:, 0, 0], expected.diagonal())


def test_a_cosine_space_scores_in_the_one_order_bit_for_bit() -> None:
    """Query normalised, divided by the temperature, then times the normalised entry rows: the order the spaces
    always used, so trained and saved models score as before."""
    torch.manual_seed(0)
    h, matrix = torch.randn(8, 16), torch.randn(50, 16)
    space = DefinitionSpace([f"w{i}" for i in range(50)], matrix, similarity="cosine", temperature=0.07)
    before = (F.normalize(h, dim=-1) / 0.07) @ F.normalize(matrix, dim=-1).T
    assert torch.equal(space(h), before) and torch.equal(cosine_logits(h, matrix, 0.07), before)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = space(h)
    expected = (F.normalize(h, dim=-1) / 0.07).bfloat16() @ F.normalize(matrix, dim=-1).bfloat16().T
    assert half.dtype == torch.bfloat16 and torch.equal(half, expected)


def test_one_default_entry_temperature() -> None:
    assert ENTRY_TEMPERATURE == 0.05  # docs/methods.md, "Entry logits"
    assert MatrixSpace(["a"], torch.ones(1, 2)).temperature == ENTRY_TEMPERATURE
    assert DefinitionSpace(["a"], torch.ones(1, 2)).temperature == ENTRY_TEMPERATURE
    assert DefSentPlusOptions().entry_temperature == ENTRY_TEMPERATURE
    assert DefSentPlus.best["entry_temperature"] == ENTRY_TEMPERATURE
