"""`OnnxQueryEncoder`: an exported model folder (or a trained folder's query graph, `export.write_query_graph`) run
with ONNX Runtime and the `tokenizers` library alone, for what answers queries (`predict`, `serve`): it imports no
torch, transformers or sentence-transformers (8-15 s to import), so it opens in a fraction of a second.

It reads the sentence-transformers layout the export wrote (`query_layout.QueryLayout`: modules.json, the Pooling
module's config, Normalize, the prompts of config_sentence_transformers.json, tokenizer.json) and the record's
pooling and max_length, and gives the vectors `Encoder.load(folder)` gives: the same graph, tokens (truncated at
max_length, padded to the batch's longest), default prompt, length-sorted batches, and sentence-transformers'
pooling modes, computed here in numpy.

What it cannot run (`OnnxQueryEncoder.unsupported`): a folder with neither an export nor a query graph of its
weights as they are; a module after the pooling other
than Normalize (Dense, ...); dictembed's prompt and first_last_avg poolings; a Transformer module that lower-cases
its input. `Encoder.load` runs those.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Encoding, Tokenizer

from dictembed.backends.onnx.query_layout import QueryLayout, config_token
from dictembed.backends.onnx.session import (
    BadExport,
    clipped,
    open_session,
    ordered_map,
    physical_cores,
)
from dictembed.errors import DictEmbedError, ModelLoadError
from dictembed.model_folder import ModelFolder, vocabulary_problem
from dictembed.progress import Progress
from dictembed.search_space import l2_normalize
from dictembed.texts import (
    check_batch_size,
    check_chunk,
    check_flag,
    check_prompt,
    check_texts,
    is_whole_number,
    text_input,
    text_list,
    unknown_only,
)

log = logging.getLogger(__name__)


def pool(hidden: np.ndarray, mask: np.ndarray, modes: Sequence[str], prompt_length: int = 0) -> np.ndarray:
    """sentence-transformers' `Pooling` of token states `hidden` [batch, tokens, dim] under the attention `mask`
    [batch, tokens], the first `prompt_length` tokens (after any left padding) left out; the modes concatenated."""
    original = mask
    if prompt_length:
        mask = mask.copy()
        starts = mask.argmax(1)
        mask[np.arange(mask.shape[1])[None, :] < (starts + prompt_length)[:, None]] = 0
    weights = mask[..., None].astype(np.float32)
    rows, length = np.arange(len(hidden)), hidden.shape[1]
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(hidden[rows, mask.argmax(1)])
        elif mode == "max":
            out.append(np.where(weights > 0, hidden, -np.inf).max(1).astype(np.float32))
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            total = (hidden * weights).sum(1, dtype=np.float32)
            count = np.maximum(weights.sum(1), 1e-9)
            out.append(total / (count if mode == "mean" else np.sqrt(count)))
        elif mode == "weightedmean":
            position = np.arange(1, length + 1, dtype=np.float32)[None, :, None] - original.argmax(1)[:, None, None]
            weighted = weights * position
            out.append((hidden * weighted).sum(1) / np.maximum(weighted.sum(1), 1e-9))
        elif mode == "lasttoken":
            flipped = mask[:, ::-1]
            last = np.where(flipped.max(1) == 0, length - 1, flipped.argmax(1))
            out.append((hidden * weights)[rows, length - last - 1])
        else:
            raise DictEmbedError(f"unknown pooling mode {mode!r}")
    return np.concatenate(out, axis=-1).astype(np.float32, copy=False)


class OnnxQueryEncoder:
    """An exported model folder's sentence vectors from ONNX Runtime and `tokenizers` (no torch): `embed` and
    `encode` as `Encoder`'s, on the CPU. Like `OnnxBackbone`, an encode of at least `threads` batches runs them
    `threads` at once on a single-threaded session (opened at the first such encode); fewer run one at a time on a
    session with `threads` intra-op threads (default: the physical cores)."""

    device = "cpu"

    def __init__(self, layout: QueryLayout, name: str, threads: int | None = None) -> None:
        if threads is not None and threads < 1:
            raise DictEmbedError(f"threads must be at least 1, got {threads}")
        self.layout, self.name, self.path = layout, name, layout.folder
        self.threads = threads or physical_cores()
        self.manifest = layout.manifest
        self.max_length = layout.max_length
        self.prompts, self.default_prompt_name = layout.prompts, layout.default_prompt_name
        self.normalize = layout.normalize
        self.pooling = "+".join(layout.modes)
        self.dim = layout.hidden_size * len(layout.modes)
        self.tokenizer = self._tokenizer(truncate=True)
        self._check_vocabulary()
        self._counter: Tokenizer | None = None  # the tokenizer without truncation nor padding (`count_tokens`)
        self.session = open_session(layout.graph, self.threads)
        self.inputs = [i.name for i in self.session.get_inputs()]
        self._single: Any = self.session if self.threads == 1 else None
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._truncated = 0

    @property
    def batch_invariant(self) -> bool:
        """Whether a sentence's vector is the same in any batch: not from an int8 graph, whose dynamic quantisation
        scales each activation tensor by its range over the whole batch, padding included (the main job's int8
        export: 2.5 % of 200 queries kept their exact top 10 when searched in batches of 8 instead of alone)."""
        return self.manifest.get("quantize") is None

    @classmethod
    def open(cls, folder: str | Path | ModelFolder, threads: int | None = None) -> OnnxQueryEncoder:
        """The query encoder of an exported model folder (a path or an offline model's name); a folder it cannot
        run, or a file that does not parse, is a one-line `ModelLoadError`; `threads` None (the default) or a count."""
        if threads is not None and not is_whole_number(threads):
            raise DictEmbedError(f"threads: a whole number of at least 1 or None, not {threads!r}")
        model_folder = ModelFolder.open(folder)
        return cls(QueryLayout.read(model_folder), model_folder.name, threads)

    @staticmethod
    def unsupported(folder: str | Path | ModelFolder) -> str | None:
        """Why the query encoder cannot run `folder` (no export, a module after the pooling it does not run,
        dictembed's own pooling, a file that does not parse, ...), or None when it can. Reads the folder's JSON
        files only: the graph and the tokenizer are opened by `open`."""
        try:
            QueryLayout.read(ModelFolder.open(folder))
        except BadExport:  # an export never answers through its weights instead
            raise
        except DictEmbedError as err:
            return str(err)
        return None

    def _tokenizer(self, truncate: bool) -> Tokenizer:
        """The folder's tokenizer: with `truncate`, set as `Encoder.tokenize` calls it (cut at max_length, padded to
        the batch's longest with the tokenizer_config's pad token and sides), else with neither."""
        path, config = self.layout.tokenizer_file, self.layout.tokenizer_config
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as err:  # noqa: BLE001 - tokenizers raises a bare Exception on a bad file
            raise ModelLoadError(f"{path} is corrupt ({clipped(str(err), err)})") from None
        tokenizer.no_truncation()
        tokenizer.no_padding()
        if not truncate:
            return tokenizer
        side = config.get("truncation_side", "right")
        tokenizer.enable_truncation(self.max_length, stride=0, strategy="longest_first", direction=side)
        pad = config_token(config, "pad_token")
        pad_id = tokenizer.token_to_id(pad) if pad is not None else None
        if pad is None or pad_id is None:
            raise ModelLoadError(f"{path}: the tokenizer has no padding token (tokenizer_config.json: pad_token)")
        tokenizer.enable_padding(
            direction=config.get("padding_side", "right"),
            pad_id=pad_id,
            pad_type_id=int(config.get("pad_token_type_id", 0) or 0),
            pad_token=pad,
        )
        return tokenizer

    def _check_vocabulary(self) -> None:
        """Refuse a tokenizer unfit for the graph's token embeddings, as `Encoder.load` does
        (`model_folder.vocabulary_problem`): ids past them would fail inside ONNX Runtime at the first sentence
        holding one. The highest id is the model vocabulary's last or an added token's: reading the whole vocabulary
        as a dict took 22 ms at every open for MiniLM, 347 ms for e5's 250,002 tokens."""
        tokenizer = self.tokenizer
        top = max(tokenizer.get_vocab_size(with_added_tokens=False) - 1, *tokenizer.get_added_tokens_decoder(), -1)
        tokens = tokenizer.get_vocab_size(with_added_tokens=True)
        if problem := vocabulary_problem(tokens, top, self.layout.embedding_rows):
            raise ModelLoadError(f"model folder {self.path}: {problem}")

    @property
    def default_prompt(self) -> str | None:
        """The text of the model's default prompt (e5's "query: "), or None when it has none."""
        return self.prompts.get(self.default_prompt_name) if self.default_prompt_name else None

    def count_tokens(self, sentences: Sequence[str]) -> list[int]:
        """Each sentence's tokens after the default prompt, special ones included, before the cut at max_length."""
        sentences = text_list(sentences, "sentences")
        check_texts(sentences)
        if not sentences:
            return []
        prompt = self.default_prompt or ""
        return [len(e.ids) for e in self._counting().encode_batch([prompt + s for s in sentences])]

    def unknown_only(self, sentences: Sequence[str]) -> list[bool]:
        """Per sentence: whether the tokenizer reads it as unknown tokens only (`texts.unknown_only`)."""
        tokenizer = self._counting()
        unknown = config_token(self.layout.tokenizer_config, "unk_token")
        ids = [e.ids for e in tokenizer.encode_batch(list(sentences), add_special_tokens=False)]
        return unknown_only(ids, tokenizer.token_to_id(unknown) if unknown is not None else None)

    def _counting(self) -> Tokenizer:
        """The tokenizer without truncation nor padding, loaded at its first use."""
        if self._counter is None:
            self._counter = self._tokenizer(truncate=False)
        return self._counter

    def _prompt_length(self, prompt: str) -> int:
        """The leading tokens a Pooling with include_prompt=False leaves out: the prompt's own, and the start token
        (as `Encoder.tokenize` counts them)."""
        if not prompt or self.layout.include_prompt:
            return 0
        return len(self._counting().encode(prompt).ids) - 1

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        prompt: str | None = None,
        show_progress_bar: bool | None = None,
    ) -> np.ndarray:
        """Like `Encoder.encode`: a list gives a float32 (n, dim) array, one string a (dim,) vector, each after
        `prompt` (default: the model's default prompt; "" for none); `normalize_embeddings` L2-normalises."""
        texts, single = text_input(sentences)
        check_flag("normalize_embeddings", normalize_embeddings)  # "no" would count as true
        check_flag("show_progress_bar", show_progress_bar, none=True)
        vectors = np.concatenate(
            [np.zeros((0, self.dim), np.float32), *self.embed(texts, batch_size, prompt, show_progress_bar)]
        )
        if normalize_embeddings:
            vectors = l2_normalize(vectors)
        return vectors[0] if single else vectors

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        prompt: str | None = None,
        show_progress: bool | None = None,
        chunk: int | None = None,
    ) -> Iterator[np.ndarray]:
        """`Encoder.embed`'s contract: the float32 vectors of `texts` (after the modules that follow the pooling),
        `chunk` texts at a time (default: all at once), in input order, each after `prompt` (default: the model's
        default prompt; "" for none). Within a chunk the batches are length-sorted and the order restored.
        Truncated sentences are counted and reported once."""
        batch_size = check_batch_size(batch_size)
        texts = text_list(texts, "texts")
        check_texts(texts)
        check_prompt(prompt)
        check_chunk(chunk)
        prompt = self.default_prompt if prompt is None else prompt
        chunk = chunk or max(len(texts), 1)
        show = len(texts) > 10 * batch_size if show_progress is None else show_progress
        self._truncated = 0
        batches = sum(-(-len(texts[start : start + chunk]) // batch_size) for start in range(0, len(texts), chunk))
        with Progress(batches, "encode", unit="batch", rate_unit="batches", show=show, leave=False, logger=log) as bar:
            for start in range(0, len(texts), chunk):
                yield self._embed_chunk(texts[start : start + chunk], batch_size, prompt or "", bar.update)
        self.report_truncated(len(texts))

    def report_truncated(self, total: int) -> None:
        """Warn once, with the count, when some of `total` sentences were cut at max_length (as `Encoder`)."""
        if self._truncated:
            cut, length = self._truncated, self.max_length
            log.warning("%d of %d sentences were longer than %d tokens and were truncated", cut, total, length)
        self._truncated = 0

    def _embed_chunk(self, texts: list[str], batch_size: int, prompt: str, done: Callable[[int], Any]) -> np.ndarray:
        """The vectors of `texts` in order, run as length-sorted batches (longest first); `done(1)` after each."""
        order = np.argsort([-len(s) for s in texts], kind="stable")
        batches = [[texts[i] for i in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]
        skip = self._prompt_length(prompt)
        tokenized = (self._tokenize(batch, prompt) for batch in batches)
        if self.threads > 1 and len(batches) >= self.threads:
            single = self._single_session()
            pooled = ordered_map(
                lambda encodings: self._forward(single, encodings, skip), tokenized, self.threads, self._workers()
            )
        else:
            pooled = (self._forward(self.session, encodings, skip) for encodings in tokenized)
        parts = [np.zeros((0, self.dim), np.float32)]
        for vectors in pooled:
            parts.append(vectors)
            done(1)
        result = np.empty((len(texts), self.dim), np.float32)
        result[order] = np.concatenate(parts)
        return result

    def _workers(self) -> ThreadPoolExecutor:
        """The worker threads that run batches on the single-threaded session, started once (a pool a call cost a
        server about 4 % of its model thread's time)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="dictembed-encode")
            return self._pool

    def _single_session(self) -> Any:
        """The single-threaded session that worker threads run, opened once."""
        with self._lock:
            if self._single is None:
                self._single = open_session(self.layout.graph, 1)
            return self._single

    def _tokenize(self, texts: list[str], prompt: str) -> list[Encoding]:
        """The batch's encodings (on the caller's thread, in order), the cut sentences counted."""
        encodings = self.tokenizer.encode_batch([prompt + s for s in texts])
        self._truncated += sum(bool(e.overflowing) for e in encodings)
        return encodings

    def _forward(self, session: Any, encodings: list[Encoding], prompt_length: int) -> np.ndarray:
        """The pooled vectors of one tokenized batch, after the modules that follow the pooling."""
        columns = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        shape = columns["input_ids"].shape
        feeds = {name: columns.get(name, np.zeros(shape, np.int64)) for name in self.inputs}
        (hidden,) = session.run(["last_hidden_state"], feeds)
        vectors = pool(hidden, columns["attention_mask"], self.layout.modes, prompt_length)
        return l2_normalize(vectors) if self.normalize else vectors
