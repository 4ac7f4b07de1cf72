"""A SentencePiece-style precompiled character map, the form `tokenizers.normalizers.Precompiled` reads: a
little-endian u32 giving the byte size of a double-array trie, the trie's u32 units, then the replacement
strings, each ended by a NUL byte.

The trie maps a key's UTF-8 bytes to the offset of its replacement. A unit holds a label (bits 0-7, the byte
that leads to it), a has-leaf flag (bit 8) and the XOR offset of its children (bits 10-30); a leaf unit, found
at offset 0 from its parent's children, holds the value with bit 31 set, so its label never equals a byte.
The lookup walks `position ^= offset; position ^= byte` from the root at position 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

HAS_LEAF = 1 << 8
LEAF = 1 << 31
MAX_OFFSET = 1 << 21  # offsets past this would need the extension bit, never reached by a map this size
BLOCK = 256  # the trie is a whole number of blocks, so every `base ^ byte` lies inside it


@dataclass
class _Node:
    children: dict[int, _Node] = field(default_factory=dict)
    value: int | None = None


def _trie(keys: dict[bytes, int]) -> _Node:
    root = _Node()
    for key, value in keys.items():
        if not key or 0 in key:
            raise ValueError(f"character map key {key!r} is empty or holds a NUL byte")
        node = root
        for byte in key:
            node = node.children.setdefault(byte, _Node())
        node.value = value
    return root


def double_array(keys: dict[bytes, int]) -> list[int]:
    """The double-array trie units mapping each key to its value (each value < 2**31)."""
    units: dict[int, int] = {0: 0}
    bases: set[int] = set()
    todo = [(_trie(keys), 0)]
    start = BLOCK
    while todo:
        node, position = todo.pop()
        labels = sorted(node.children) + ([0] if node.value is not None else [])
        if not labels:
            continue
        while start in units:
            start += 1
        free = start  # try the free positions in turn for the first label
        while (base := free ^ labels[0]) in bases or any(base ^ label in units for label in labels):
            free += 1
            while free in units:
                free += 1
        offset = position ^ base
        if offset >= MAX_OFFSET:
            raise ValueError("character map too large for a double-array trie without extension offsets")
        bases.add(base)
        units[position] |= offset << 10 | (HAS_LEAF if node.value is not None else 0)
        if node.value is not None:
            units[base] = node.value | LEAF
        for byte, child in node.children.items():
            units[base ^ byte] = byte
            todo.append((child, base ^ byte))
    size = (max(units) // BLOCK + 1) * BLOCK
    return [units.get(i, 0) for i in range(size)]


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """The precompiled character map replacing each key (a character or string) by its value ("" removes it)."""
    blob = bytearray()
    offsets: dict[bytes, int] = {}
    for key, value in sorted(mapping.items()):
        offsets[key.encode("utf-8")] = len(blob)
        blob += value.encode("utf-8") + b"\0"
    units = double_array(offsets)
    return struct.pack(f"<I{len(units)}I", 4 * len(units), *units) + bytes(blob)
