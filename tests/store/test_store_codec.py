"""Properties of the state codec: exact round trips, strict rejection, corruption never passes."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from service.errors import CodecError
from service.store.codec import (
    SCALARS_FIELD,
    array_nbytes,
    decode_array,
    decode_matrix,
    decode_state,
    encode_array,
    encode_matrix,
    encode_state,
    stored_nbytes,
)

ALLOWED = ["?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8"]
DTYPES = st.sampled_from(ALLOWED).flatmap(
    lambda code: st.sampled_from([np.dtype(code), np.dtype(code).newbyteorder(">")])
)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)
ARRAYS = DTYPES.flatmap(lambda dt: hnp.arrays(dt, SHAPES))
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, same values bit for bit (NaN payloads, -0.0), dtype up to byte order."""
    le = a.dtype.newbyteorder("<")
    return (
        b.dtype == le
        and a.shape == b.shape
        and np.ascontiguousarray(a, dtype=le).tobytes() == np.ascontiguousarray(b).tobytes()
    )


@PROFILE
@given(ARRAYS)
def test_array_round_trip(a: np.ndarray) -> None:
    out = decode_array(encode_array(a))
    assert same_array(a, out)
    assert not out.flags.writeable


@PROFILE
@given(ARRAYS, st.data())
def test_non_contiguous_views_round_trip(a: np.ndarray, data: st.DataObject) -> None:
    views = [a.T]
    if a.ndim:
        step = data.draw(st.integers(2, 3))
        views.append(a[::step])
        views.append(a[::-1])
    for view in views:
        assert same_array(view, decode_array(encode_array(view)))


def test_array_edge_cases() -> None:
    for a in [
        np.array(3.5),
        np.array(True),
        np.zeros((0,), dtype="<u8"),
        np.zeros((3, 0, 2), dtype=">i2"),
        np.array([np.nan, -0.0, np.inf, -np.inf]),
        np.arange(24, dtype=">f8").reshape(2, 3, 4)[:, ::2, 1:],
        np.iinfo(np.int64).min * np.ones(3, dtype=np.int64),
    ]:
        assert same_array(a, decode_array(encode_array(a)))
    assert decode_array(bytearray(encode_array(np.arange(3)))).flags.writeable is False


@pytest.mark.parametrize(
    "bad",
    [
        np.array([object()], dtype=object),
        np.array([1 + 2j]),
        np.array(["text"]),
        np.array([b"bytes"]),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        np.zeros(2, dtype=np.float16),
        np.zeros(2, dtype=np.longdouble),
        np.array(["2024-01-01"], dtype="datetime64[D]"),
        [1.0, 2.0],
    ],
)
def test_disallowed_dtypes_are_rejected(bad: object) -> None:
    with pytest.raises(CodecError):
        encode_array(bad)  # type: ignore[arg-type]


@PROFILE
@given(ARRAYS, st.data())
def test_flipped_byte_never_decodes_to_another_array(a: np.ndarray, data: st.DataObject) -> None:
    blob = bytearray(encode_array(a))
    index = data.draw(st.integers(0, len(blob) - 1))
    blob[index] ^= data.draw(st.integers(1, 255))
    try:
        out = decode_array(bytes(blob))
    except CodecError:
        return
    assert same_array(a, out)


@PROFILE
@given(ARRAYS, st.data())
def test_truncated_or_extended_blob_is_rejected(a: np.ndarray, data: st.DataObject) -> None:
    blob = encode_array(a)
    cut = data.draw(st.integers(0, len(blob) - 1))
    with pytest.raises(CodecError):
        decode_array(blob[:cut])
    with pytest.raises(CodecError):
        decode_array(blob + data.draw(st.binary(min_size=1, max_size=9)))


def test_garbage_is_rejected() -> None:
    for junk in [b"", b"SIFTARR1", b"\x93NUMPY" + b"\0" * 40, b"x" * 100]:
        with pytest.raises(CodecError):
            decode_array(junk)


SPARSE_DENSE = st.sampled_from(["f8", "f4", "i8", "?"]).flatmap(
    lambda dt: hnp.arrays(
        np.dtype(dt),
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=7),
        elements=st.sampled_from([0, 0, 0, 1, 2]).map(lambda v: np.dtype(dt).type(v)),
    )
)


@PROFILE
@given(SPARSE_DENSE, st.booleans(), st.sampled_from([np.int32, np.int64]))
def test_csr_round_trip(dense: np.ndarray, as_array: bool, index_dtype: type) -> None:
    m = sp.csr_array(dense) if as_array else sp.csr_matrix(dense)
    m.indices = m.indices.astype(index_dtype)
    m.indptr = m.indptr.astype(index_dtype)
    out = decode_matrix(encode_matrix(m))
    assert isinstance(out, sp.csr_matrix)
    assert out.shape == m.shape
    assert out.dtype == m.dtype
    assert np.array_equal(out.toarray(), dense)
    assert np.array_equal(out.indices, m.indices) and np.array_equal(out.indptr, m.indptr)
    out.sum_duplicates()  # scipy may canonicalise in place: the arrays must be writable


@PROFILE
@given(SPARSE_DENSE, st.data())
def test_matrix_corruption_is_detected(dense: np.ndarray, data: st.DataObject) -> None:
    m = sp.csr_matrix(dense) if data.draw(st.booleans()) else dense
    blob = bytearray(encode_matrix(m))
    index = data.draw(st.integers(0, len(blob) - 1))
    blob[index] ^= data.draw(st.integers(1, 255))
    try:
        out = decode_matrix(bytes(blob))
    except CodecError:
        pass
    else:
        got = out if isinstance(out, np.ndarray) else out.toarray()
        assert got.shape == dense.shape and np.array_equal(got, dense)
    with pytest.raises(CodecError):
        decode_matrix(bytes(blob[: data.draw(st.integers(0, len(blob) - 1))]))


def test_dense_matrix_round_trip_and_rejections() -> None:
    dense = np.arange(12, dtype=">f4").reshape(3, 4)[:, ::2]
    out = decode_matrix(encode_matrix(dense))
    assert isinstance(out, np.ndarray) and same_array(dense, out)
    for bad in [np.arange(3.0), sp.coo_matrix(np.eye(2)), sp.csc_matrix(np.eye(2)), [[1.0]]]:
        with pytest.raises(CodecError):
            encode_matrix(bad)
    with pytest.raises(CodecError):
        decode_matrix(encode_array(dense))


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
FIELD_NAMES = st.text(min_size=1, max_size=12).filter(lambda s: not s.startswith("__"))


@PROFILE
@given(st.dictionaries(FIELD_NAMES, st.one_of(SCALARS, ARRAYS), max_size=6))
def test_state_round_trip(state: dict[str, Any]) -> None:
    fields = encode_state(state)
    assert all(isinstance(v, bytes) for v in fields.values())
    arrays = [k for k, v in state.items() if isinstance(v, np.ndarray)]
    assert set(fields) == {*arrays, SCALARS_FIELD}
    # as read back from Redis: bytes keys
    out = decode_state({k.encode(): v for k, v in fields.items()})
    assert set(out) == set(state)
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            assert same_array(value, out[key])
        else:
            assert type(out[key]) is type(value)
            assert out[key] == value
            if isinstance(value, float):
                assert math.copysign(1.0, out[key]) == math.copysign(1.0, value)


def test_state_scalars_and_names() -> None:
    out = decode_state(encode_state({"n": np.int64(7), "x": np.float32(0.5), "b": np.bool_(True)}))
    assert out == {"n": 7, "x": 0.5, "b": True}
    bad_states: list[dict[str, Any]] = [
        {"x": float("nan")},
        {"x": float("inf")},
        {"x": np.float64("-inf")},
        {"__x": 1},
        {"": 1},
        {"x": [1, 2]},
        {"x": {"a": 1}},
        {"x": 1j},
        {"x": np.complex128(1)},
    ]
    for bad in bad_states:
        with pytest.raises(CodecError):
            encode_state(bad)
    assert decode_state({b"__writer__": b"someone", b"__scalars__": b"{}"}) == {}
    assert decode_state({}) == {}
    for bad_scalars in [b"NaN", b'{"x": NaN}', b'{"x": Infinity}', b"[1]", b'{"x": [1]}', b"\xff"]:
        with pytest.raises(CodecError):
            decode_state({SCALARS_FIELD: bad_scalars})
    clash = {"a": encode_array(np.arange(2)), SCALARS_FIELD: json.dumps({"a": 1}).encode()}
    with pytest.raises(CodecError):
        decode_state(clash)
    with pytest.raises(CodecError):
        decode_state({"a": b"not an array"})


def test_arrays_of_zeros_are_written_as_a_header_when_asked():
    """A new selector's state (``elide_zeros``): a header per array whatever its size, decoded
    to the same zeros, read-only; the size check reads what the array would take."""
    zeros = np.zeros((1000, 300), dtype=np.float64)
    blob = encode_array(zeros, elide_zeros=True)
    assert len(blob) < 64
    back = decode_array(blob)
    assert back.shape == (1000, 300) and back.dtype == np.float64 and not back.any()
    assert not back.flags.writeable
    assert array_nbytes(blob) == zeros.nbytes == stored_nbytes(blob)
    assert len(encode_array(zeros)) > zeros.nbytes  # not asked: in full, as commits write
    one = zeros.copy()
    one[999, 299] = 1.0
    assert len(encode_array(one, elide_zeros=True)) > one.nbytes  # not all zeros: in full
    assert stored_nbytes(b'{"count":0}') == 11
    state = encode_state({"a": zeros, "n": 0}, elide_zeros=True)
    assert decode_state(state)["a"].shape == (1000, 300)


def test_a_zeros_blob_with_a_payload_or_a_forged_flag_is_refused():
    blob = bytearray(encode_array(np.zeros(4), elide_zeros=True))
    with pytest.raises(CodecError, match="payload"):
        decode_array(bytes(blob) + bytes(32))
    blob[10] = 2  # an unknown flag
    with pytest.raises(CodecError, match="flags"):
        decode_array(bytes(blob))
