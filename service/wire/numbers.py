"""The one grammar of numbers written as text, wherever a number comes as text: a CSV body's
fields (``service.wire.tables``) and a Redis stream entry's values (``service.sources.entries``).

A number is an optional sign, then ASCII digits with an optional decimal point (``7``, ``-2.5``,
``.5``, ``5.``) and an optional exponent (``3e-7``), or ``nan``, ``inf`` or ``infinity`` in any
case (parsed, then refused as every format refuses them, by ``rows.validate_rows``); whitespace
around it is ignored. Nothing else: no digit separators (``1_000``), no digits of other
scripts, no hexadecimal, which Python's ``float()`` would take. numpy's C reader, which parses a
CSV body's fields, reads exactly this set.
"""

from __future__ import annotations

import re

#: A number as text (``fullmatch``); the whitespace is Python's (numpy's reader skips the same).
NUMBER = re.compile(
    r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)\s*",
    re.IGNORECASE,
)


def parse_number(text: str | bytes) -> float:
    """The number ``text`` spells; ValueError if it is not one (or is not UTF-8)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8")
    if NUMBER.fullmatch(text) is None:
        raise ValueError(f"not a number: {text[:40]!r}")
    return float(text)


def is_number(text: str) -> bool:
    """Whether ``text`` spells a number."""
    return NUMBER.fullmatch(text) is not None
