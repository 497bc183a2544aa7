"""``SiftSelector``: a Sift selector as a scikit-learn feature selector.

    pipe = make_pipeline(SiftSelector("faces", n_features_to_select=50), KMeans(20))
    pipe.fit(X)                        # streams X to the selector "faces", keeps its top 50

The estimator holds no connection and does nothing in ``__init__`` (scikit-learn's rules:
``get_params``, ``set_params`` and ``clone`` see the parameters exactly as given). Each fit opens
a ``Client`` for its requests:

* ``partial_fit(X[, y])`` streams X's rows to the named selector (created on first use with
  ``method``, ``params``, X's width and a DataFrame's column names; an existing selector is used
  as it is), then reads its top ``n_features_to_select`` features;
* ``fit(X[, y])`` starts afresh: it deletes the named selector if it exists, then does the same;
* ``transform`` keeps the selected columns (``SelectorMixin``); ``get_support``,
  ``get_feature_names_out`` and ``inverse_transform`` come with it.

Learned attributes: ``n_features_in_`` (and ``feature_names_in_`` for DataFrames), ``support_``
(the features of the service's ``/top``), ``ranking_`` (1 for the best; the selected features
in ``/top``'s order first, then the others by score), ``scores_`` (every feature's score from
``/weights``), ``version_`` and ``seen_`` (the selector's version and rows seen when read),
``top_`` (the ``/top`` answer).

Methods: those whose chunks are rows (``fsds``, ``variance``) ignore ``y``; labelled methods
(``ocfs``, ``ioc``: the service lists their classes) require it, so a Pipeline passes it on. The
methods whose chunks are feature columns over fixed samples (``ofs``, ``iqrp``) and the
multi-view ones (``omvfs``) do not stream rows of one matrix: they are refused with the
service's explanation (use ``Client.push_features`` or ``Client.push`` with views).

Several estimators fitted with the same ``name`` (clones in a grid search) share, and refit, one
selector on the service: give each its own name.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.validation import check_is_fitted

from service.client._inputs import column_names
from service.client.clients import DEFAULT_URL, Client
from service.client.errors import InvalidInputError, NotFoundError
from service.client.results import SelectorInfo, Top, Weights

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # pragma: no cover - scikit-learn < 1.6

    def validate_data(estimator: Any, X: Any, **options: Any) -> Any:
        return estimator._validate_data(X, **options)


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
        ``write`` (to stream to an existing selector).
    params : the method's hyperparameters for a selector created on first use.
    """

    def __init__(
        self,
        name: str,
        *,
        method: str = "fsds",
        n_features_to_select: int = 10,
        url: str = DEFAULT_URL,
        api_key: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.method = method
        self.n_features_to_select = n_features_to_select
        self.url = url
        self.api_key = api_key
        self.params = params

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def fit(self, X: Any, y: Any = None) -> SiftSelector:
        """Start the named selector afresh (deleting what it held) and stream X (and y) to it."""
        for attribute in [a for a in vars(self) if a.endswith("_") and not a.startswith("_")]:
            delattr(self, attribute)
        with self._client() as client:
            with contextlib.suppress(NotFoundError):
                client.delete(self.name)
            return self._stream(client, X, y, reset=True)

    def partial_fit(self, X: Any, y: Any = None) -> SiftSelector:
        """Stream X's rows (and their labels y) to the named selector, creating it if needed,
        and read its selection again."""
        with self._client() as client:
            return self._stream(client, X, y, reset=not hasattr(self, "n_features_in_"))

    def _client(self) -> Client:
        return Client(self.url, self.api_key)

    def _stream(self, client: Client, X: Any, y: Any, reset: bool) -> SiftSelector:
        if not isinstance(self.n_features_to_select, int) or self.n_features_to_select < 1:
            chosen = self.n_features_to_select
            raise ValueError(f"n_features_to_select must be a positive integer; got {chosen!r}")
        names = column_names(X)
        rows = validate_data(self, X, reset=reset, accept_sparse="csr", dtype=np.float64)
        info = self._selector(client, int(rows.shape[1]), names)
        # Labelled methods list the classes they have seen; rows-only methods have no classes.
        labelled = info.classes is not None
        if labelled and y is None:
            raise ValueError(
                f"selector '{self.name}' ({info.method}) learns from labelled rows: pass y"
            )
        client.push(self.name, rows, y if labelled else None)
        self._learn(client)
        return self

    def _selector(self, client: Client, width: int, names: list[str] | None) -> SelectorInfo:
        """The named selector, created for rows of ``width`` features if it does not exist."""
        try:
            info = client.describe(self.name)
        except NotFoundError:
            try:
                client.create(
                    self.name,
                    self.method,
                    n_features=width,
                    feature_names=names,
                    params=self.params,
                )
            except InvalidInputError as exc:
                raise ValueError(
                    f"SiftSelector streams the rows of X to a selector, and the service refused "
                    f"a '{self.method}' selector over {width} features: {exc.detail}"
                ) from exc
            info = client.describe(self.name)  # describing lists classes (labelled methods)
        if info.is_feature_stream or info.views is not None:
            raise ValueError(
                f"selector '{self.name}' ({info.method}) takes "
                + ("feature columns over fixed samples" if info.is_feature_stream else "views")
                + ", not rows of one matrix: use Client.push_features (columns) or Client.push "
                "with {view: rows}"
            )
        if info.n_features != width:
            raise ValueError(
                f"selector '{self.name}' has {info.n_features} features; X has {width}"
            )
        return info

    def _learn(self, client: Client) -> None:
        """Read /top and /weights of one committed version into the learned attributes."""
        for _ in range(_CONSISTENT_READS):
            top = client.top(self.name, h=self.n_features_to_select)
            weights = client.weights(self.name)
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
