"""OMVFS's parameters (Algorithm 1's K, s, alpha_v, beta_v, gamma; the kernel; the ranking),
declared once; the package docstring says why the defaults differ from the paper's."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from service.algorithms.params import computed
from service.algorithms.subsamples import ResampledParams
from service.errors import InvalidParams

#: Default k of the similarity graph (``neighbours``; null keeps the dense kernel).
NEIGHBOURS = 10
#: Default ``tol``: the relative change of U and of each V^(v) per iteration to stop at.
TOL = 1e-3
#: ``gamma: "auto"`` is this times ``|X_[s,t]|_F^2 / K``, the scale of the fit term.
GAMMA_SCALE = 0.1
#: The rankings ``score`` offers (package docstring); the first is the default.
Score = Literal["explained", "scaled", "paper"]
SCORES: tuple[str, ...] = get_args(Score)
#: The ranking of selectors whose stored params have no ``score`` (created before it existed).
SCORE_BEFORE_CHOICE = "paper"

NonNegative = Annotated[float, Field(ge=0)]
Positive = Annotated[float, Field(gt=0)]
#: A weight for every view alike, or one per view (``{view: weight}``, every view named).
PerView = NonNegative | dict[str, NonNegative]


class OMVFSParams(ResampledParams):
    """Shao et al., Algorithm 1 (see docs/methods/omvfs.md)."""

    method: ClassVar[str] = "omvfs"
    filled_by_service: ClassVar[tuple[str, ...]] = ("views",)

    #: ``{view: features}`` in chunk order: the selector's shape, filled in by the service.
    views: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    n_clusters: int = Field(10, ge=1, description="K.")
    buffer_chunks: int = Field(2, ge=1, description="s: chunks kept in the buffer.")
    alpha: PerView = computed("Graph weight, one for all views or per view (default 1).")
    beta: PerView = computed("Sparsity weight, one for all views or per view (default 1).")
    gamma: NonNegative | Literal["auto"] = Field(
        "auto",
        description='Orthogonality weight: "auto" (0.1 |X|_F^2 / K of the buffer) or a number '
        "(the paper's: 1e7).",
    )
    max_iter: int = Field(200, ge=1, description="Iterations per chunk at most.")
    tol: float = Field(TOL, gt=0, description="Relative change of U and of each V to stop at.")
    bandwidth: Positive | dict[str, Positive] | None = Field(
        None, description="Gaussian sigma, for all views or per view (null: median distance)."
    )
    neighbours: int | None = Field(
        NEIGHBOURS, ge=1, description="kNN graph: buffer rows kept per new row (null: dense)."
    )
    normalize_rows: bool = Field(True, description="Scale rows to unit norm per view.")
    score: Score = Field(
        "explained",
        description="explained: the share of each feature's variance the clusters explain; "
        "scaled: the row norm of V over the feature's root mean square; paper: the row norm "
        "of V (step 19).",
    )
    seed: int = Field(0, ge=0, lt=2**63, description="Seed of the random starts.")

    def complete(self, size: int, stored: bool) -> None:
        if not self.views:
            raise InvalidParams(
                'omvfs needs "views": {"<view name>": <number of features>, ...} (at least one)'
            )
        total = sum(self.views.values())
        if total != size:
            raise InvalidParams(f"the views add up to {total} features; expected {size}")
        self.alpha = self._per_view("alpha", self.alpha, 1.0)
        self.beta = self._per_view("beta", self.beta, 1.0)
        if self.bandwidth is not None:
            self.bandwidth = self._per_view("bandwidth", self.bandwidth, 0.0)
        if stored and "score" not in self.model_fields_set:
            # Selectors created before the choice existed keep the paper's ranking.
            self.score = SCORE_BEFORE_CHOICE  # type: ignore[assignment]

    def _per_view(
        self, name: str, value: float | dict[str, float] | None, default: float
    ) -> dict[str, float]:
        """One value for every view (``{view: value}``); an object must name every view."""
        if isinstance(value, dict):
            if set(value) != set(self.views):
                raise InvalidParams(
                    f"{name} must give every view a value: expected keys {list(self.views)}; "
                    f"got {sorted(value)}"
                )
            return {view: float(value[view]) for view in self.views}
        return {view: default if value is None else float(value) for view in self.views}

    @property
    def view_dims(self) -> list[tuple[str, int]]:
        """``(view, features)`` in chunk order."""
        return list(self.views.items())

    @property
    def offsets(self) -> list[int]:
        out = [0]
        for dim in self.views.values():
            out.append(out[-1] + dim)
        return out

    @property
    def alphas(self) -> list[float]:
        return self._in_view_order(self.alpha)

    @property
    def betas(self) -> list[float]:
        return self._in_view_order(self.beta)

    @property
    def bandwidths(self) -> list[float] | None:
        return None if self.bandwidth is None else self._in_view_order(self.bandwidth)

    def _in_view_order(self, per_view: float | dict[str, float]) -> list[float]:
        assert isinstance(per_view, dict), "complete() made every per-view value an object"
        return [per_view[view] for view in self.views]

    def gamma_for(self, squared_norm: float) -> float:
        """The orthogonality weight of a chunk whose buffer holds ``|X_[s,t]|_F^2``."""
        if self.gamma == "auto":
            return GAMMA_SCALE * squared_norm / self.n_clusters
        return float(self.gamma)
