"""The Python literals of a ``.npy`` header, parsed without Python's compiler.

A ``.npy`` header is the ``repr`` of a dict (``{'descr': '<f8', 'fortran_order': False,
'shape': (3, 4), }``). ``ast.literal_eval`` reads it, but on CPython 3.11 it shares the AST
constructor's recursion counter between threads (python/cpython#106905): request bodies are
decoded in worker threads, and two ``.npz`` bodies decoded at once made one of them fail with
``SystemError: AST constructor recursion depth mismatch``, a 500 (seen in the Redis Cluster
failover test). This parser keeps no state between calls and reads only what a header may hold:
dicts, tuples, lists, strings without escapes, integers, floats, ``True``, ``False`` and
``None``, nested at most ``MAX_DEPTH`` deep. Anything else is a ``ValueError`` that says where.
"""

from __future__ import annotations

import re
from typing import Any

#: Deepest nesting read: a header needs two levels (a dict holding a tuple).
MAX_DEPTH = 32

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'[^'\\\n]*'|"[^"\\\n]*")
      | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))
      | (?P<name>[A-Za-z_]\w*)
      | (?P<punct>[{}()\[\]:,])
    )""",
    re.VERBOSE,
)
_NAMES: dict[str, Any] = {"True": True, "False": False, "None": None}
_CLOSING = {"{": "}", "(": ")", "[": "]"}


def literal(text: str) -> Any:
    """The value of ``text``, one Python literal of the kinds the module lists."""
    tokens = _tokens(text)
    value, position = _value(tokens, 0, 0)
    if position != len(tokens):
        raise ValueError(f"unexpected {tokens[position][1]!r} after the value")
    return value


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    end = len(text.rstrip())
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None or match.lastgroup is None:
            raise ValueError(f"cannot read {text[position : position + 20].strip()!r}")
        tokens.append((match.lastgroup, match.group(match.lastgroup)))
        position = match.end()
    return tokens


def _value(tokens: list[tuple[str, str]], at: int, depth: int) -> tuple[Any, int]:
    if at >= len(tokens):
        raise ValueError("the header ends where a value was expected")
    kind, text = tokens[at]
    if kind == "string":
        return text[1:-1], at + 1
    if kind == "number":
        return _number(text), at + 1
    if kind == "name":
        if text not in _NAMES:
            raise ValueError(f"{text!r} is not a literal")
        return _NAMES[text], at + 1
    if text not in _CLOSING:
        raise ValueError(f"unexpected {text!r}")
    if depth >= MAX_DEPTH:
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    return _container(tokens, at, depth + 1)


def _number(text: str) -> int | float:
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    return float(text)


def _container(tokens: list[tuple[str, str]], at: int, depth: int) -> tuple[Any, int]:
    """A dict, tuple or list starting at ``tokens[at]`` (its opening bracket)."""
    opening = tokens[at][1]
    closing = _CLOSING[opening]
    items: list[Any] = []
    pairs: list[tuple[Any, Any]] = []
    commas = 0
    at += 1
    while True:
        if at >= len(tokens):
            raise ValueError(f"{opening!r} is never closed")
        if tokens[at] == ("punct", closing):
            at += 1
            break
        item, at = _value(tokens, at, depth)
        if opening == "{":
            if at >= len(tokens) or tokens[at] != ("punct", ":"):
                raise ValueError("expected ':' after a dict key")
            value, at = _value(tokens, at + 1, depth)
            pairs.append((item, value))
        else:
            items.append(item)
        if at < len(tokens) and tokens[at] == ("punct", ","):
            commas += 1
            at += 1
        elif at >= len(tokens) or tokens[at] != ("punct", closing):
            raise ValueError(f"expected ',' or {closing!r}")
    if opening == "{":
        try:
            return dict(pairs), at
        except TypeError:  # an unhashable key (a list)
            raise ValueError("a dict key must be a string, a number or a tuple") from None
    if opening == "[":
        return items, at
    # "(3)" is 3, "(3,)" and "()" are tuples: as Python reads them.
    return (items[0] if len(items) == 1 and commas == 0 else tuple(items)), at
