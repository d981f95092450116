"""How fact vectors are laid out in the file: the vec0 table's definition, the sign bits
and the half-precision floats beside them. Below both the schema's migrations and the
vectors part (store/vectors.py), which read and write this layout."""

from __future__ import annotations

import numpy as np

# Float vectors beside the bits are kept in half precision: half the bytes (a 384-dim
# vector is 768 bytes, five rows to a 4 KB page instead of two), and a cosine moves by
# about 1e-4, far below any difference recall ranks on.
HALF = np.dtype("<f2")


def vector_table_sql(name: str, dim: int) -> str:
    """The vec0 table of fact vectors. With a dimension that is a multiple of 8: the sign
    bits as the indexed vector (bit[dim], Hamming distance) and the float vector as an
    auxiliary column (a plain rowid table inside vec0, so reading a few hundred of them by id
    is a b-tree probe each), in half precision. Otherwise the float vector itself (single
    precision), searched by exact cosine."""
    head = (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0("
        "fact_id INTEGER PRIMARY KEY, bank_id INTEGER PARTITION KEY, fact_type TEXT, "
    )
    if int(dim) % 8 == 0:
        return head + f"embedding_bits bit[{int(dim)}], +embedding BLOB)"
    return head + f"embedding float[{int(dim)}] distance_metric=cosine)"


def sign_bits(vec: np.ndarray) -> bytes:
    """The sign bits of a vector exactly as vec0's vec_quantize_binary makes them (element
    > 0 -> 1, least significant bit first)."""
    return np.packbits(np.asarray(vec) > 0, bitorder="little").tobytes()


def half_sign_bits(halves: np.ndarray) -> np.ndarray:
    """sign_bits of each row of half-precision vectors, as a (rows, dim / 8) byte array: a
    half is > 0 when its 16 bits, read as a signed integer, are (numpy compares halves in
    software, ~40x slower)."""
    rows = np.ascontiguousarray(np.asarray(halves, dtype=HALF))
    return np.packbits(rows.view("<i2") > 0, axis=-1, bitorder="little")
