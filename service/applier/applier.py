"""``Applier``, the one entry point: the parts of the applier composed (``core`` ->
``scheduling`` -> ``checkpoints`` -> ``drain`` -> ``waits``, each building on the one before).
"""

from __future__ import annotations

from service.applier.waits import Waits


class Applier(Waits):
    """Drives the appliers of this process; any replica may apply any selector.

    Poison entries never jam a selector: an entry whose update fails because of what it holds
    is rejected (moved aside with its reason, see ``Commits.commit``) and the log goes
    on. A failing batch of several entries is retried one entry at a time, so only the culprit
    is rejected. Failures that may not repeat (out of memory, the applying process dying) are
    counted per entry in Redis and reject it after ``max_apply_attempts``: every attempt is
    counted when it starts (``TAKE``), and a process that is alive takes its attempt back
    (``forgive_attempts``) when it ended for a reason that is no fault of the entry
    (``NOT_THE_ENTRYS_FAULT``: Redis paused or slow, the lease lost), so that only processes
    that died computing, and computations that failed, count. Failures that are not any
    entry's fault back off per selector instead, so the log is not flooded.

    A selector deleted and created again under its name is another selector (its
    ``incarnation``): a drain, a backoff and a waiter belong to one incarnation, and a chunk to
    the new one is applied at once, whatever is left of the old one here.

    Every version's top features go to the selector's ranking history (``SIFT_HISTORY_TOP`` of
    them, ``SIFT_HISTORY_VERSIONS`` versions kept), computed in the worker thread with the
    update and written by the commit script itself.
    """
