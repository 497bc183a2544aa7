"""The registry of streaming feature-selection methods the service can drive."""

from __future__ import annotations

from service.algorithms.base import AnyMethod
from service.algorithms.fsds import FSDS
from service.algorithms.ioc import IOC
from service.algorithms.iqrp import IQRP
from service.algorithms.ocfs import OCFS
from service.algorithms.ofs import OFS
from service.algorithms.omvfs import OMVFS
from service.algorithms.variance import Variance
from service.errors import InvalidInput

__all__ = ["METHODS", "get_method"]

METHODS: dict[str, AnyMethod] = {
    "fsds": FSDS(),
    "ofs": OFS(),
    "iqrp": IQRP(),
    "omvfs": OMVFS(),
    "ocfs": OCFS(),
    "ioc": IOC(),
    "variance": Variance(),
}


def get_method(name: str) -> AnyMethod:
    """The method registered as ``name``; ``InvalidInput`` if there is none."""
    method = METHODS.get(name) if isinstance(name, str) else None
    if method is None:
        expected = ", ".join(sorted(METHODS))
        raise InvalidInput(f"unknown method {name!r}; expected one of: {expected}")
    return method
