"""The registry of streaming feature-selection methods the service can drive."""

from __future__ import annotations

from typing import TypeVar

from service.algorithms.base import AnyMethod, offers
from service.algorithms.fsds import FSDS
from service.algorithms.ioc import IOC
from service.algorithms.iqrp import IQRP
from service.algorithms.ocfs import OCFS
from service.algorithms.ofs import OFS
from service.algorithms.omvfs import OMVFS
from service.algorithms.regression import Correlation, FRegression
from service.algorithms.univariate import ANOVA, Chi2
from service.algorithms.variance import Variance
from service.errors import InvalidInput, SelectorMismatch

__all__ = ["METHODS", "get_method", "require_capability"]

Capability = TypeVar("Capability")

METHODS: dict[str, AnyMethod] = {
    "fsds": FSDS(),
    "ofs": OFS(),
    "iqrp": IQRP(),
    "omvfs": OMVFS(),
    "ocfs": OCFS(),
    "ioc": IOC(),
    "variance": Variance(),
    "anova": ANOVA(),
    "chi2": Chi2(),
    "f_regression": FRegression(),
    "correlation": Correlation(),
}


def get_method(name: str) -> AnyMethod:
    """The method registered as ``name``; ``InvalidInput`` if there is none."""
    method = METHODS.get(name) if isinstance(name, str) else None
    if method is None:
        expected = ", ".join(sorted(METHODS))
        raise InvalidInput(f"unknown method {name!r}; expected one of: {expected}")
    return method


def require_capability(
    method: AnyMethod, capability: type[Capability], needs: str, selector: str, takes: str = ""
) -> Capability:
    """``method`` as ``capability``, or the 422 every capability gate answers: ``needs`` (what
    the request needs, phrased for the message), the methods that offer it, and what
    ``selector`` runs instead (``takes``: what its chunks are, when that helps)."""
    if offers(method, capability):
        return method
    offered = ", ".join(name for name, m in METHODS.items() if offers(m, capability))
    which = f", which takes {takes}" if takes else ""
    raise SelectorMismatch(f"{needs} ({offered}); selector '{selector}' runs {method.name}{which}")
