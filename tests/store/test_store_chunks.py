"""Log payloads: labelled chunks survive the round trip exactly; damage is detected."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from service.algorithms.labels import LabelledRows, labelled
from service.errors import CodecError
from service.store.chunks import decode_chunk, encode_chunk
from service.store.codec import encode_matrix

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
    dense = out.rows.toarray() if sp.issparse(out.rows) else out.rows
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
