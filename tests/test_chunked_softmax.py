"""The one-pass cross-entropy over a frozen entry matrix against torch's two-pass one."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from dictembed.chunked_softmax import chunked_cross_entropy
from dictembed.entry_space import DefinitionSpace, EntrySpace


def _reference(q: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor):
    logits = q @ weights.T
    return F.cross_entropy(logits, labels), (logits.argmax(-1) == labels).float().mean()


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])  # one row, uneven blocks, one block
def test_loss_accuracy_and_gradient_match_cross_entropy(chunk: int) -> None:
    torch.manual_seed(0)
    weights = torch.randn(173, 12)
    labels = torch.tensor([0, 5, 172, 99, 5])
    q = (3 * torch.randn(5, 12)).requires_grad_()
    q_ref = q.detach().clone().requires_grad_()
    loss, acc = chunked_cross_entropy(q, weights, labels, chunk)
    loss_ref, acc_ref = _reference(q_ref, weights, labels)
    (2.5 * loss).backward()  # an upstream gradient other than 1 scales the gradient toward q
    (2.5 * loss_ref).backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-6, atol=1e-6)
    assert acc.item() == acc_ref.item()
    torch.testing.assert_close(q.grad, q_ref.grad, rtol=1e-5, atol=1e-7)


def test_accuracy_counts_argmax_hits_by_hand() -> None:
    weights = torch.eye(4)
    q = torch.tensor([[0.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 5.0], [5.0, 0.0, 0.0, 0.0]])
    _, acc = chunked_cross_entropy(q, weights, torch.tensor([1, 3, 2]), chunk=3)  # 2 of 3 right
    assert acc.item() == pytest.approx(2 / 3)


def test_frozen_matrix_and_labels_in_range_are_required() -> None:
    with pytest.raises(ValueError, match="frozen"):
        chunked_cross_entropy(torch.randn(2, 3), torch.randn(5, 3, requires_grad=True), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="outside the 5 rows"):
        chunked_cross_entropy(torch.randn(2, 3), torch.randn(5, 3), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"labels of shape \(1,\) for 2 query rows"):
        chunked_cross_entropy(torch.randn(2, 3), torch.randn(5, 3), torch.tensor([0]))  # broadcast silently before


@pytest.mark.parametrize("similarity", ["dot", "cosine"])
def test_matrix_space_loss_matches_its_logits(similarity: str) -> None:
    """The training loss of a matrix space (one pass) equals cross-entropy of the logits it scores with."""
    torch.manual_seed(1)
    space = DefinitionSpace([f"w{i}" for i in range(300)], torch.randn(300, 16), similarity, temperature=0.05)
    labels = torch.randint(0, 300, (8,))
    h = torch.randn(8, 16, requires_grad=True)
    h_ref = h.detach().clone().requires_grad_()
    loss, acc = space.loss(h, labels)
    loss_ref, acc_ref = EntrySpace.loss(space, h_ref, labels)  # the generic two-pass loss over the logits
    loss.backward()
    loss_ref.backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
    assert acc.item() == acc_ref.item()
    torch.testing.assert_close(h.grad, h_ref.grad, rtol=1e-4, atol=1e-6)


def test_autocast_multiplies_by_one_cached_low_precision_copy() -> None:
    torch.manual_seed(2)
    space = DefinitionSpace([f"w{i}" for i in range(50)], torch.randn(50, 8), "cosine")
    h = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        first = space.weights(h)
        assert first.dtype == torch.bfloat16 and space.weights(h) is first  # cast once, not per call
        logits = space(h)
        loss, _ = space.loss(h.requires_grad_(), torch.tensor([0, 1, 2, 3]))
    loss.backward()
    torch.testing.assert_close(logits.float(), space(h.detach()), rtol=0.05, atol=0.3)  # bf16: ~3 digits of 20
    assert h.grad is not None and h.grad.dtype == torch.float32 and torch.isfinite(h.grad).all()
    assert space.weights(h).dtype == torch.float32  # outside autocast: float32 again


def _several(q: torch.Tensor, weights: torch.Tensor, labels: torch.Tensor):
    """-log of the summed softmax probability of each row's right entries (labels ending in -1), by autograd."""
    logits = q @ weights.T
    right = logits.gather(1, labels.clamp(min=0)).masked_fill(labels < 0, float("-inf"))
    return (torch.logsumexp(logits, 1) - torch.logsumexp(right, 1)).mean()


@pytest.mark.parametrize("chunk", [1, 7, 10_000])
def test_several_right_entries_a_row_match_their_summed_probability(chunk: int) -> None:
    """Synonym targets: a definition that several headwords list counts each of their entries right."""
    torch.manual_seed(2)
    weights = torch.randn(90, 10)
    labels = torch.tensor([[3, 40, -1], [7, -1, -1], [0, 1, 89]])
    q = (3 * torch.randn(3, 10)).requires_grad_()
    q_ref = q.detach().clone().requires_grad_()
    loss, _ = chunked_cross_entropy(q, weights, labels, chunk)
    loss_ref = _several(q_ref, weights, labels)
    (1.5 * loss).backward()
    (1.5 * loss_ref).backward()
    torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(q.grad, q_ref.grad, rtol=1e-4, atol=1e-6)
    one = chunked_cross_entropy(q.detach()[1:2], weights, torch.tensor([7]), chunk)[0]  # a row of one: the usual loss
    torch.testing.assert_close(chunked_cross_entropy(q.detach()[1:2], weights, labels[1:2], chunk)[0], one)
    for similarity in ("dot", "cosine"):  # a space's one-pass loss and the two-pass one over its logits agree
        space = DefinitionSpace([f"w{i}" for i in range(90)], weights, similarity, temperature=0.05)
        generic, _ = EntrySpace.loss(space, q.detach(), labels)
        torch.testing.assert_close(space.loss(q.detach(), labels)[0], generic, rtol=1e-5, atol=1e-4)


def test_an_argmax_on_any_right_entry_is_right_and_rows_start_with_one() -> None:
    weights = torch.eye(4)
    q = torch.tensor([[0.0, 5.0, 0.0, 0.0], [0.0, 0.0, 0.0, 5.0]])
    labels = torch.tensor([[2, 1], [0, -1]])  # the first row's argmax (1) is its second right entry
    _, acc = chunked_cross_entropy(q, weights, labels, chunk=3)
    assert acc.item() == pytest.approx(1 / 2)
    assert EntrySpace.loss(DefinitionSpace(list("abcd"), weights, "dot", 1.0), q, labels)[1].item() == pytest.approx(
        0.5
    )
    with pytest.raises(ValueError, match="starts with a right entry"):
        chunked_cross_entropy(q, weights, torch.tensor([[-1, 1], [0, -1]]))
