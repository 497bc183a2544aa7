"""The selector service: what the HTTP routes (and any other front end) call, in rooms.

Each room has one owner and one concern:

* ``lifecycle``: create (shaped by the method's chunk kind, sized by its parameters),
  describe, list, delete;
* ``ingest``: every write, from body to receipt (chunks, feature columns, merges), exactly once;
* ``reader``: committed state, decoded off the event loop, cached per version;
* ``rankings``: the h best features by score (per view for multi-view selectors);
* ``history``: the top features of recent versions (what drift looks like);
* ``drift``: how far the top h moved since the previous version and the baseline; the
  baseline; ``alerts``: webhooks raised when it moves (judged by ``monitor``, after commits);
* ``archives``: a selector exported as a self-describing archive, and imported from one;
* ``streams``: one log that several selectors apply, each exactly once, and their rankings side
  by side;
* one room per capability a method may offer (``service.algorithms.base``): ``decisions``
  (``DecidesOnArrival``), ``pivoted`` (``SelectsColumns``), ``merging`` (``Mergeable``),
  ``projections`` (``Projects``), ``clustering`` (``Clusters``).

No room asks which method a selector runs: it reads what the method declares.
"""

from __future__ import annotations

from service.applier import Applier
from service.config import Settings
from service.metrics import Metrics
from service.monitoring.monitor import Monitor
from service.selectors.alerts import Alerts
from service.selectors.archive import Archives
from service.selectors.clustering import Clustering
from service.selectors.decisions import Decisions
from service.selectors.drift import Drift
from service.selectors.history import History
from service.selectors.ingest import Ingest, Receipt
from service.selectors.lifecycle import Lifecycle
from service.selectors.merging import Merging
from service.selectors.pivoted import Pivoted
from service.selectors.projection import Projections
from service.selectors.rankings import Rankings
from service.selectors.reading import StateReader
from service.selectors.streams import Streams
from service.store.redis_store import SelectorStore

__all__ = ["Receipt", "Selectors"]


class Selectors:
    """The rooms of the selector service, wired together once per app."""

    def __init__(
        self, store: SelectorStore, applier: Applier, settings: Settings, metrics: Metrics
    ) -> None:
        self.store = store
        self.applier = applier
        self.settings = settings
        self.reader = StateReader(store, applier.checkpoint_now, applier.heads)
        self.lifecycle = Lifecycle(
            store, self.reader, settings, applier.checkpoint_now, applier.forget
        )
        self.decisions = Decisions(self.reader)
        self.ingest = Ingest(store, self.reader, applier, self.decisions, settings, metrics)
        self.pivoted = Pivoted(self.reader)
        self.rankings = Rankings(self.reader, store.checkpoints, self.pivoted, settings.history_top)
        self.merging = Merging(self.reader, self.ingest, applier, settings)
        self.projections = Projections(self.reader, settings)
        self.clustering = Clustering(self.reader)
        self.history = History(self.reader, store.history, applier, settings)
        self.archives = Archives(store, self.reader, applier, self.history, settings)
        self.streams = Streams(
            store, self.lifecycle, self.ingest, self.rankings, applier, settings, metrics
        )
        # Judges every commit of this process for baselines and alerts, off the commit's path.
        self.monitor = Monitor(store, settings, metrics, self.reader.feature_labels)
        applier.observe(self.monitor.committed)
        self.drift = Drift(self.reader, self.rankings, store, self.monitor, settings)
        self.alerts = Alerts(self.drift, store.monitoring, self.monitor, settings)
