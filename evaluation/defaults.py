"""The defaults each method resolves to in this checkout, for the report.

Other changes move defaults (FSDS's shrink schedule and forgetting, OMVFS's ranking), so the
report says what was in force when it ran: each method's ``resolve_params`` on a representative
size with no parameters, and whether the optional parameters the tasks look for are accepted.
"""

from __future__ import annotations

import json
from typing import Any

from evaluation.protocol import accepts
from service.algorithms import METHODS

#: Parameters a method needs at creation (OMVFS: its views), and the size resolved at.
_REQUIRED: dict[str, tuple[dict[str, Any], int]] = {
    "fsds": ({}, 1024),
    "ofs": ({}, 1440),
    "iqrp": ({}, 1440),
    "omvfs": ({"views": {"fou": 76, "pix": 240}}, 316),
    "ocfs": ({}, 1024),
    "ioc": ({}, 1024),
    "variance": ({}, 1024),
}

#: Options the tasks use when a method offers them (checked with ``resolve_params``).
PROBES: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("fsds", {"decay": 0.999}, "FSDS forgetting (`decay`)"),
    ("fsds", {"block_rows": None}, "FSDS one shrink per chunk (`block_rows: null`)"),
    ("omvfs", {"score": "paper"}, 'OMVFS paper ranking (`score: "paper"`)'),
)


def defaults_in_force() -> list[str]:
    lines = []
    for name, method in METHODS.items():
        params, size = _REQUIRED.get(name, ({}, 100))
        resolved = method.resolve_params(params, size).as_params()
        lines.append(f"`{name}` (size {size}): `{json.dumps(resolved, sort_keys=True)}`")
    for name, extra, what in PROBES:
        params, size = _REQUIRED[name]
        offered = accepts(name, {**params, **extra}, size) is not None
        lines.append(f"{what}: {'offered' if offered else 'not offered in this checkout'}")
    return lines
