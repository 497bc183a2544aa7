"""Log payloads: labelled chunks survive the round trip exactly; damage is detected."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithms.labels import LabelledRows, labelled
from service.algorithms.targets import TargetRows
from service.errors import CodecError
from service.store.codec import encode_matrix
from service.wire.log import ZLIB_MAGIC, decode_chunk, encode_chunk, pack_payload, unpack_payload

LABELS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(min_size=1, max_size=20))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 12), m=st.integers(1, 5), sparse=st.booleans())
def test_labelled_chunks_round_trip(data, n, m, sparse):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    rows = rng.standard_normal((n, m))
    labels = data.draw(st.lists(LABELS, min_size=n, max_size=n))
    chunk = labelled(sp.csr_matrix(rows) if sparse else rows, labels)
    if data.draw(st.booleans()):
        chunk = LabelledRows(chunk.rows, chunk.classes, chunk.codes, rng.integers(1, 9, n))
    out = decode_chunk(encode_chunk(chunk))
    assert isinstance(out, LabelledRows)
    assert out.classes == chunk.classes
    assert [type(c) for c in out.classes] == [type(c) for c in chunk.classes]
    np.testing.assert_array_equal(out.codes, chunk.codes)
    dense = out.rows if isinstance(out.rows, np.ndarray) else out.rows.toarray()
    np.testing.assert_array_equal(dense, rows)
    if chunk.multiplicity is None:
        assert out.multiplicity is None
    else:
        np.testing.assert_array_equal(out.multiplicity, chunk.multiplicity)


def test_unlabelled_payloads_stay_matrices():
    rows = np.arange(6.0).reshape(2, 3)
    out = decode_chunk(encode_chunk(rows))
    assert not isinstance(out, LabelledRows)
    np.testing.assert_array_equal(out, rows)
    assert encode_chunk(rows) == encode_matrix(rows)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_damage_is_detected(data):
    blob = bytearray(encode_chunk(labelled(np.eye(3), ["a", 2, "a"])))
    at = data.draw(st.integers(8, len(blob) - 1))
    blob[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CodecError):
        decode_chunk(bytes(blob))


def test_truncation_is_detected():
    blob = encode_chunk(labelled(np.eye(3), ["a", 2, "a"]))
    for end in (10, 47, len(blob) - 8):
        with pytest.raises(CodecError):
            decode_chunk(blob[:end])


def test_low_entropy_payloads_are_stored_compressed_and_come_back_exactly():
    """Term counts compress several times; what decodes is bit for bit what was encoded."""
    rng = np.random.default_rng(3)
    counts = sp.random(400, 3000, density=0.02, format="csr", random_state=rng) * 0
    counts.data = rng.integers(1, 5, counts.nnz).astype(float)
    raw = encode_matrix(counts)
    stored = pack_payload(raw)
    assert stored.startswith(ZLIB_MAGIC) and len(stored) < 0.5 * len(raw)
    assert bytes(unpack_payload(stored)) == raw
    back = decode_chunk(stored)
    assert isinstance(back, sp.csr_matrix) and (back != counts).nnz == 0


def test_payloads_that_do_not_shrink_or_are_small_are_stored_as_they_are():
    noise = encode_matrix(np.random.default_rng(4).standard_normal((300, 40)))
    assert pack_payload(noise) == noise  # random doubles: compression saves under a fifth
    small = encode_matrix(np.zeros((2, 3)))
    assert pack_payload(small) == small
    assert unpack_payload(noise) == noise


@pytest.mark.parametrize(
    "damage",
    ["truncated", "flipped", "longer", "shorter", "trailing"],
)
def test_a_damaged_compressed_payload_is_refused_not_inflated(damage):
    raw = encode_matrix(sp.csr_matrix(np.eye(2000)))
    stored = bytearray(pack_payload(raw))
    assert stored.startswith(ZLIB_MAGIC)
    header = struct.Struct("<8sQ")
    if damage == "truncated":
        stored = stored[:-20]
    elif damage == "flipped":
        stored[40] ^= 0xFF
    elif damage in ("longer", "shorter"):
        # A header that lies about the length: a bomb must not inflate past what it declares.
        header.pack_into(stored, 0, ZLIB_MAGIC, len(raw) + (-1 if damage == "shorter" else 1))
    else:
        stored += b"extra"
    with pytest.raises(CodecError):
        decode_chunk(bytes(stored))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), m=st.integers(1, 5), sparse=st.booleans()
)
def test_chunks_with_a_target_round_trip(seed, n, m, sparse):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, m))
    chunk = TargetRows(sp.csr_matrix(rows) if sparse else rows, rng.standard_normal(n))
    out = decode_chunk(encode_chunk(chunk))
    assert isinstance(out, TargetRows)
    dense = out.rows if isinstance(out.rows, np.ndarray) else out.rows.toarray()
    np.testing.assert_array_equal(dense, rows)
    np.testing.assert_array_equal(out.targets, chunk.targets)
    assert out.targets.dtype == np.float64


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_damage_to_a_chunk_with_a_target_is_detected(data):
    blob = bytearray(encode_chunk(TargetRows(np.eye(3), np.array([1.0, -2.0, 0.5]))))
    at = data.draw(st.integers(8, len(blob) - 1))
    blob[at] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(CodecError):
        decode_chunk(bytes(blob))
    with pytest.raises(CodecError, match=r"truncated|short|layout"):
        decode_chunk(bytes(blob[: data.draw(st.integers(8, len(blob) - 1))]))
