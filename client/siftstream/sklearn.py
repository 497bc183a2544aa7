"""``SiftSelector``: a Sift selector as a scikit-learn feature selector.

    pipe = make_pipeline(SiftSelector("faces", n_features_to_select=50), KMeans(20))
    pipe.fit(X)                        # streams X to a selector of its own, keeps its top 50

The estimator holds no connection and does nothing in ``__init__`` (scikit-learn's rules:
``get_params``, ``set_params`` and ``clone`` see the parameters exactly as given). Each fit opens
a ``Client`` for its requests:

* ``fit(X[, y])`` learns afresh in a selector of its own, ``<name>-<8 hex digits>``, created
  with ``method``, ``params``, X's width and a DataFrame's column names: clones (a grid search,
  cross-validation, ``n_jobs=2``) never touch each other's data. The fit reads what the
  estimator needs (support, scores, ranking) and then deletes that selector: a grid search
  leaves nothing behind, and ``transform`` needs no service. ``keep=True`` keeps it (to look
  at it, or to continue it with ``partial_fit``); the next fit deletes it then. The selector is
  created ``temporary`` (listings mark it, the dashboard hides it) unless kept, and the service
  deletes it after ``expires_after`` seconds without a chunk (an hour by default; None: never),
  which covers a fit that crashed before it could delete it. A delete that fails does not fail
  the fit (a warning is logged on the ``siftstream`` logger). ``selector_name_`` is its name,
  ``selector_kept_`` whether it still exists;
* ``partial_fit(X[, y])`` streams X's rows to ``selector_name_`` once fitted with
  ``keep=True``, else (not fitted) to the selector named ``name`` (created on first use; an
  existing one is used as it is: streaming batches into one selector that the dashboard shows;
  it is never deleted), then reads its selection again. After a fit that deleted its
  selector (``keep=False``) it raises ``ValueError``: there is nothing left to continue;
* ``transform`` keeps the selected columns (``SelectorMixin``); ``get_support``,
  ``get_feature_names_out`` and ``inverse_transform`` come with it.

A DataFrame's column names go with its rows: the service matches them to the selector's feature
names (the same columns in another order land on the right features; other names are refused).

Learned attributes: ``n_features_in_`` (and ``feature_names_in_`` for DataFrames), ``support_``
(the features of the service's ``/top``), ``ranking_`` (1 for the best; the selected features
in ``/top``'s order first, then the others by score), ``scores_`` (every feature's score from
``/weights``), ``version_`` and ``seen_`` (the selector's version and rows seen when read),
``top_`` (the ``/top`` answer), ``selector_name_``, ``selector_kept_``.

Methods: those whose chunks are rows (``fsds``, ``variance``) ignore ``y``; labelled methods
(``ocfs``, ``ioc``, ``anova``, ``chi2``: their chunk kind says so) require it as class labels,
and methods of rows with a target (``f_regression``, ``correlation``) as a numeric target, so a
Pipeline passes it on (``SelectKBest(f_regression)``'s selection, for one). The
methods whose chunks are feature columns over fixed samples (``ofs``, ``iqrp``) and the
multi-view ones (``omvfs``) do not stream rows of one matrix: they are refused with the
service's explanation (use ``Client.push_features`` or ``Client.push`` with views).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted

from siftstream._inputs import column_names
from siftstream.clients import Client
from siftstream.errors import InvalidInputError, NotFoundError, SiftClientError
from siftstream.results import SelectorInfo, Top, Weights

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # pragma: no cover - scikit-learn < 1.6

    def validate_data(estimator: Any, X: Any, **options: Any) -> Any:
        return estimator._validate_data(X, **options)


log = logging.getLogger("siftstream")

#: Seconds without a chunk after which the service deletes the selector a fit made.
DEFAULT_EXPIRES_AFTER = 3600.0
#: Attempts at reading /top and /weights of one version while producers keep committing.
_CONSISTENT_READS = 5


class SiftSelector(SelectorMixin, BaseEstimator):  # type: ignore[misc]
    """Select features with a streaming selector of a Sift service (see the module docstring).

    Parameters
    ----------
    name : the selector's name on the service.
    method : the method of a selector created on first use (default ``fsds``).
    n_features_to_select : how many features ``/top`` keeps (capped at the features there are).
    url, api_key : the service, and a key with the ``admin`` scope (to create and delete) or
        ``write`` (to stream to an existing selector); read as ``Client`` reads them (None:
        ``SIFT_URL``, else ``DEFAULT_URL``; ``SIFT_API_KEY``, else ``SIFT_API_TOKEN``).
    params : the method's hyperparameters for a selector created on first use.
    expires_after : seconds without a chunk after which the service deletes the selector a
        ``fit`` made (named ``selector_name_``) if the fit could not; None: never.
    keep : keep the selector a ``fit`` made (default False: the fit deletes it once it has
        read the selection; ``transform`` needs only what it read).
    """

    def __init__(
        self,
        name: str,
        *,
        method: str = "fsds",
        n_features_to_select: int = 10,
        url: str | None = None,
        api_key: str | None = None,
        params: dict[str, Any] | None = None,
        expires_after: float | None = DEFAULT_EXPIRES_AFTER,
        keep: bool = False,
    ) -> None:
        self.name = name
        self.method = method
        self.n_features_to_select = n_features_to_select
        self.url = url
        self.api_key = api_key
        self.params = params
        self.expires_after = expires_after
        self.keep = keep

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        # The selection comes from a service: a method whose result depends on how its chunks
        # were joined into updates (FSDS's sketch) may answer differently for the same X.
        tags.non_deterministic = True
        tags.requires_fit = True
        return tags

    def fit(self, X: Any, y: Any = None) -> SiftSelector:
        """Learn afresh in a selector of this fit's own, then delete it unless ``keep`` (see
        the module docstring)."""
        previous = getattr(self, "selector_name_", None)
        if not getattr(self, "selector_kept_", False):
            previous = None  # deleted by its fit already
        for attribute in [a for a in vars(self) if a.endswith("_") and not a.startswith("_")]:
            delattr(self, attribute)
        own = f"{self.name}-{secrets.token_hex(4)}"
        with self._client() as client:
            if previous is not None and previous != self.name:  # the last fit's own
                with contextlib.suppress(SiftClientError):
                    client.delete(previous)
            try:
                self._stream(client, own, X, y, reset=True, own=True)
            finally:  # a failed fit deletes what it made too (expiry covers a crash)
                if not self.keep:
                    self._let_go(client, own)
        self.selector_name_ = own
        self.selector_kept_ = bool(self.keep)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> SiftSelector:
        """Stream X's rows (and their labels or target y) to ``selector_name_`` once fitted (with
        ``keep=True``), else to the selector named ``name`` (created if needed), and read the
        selection again."""
        fitted = hasattr(self, "selector_name_")
        if fitted and not getattr(self, "selector_kept_", True):
            raise ValueError(
                f"selector '{self.selector_name_}', which this estimator learned in, was deleted "
                "at the end of its fit (keep=False): fit with keep=True to continue it with "
                "partial_fit"
            )
        target = self.selector_name_ if fitted else self.name
        with self._client() as client:
            self._stream(client, target, X, y, reset=not fitted, existing=fitted)
        self.selector_name_ = target
        self.selector_kept_ = True
        return self

    @staticmethod
    def _let_go(client: Client, name: str) -> None:
        """Delete the selector a fit made; a failure is logged, not raised (it expires)."""
        try:
            client.delete(name)
        except NotFoundError:
            pass  # never created (the fit failed first), or expired
        except SiftClientError as exc:
            log.warning(
                "SiftSelector could not delete its selector '%s' (%s); the service deletes it "
                "once it has been idle for expires_after",
                name,
                exc,
            )

    def _client(self) -> Client:
        return Client(self.url, self.api_key)

    def _stream(
        self,
        client: Client,
        name: str,
        X: Any,
        y: Any,
        reset: bool,
        *,
        existing: bool = False,
        own: bool = False,
    ) -> None:
        if not isinstance(self.n_features_to_select, int) or self.n_features_to_select < 1:
            chosen = self.n_features_to_select
            raise ValueError(f"n_features_to_select must be a positive integer; got {chosen!r}")
        names = column_names(X)
        rows = validate_data(self, X, reset=reset, accept_sparse="csr", dtype=np.float64)
        info = self._selector(client, name, int(rows.shape[1]), names, existing, own)
        carried = info.labelled or info.takes_targets
        if carried and y is None:
            what = "labelled rows" if info.labelled else "rows with a numeric target"
            raise ValueError(f"selector '{name}' ({info.method}) learns from {what}: pass y")
        client.push(name, rows, y if carried else None, feature_names=names)
        self._learn(client, name)

    def _selector(
        self,
        client: Client,
        name: str,
        width: int,
        names: list[str] | None,
        existing: bool,
        own: bool,
    ) -> SelectorInfo:
        """Selector ``name``, created for rows of ``width`` features if it does not exist (and
        is not one this estimator learned in already: that one is gone). A fit's ``own``
        expires when idle, and is temporary unless kept."""
        try:
            info = client.describe(name)
        except NotFoundError:
            if existing:
                raise ValueError(
                    f"selector '{name}', which this estimator learned in, no longer exists "
                    f"(expires_after={self.expires_after} s without a chunk, or deleted): fit "
                    "again"
                ) from None
            try:
                client.create(
                    name,
                    self.method,
                    n_features=width,
                    feature_names=names,
                    params=self.params,
                    expires_after=self.expires_after if own else None,
                    temporary=own and not self.keep,
                )
            except InvalidInputError as exc:
                raise ValueError(
                    f"SiftSelector streams the rows of X to a selector, and the service refused "
                    f"a '{self.method}' selector over {width} features: {exc.detail}"
                ) from exc
            info = client.describe(name)
        if info.chunk_kind not in ("rows", "labelled rows", "rows with a target"):
            raise ValueError(
                f"selector '{name}' ({info.method}) takes "
                + ("feature columns over fixed samples" if info.is_feature_stream else "views")
                + ", not rows of one matrix: use Client.push_features (columns) or Client.push "
                "with {view: rows}"
            )
        if info.n_features != width:
            raise ValueError(f"selector '{name}' has {info.n_features} features; X has {width}")
        return info

    def _learn(self, client: Client, name: str) -> None:
        """Read /top and /weights of one committed version into the learned attributes."""
        for _ in range(_CONSISTENT_READS):
            top = client.top(name, h=self.n_features_to_select)
            weights = client.weights(name)
            if weights.version == top.version:
                break
        self._remember(top, weights)

    def _remember(self, top: Top, weights: Weights) -> None:
        scores = np.asarray(weights.weights, dtype=np.float64)
        selected = top.indices
        support = np.zeros(scores.size, dtype=bool)
        support[selected] = True
        # The selected features in /top's order, then the others by score (ties: lower index).
        others = np.flatnonzero(~support)
        others = others[np.lexsort((others, -scores[others]))]
        ranking = np.empty(scores.size, dtype=np.int64)
        ranking[np.concatenate([selected, others])] = np.arange(1, scores.size + 1)
        self.top_ = top
        self.support_ = support
        self.scores_ = scores
        self.ranking_ = ranking
        self.version_ = top.version
        self.seen_ = top.seen

    def _get_support_mask(self) -> np.ndarray:
        check_is_fitted(self, "support_")
        mask: np.ndarray = self.support_
        return mask
