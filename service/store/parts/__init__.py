"""The parts of ``SelectorStore``: one class per concern of the store, each a ``Room`` on the
``StoreCore`` (the client, the scripts, the keys) and an attribute of the store named below
(``store.log.append(...)``). A part that needs another is given it when the store is built.

* ``registry``: which selectors exist and what they are (create, import, describe, list,
  delete, expiry, feature names, the head);
* ``log``: the ingest log (appends and their idempotency records, the pending marks, what
  appliers take and read back);
* ``leases``: the applier lease;
* ``commits``: new versions, the commit records replay reads, the commit notices;
* ``checkpoints``: whole states (checkpoints), immutable segments, reads of the state;
* ``history``: the ranking history;
* ``monitoring``: the baseline drift is measured against, alerts and the events they raised;
* ``streams``: streams, their logs, and the selectors attached to them.
"""
