"""The ``.npy`` header reader (service/wire/literals.py) against Python's own ``literal_eval``,
and the race it replaced: headers parsed in many threads at once."""

from __future__ import annotations

import ast
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.wire.literals import MAX_DEPTH, literal

scalars = (
    st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.none()
    | st.text(st.characters(blacklist_characters="\\'\"\n\r", codec="utf-8"), max_size=8)
)
literals = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(
            st.text(max_size=4).filter(lambda t: "\\" not in repr(t)), inner, max_size=4
        )
    ),
    max_leaves=12,
)


@given(literals)
def test_reads_what_repr_writes_as_literal_eval_does(value: Any) -> None:
    text = repr(value)
    if "\\" in text:  # repr escaped a character: escapes are not a header's
        return
    assert literal(text) == ast.literal_eval(text)


@pytest.mark.parametrize(
    "dtype", ["<f8", ">f4", "<i8", "|b1", "<U3", "|S2", "<c16", [("a", "<f8")]]
)
@pytest.mark.parametrize("shape", [(), (3,), (2, 5), (0, 4)])
def test_numpys_own_headers(dtype: Any, shape: tuple[int, ...]) -> None:
    header = np.lib.format.header_data_from_array_1_0(np.zeros(shape, dtype=dtype))
    text = repr(header)
    assert literal(text) == ast.literal_eval(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os')", "is not a literal"),
        ("{'a': 1,", "never closed"),
        ("{'a': 1", "expected ',' or '}'"),
        ("{'a' 1}", "expected ':'"),
        ("(1, 2) (3,)", "after the value"),
        ("'a\\x00'", "cannot read"),
        ("{[1]: 2}", "dict key"),
        ("(" * (MAX_DEPTH + 1) + ")" * (MAX_DEPTH + 1), "nested more than"),
        ("1 + 2", "cannot read"),
        ("", "ends where a value was expected"),
    ],
)
def test_anything_but_a_literal_is_refused_with_where(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        literal(text)


def test_parenthesised_values_are_read_as_python_reads_them() -> None:
    assert literal("(3)") == 3 and literal("(3,)") == (3,) and literal("()") == ()
    assert literal("{'shape': (3, 4), }") == {"shape": (3, 4)}


def test_many_threads_at_once() -> None:
    """Headers are parsed in the decoding threads: 8 threads, 2,000 headers each, all read."""
    text = "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }"
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(2_000):
                assert literal(text) == {"descr": "<f8", "fortran_order": False, "shape": (3, 4)}
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
