"""The pooling names an encoder takes, torch-free, so that the command line offers them as choices and refuses
another before anything loads; `dictembed.pooling` computes the two sentence-transformers has no module for."""

from __future__ import annotations

from dictembed.errors import DictEmbedError

STANDARD_POOLINGS: tuple[str, ...] = ("cls", "mean", "max")  # what training and fine-tuning offer
CUSTOM_POOLINGS: tuple[str, ...] = ("prompt", "first_last_avg")
POOLINGS: tuple[str, ...] = (*STANDARD_POOLINGS, *CUSTOM_POOLINGS)
# The modes of sentence-transformers' Pooling module (each is accepted by Encoder.pooling).
ST_POOLINGS: tuple[str, ...] = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# Every name `Encoder.pooling` takes: ours, then sentence-transformers' other modes.
ENCODER_POOLINGS: tuple[str, ...] = (*POOLINGS, *(name for name in ST_POOLINGS if name not in POOLINGS))


def check_pooling(name: object) -> None:
    """Refuse a pooling name that `Encoder.pooling` does not take (`ENCODER_POOLINGS`), naming every one it does."""
    if name not in ENCODER_POOLINGS:
        raise DictEmbedError(f"unknown pooling {name!r}; choose from {', '.join(ENCODER_POOLINGS)}")
