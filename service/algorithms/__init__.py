"""The registry of streaming feature-selection methods the service can drive."""

from __future__ import annotations

from service.algorithms.base import Method
from service.algorithms.column_blocks import ColumnBlocks
from service.algorithms.fsds import FSDS
from service.algorithms.ioc import IOC
from service.algorithms.ocfs import OCFS
from service.algorithms.ofs import OFS
from service.algorithms.omvfs import OMVFS
from service.errors import InvalidInput

__all__ = ["METHODS", "get_method"]

METHODS: dict[str, Method] = {
    "fsds": FSDS(),
    "ofs": OFS(),
    "iqrp": ColumnBlocks(),
    "omvfs": OMVFS(),
    "ocfs": OCFS(),
    "ioc": IOC(),
}


def get_method(name: str) -> Method:
    """The method registered as ``name``; ``InvalidInput`` if there is none."""
    method = METHODS.get(name) if isinstance(name, str) else None
    if method is None:
        expected = ", ".join(sorted(METHODS))
        raise InvalidInput(f"unknown method {name!r}; expected one of: {expected}")
    return method
