"""The Lua scripts of the store: every multi-key step that must be atomic.

Each script is a file of ``service/store/lua/`` whose comment header says its KEYS, its ARGV,
what it replies and why it is shaped so; a line ``-- uses: int, now`` names the function files
(``int.lua``, ``now.lua``, ...) put in front of it, in that order (a function file's own
needs are listed by the scripts that use it: nothing is expanded twice). They are read once,
when this module is imported, and registered with Redis by ``SelectorStore`` (``EVALSHA``,
loaded again after a Redis restart).

All keys a script touches belong to one selector (or one stream) and share its hash tag, so each
script runs in a single slot on Redis Cluster. Keys reached through a set (state blobs,
idempotency records) are not declared in KEYS; they carry the same hash tag, which Redis Cluster
tolerates in practice.
Replies are arrays whose first element is a status word; ``redis.call('TIME')`` is used as the
clock so every replica of the service agrees on ``updated_at`` (Redis 7 replicates effects).
"""

from __future__ import annotations

import re
from importlib import resources

#: The scripts, by the name the store runs them under (each ``lua/<name>.lua``).
NAMES = (
    "stage",
    "create",
    "delete",
    "append",
    "take",
    "forgive_attempts",
    "acquire_lease",
    "renew_lease",
    "release_lease",
    "commit",
    "append_commit",
    "checkpoint",
    "read_fields",
    "record_history",
    "unmark_pending",
    "stream_create",
    "stream_read",
    "stream_delete",
    "attach",
    "release",
    "take_attempt",
    "detach",
    "stream_cut",
    "detach_cut",
    "set_baseline",
    "create_alert",
    "claim_crossing",
    "rotate_alert_secret",
    "claim_deliveries",
    "settle_delivery",
    "redeliver_event",
    "rearm_alert",
    "remark",
    "source_position",
    "source_restart",
)

_USES = re.compile(r"^-- uses: (.+)$", re.MULTILINE)


def _file(name: str) -> str:
    return (resources.files(__package__) / "lua" / f"{name}.lua").read_text(encoding="utf-8")


def source(name: str) -> str:
    """The text Redis runs for script ``name``: the functions it uses, then the script."""
    text = _file(name)
    used = _USES.search(text)
    functions = [part.strip() for part in used.group(1).split(",")] if used else []
    return "".join(_file(function) for function in functions) + text


ALL: dict[str, str] = {name: source(name) for name in NAMES}
