"""The rooms of ``SelectorStore``: one class per concern of the store, each deriving from
``StoreCore`` (the client, the scripts, the keys); ``SelectorStore`` is all of them at once.

* ``registry``: which selectors exist and what they are (create, import, describe, list,
  delete, expiry, feature names, the head);
* ``log``: the ingest log (appends and their idempotency records, the pending marks, what
  appliers take and read back);
* ``leases``: the applier lease;
* ``commits``: new versions, the commit records replay reads, the commit notices;
* ``checkpoints``: whole states (checkpoints), immutable segments, reads of the state;
* ``history``: the ranking history;
* ``monitoring``: the baseline drift is measured against, alerts and the events they raised.
"""
