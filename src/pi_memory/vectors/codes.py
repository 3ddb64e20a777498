"""Vectors as stored and as scanned (pure NumPy).

Design idea: two forms of one embedding. Stored (durable, in the archive): int8 with one scale per
vector, 384 bytes instead of 1,536 as float32, and a cosine within ~1e-3 of the float one, far
below what separates two candidates. Scanned (the rebuildable index): one sign bit per dimension of
the vector minus the archive's mean (48 bytes), whose Hamming distance to the query's bits orders
a million units in a few passes of XOR and popcount; the best few hundred by bits are then rescored
exactly from their int8 form. Without the mean most bits would say "this is e5" (every vector of
one model leans the same way) instead of telling units apart.
"""

from __future__ import annotations

import numpy as np

INT8_MAX = 127


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 (n, d) -> int8 (n, d) and float32 scales (n,): row * scale ~ the vector."""
    vectors = np.asarray(vectors, dtype=np.float32)
    peak = np.abs(vectors).max(axis=1) if len(vectors) else np.zeros(0, dtype=np.float32)
    scales = np.where(peak > 0, peak / INT8_MAX, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]).clip(-INT8_MAX, INT8_MAX).astype(np.int8)
    return codes, scales


def dequantize(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    return np.asarray(codes, dtype=np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


def int8_scores(query: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Cosine of a unit query with stored vectors (each stored vector had unit length)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.float32)
    scores: np.ndarray = (np.asarray(codes, dtype=np.float32) @ np.asarray(query, dtype=np.float32)) * scales
    return scores


def sign_bits(vectors: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, d / 8) uint8: one bit per dimension, set where the centred value is positive."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    return np.packbits(vectors - mean > 0, axis=1)


def hamming(query_bits: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Bits differing between one query's bits (d / 8,) and each row of `bits` (n, d / 8)."""
    if len(bits) == 0:
        return np.zeros(0, dtype=np.int32)
    words = bits.shape[1] // 8
    if bits.shape[1] % 8 == 0 and bits.flags.c_contiguous:  # 8 bytes at a time
        mine = np.ascontiguousarray(query_bits).view(np.uint64)
        wide: np.ndarray = np.bitwise_count(bits.view(np.uint64).reshape(-1, words) ^ mine).sum(axis=1, dtype=np.int32)
        return wide
    narrow: np.ndarray = np.bitwise_count(bits ^ query_bits).sum(axis=1, dtype=np.int32)
    return narrow


def bit_columns(bits: np.ndarray) -> np.ndarray:
    """(n, d / 8) uint8 rows -> (d / 64, n) uint64: the rows' first 8 bytes, then their next 8, ...

    The scan's layout: XOR and popcount then run down contiguous arrays, ~5x the speed of the same
    work on the rows (bench/semantic_scan.py: 106k units, 3.2 -> 0.6 ms)."""
    rows = np.ascontiguousarray(bits, dtype=np.uint8)
    if rows.shape[1] % 8:
        raise ValueError("bit codes must be a whole number of 64-bit words")
    return np.ascontiguousarray(rows.view(np.uint64).T)


def hamming_columns(query_bits: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """`hamming` over `bit_columns`' layout: (n,) uint16 distances."""
    mine = np.ascontiguousarray(query_bits, dtype=np.uint8).view(np.uint64)
    distances = np.zeros(columns.shape[1], dtype=np.uint16)
    for word, column in zip(mine, columns, strict=True):
        distances += np.bitwise_count(column ^ word)
    return distances


def smallest(distances: np.ndarray, k: int) -> np.ndarray:
    """Row numbers of the `k` smallest distances (small integers), lowest row first among equals.

    By counting, not sorting: a histogram of the distances gives the cut, one pass takes the rows
    under it (~0.2 ms at 106k against ~1 ms for `argpartition`)."""
    if len(distances) <= k:
        return np.arange(len(distances))
    cut = int(np.searchsorted(np.cumsum(np.bincount(distances)), k))
    under = np.flatnonzero(distances < cut)
    return np.concatenate([under, np.flatnonzero(distances == cut)[: k - len(under)]])


def nearest_by_bits(query_bits: np.ndarray, bits: np.ndarray, k: int) -> np.ndarray:
    """Row numbers of the `k` rows nearest by Hamming distance (in no particular order)."""
    return smallest(hamming(query_bits, bits), k)
