"""The limits of `dictembed serve`'s API, defined once: what one request may ask for, and how much model work
one step of a bulk encode holds (the most a search waits behind it)."""

from __future__ import annotations

from dataclasses import dataclass

from dictembed.errors import DictEmbedError

MAX_QUERY_CHARS = 2000  # a query or a sentence to encode; longer is refused, not truncated
MAX_K = 100  # results a search lists at most
MAX_SENTENCES = 256  # sentences one POST /api/encode holds at most
MAX_REQUEST_LINE = 1 << 20  # h11's buffer: an over-long query reaches the app and gets a JSON 422
# 256 sentences of 2,000 characters, each written as a 12-byte JSON escape pair at worst (6 MB), and room to spare
MAX_BODY_BYTES = 8 << 20
BODY_STALL_SECONDS = 30.0  # a request body that sends nothing for this long is answered 408 and dropped
MAX_ENCODE_TOKENS = 32_768  # the tokens of one POST /api/encode, as the model reads them (cut at its window)
ENCODE_CHUNK_TOKENS = 128  # the tokens of one step of an encode on the model's thread (MiniLM-L6, 2 cores: ~0.06 s)


@dataclass(frozen=True)
class EncodeBudget:
    """The model work of `POST /api/encode`, in tokens as the model's tokenizer counts them (each sentence cut
    at the model's window): `request` caps one request (more is refused with 413), and `chunk` caps one step
    on the model's thread, between which searches run (a sentence longer than `chunk` is a step of its own)."""

    request: int = MAX_ENCODE_TOKENS
    chunk: int = ENCODE_CHUNK_TOKENS

    def __post_init__(self) -> None:
        if self.request < 1 or self.chunk < 1:
            raise DictEmbedError(f"an encode budget counts at least one token, not {self}")
