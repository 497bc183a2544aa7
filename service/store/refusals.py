"""What the append scripts' refusals mean (``append_entry.lua``: ``APPEND``, for a selector, a
stream or a source, and ``APPEND_COMMIT``), said once for every log they append to. The refusals
that change what a process keeps (``NOTFOUND``, ``INCARNATION``: a description to forget) are
the callers'."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.errors import Conflict, IdempotencyMismatch, SiftError
from service.store.records import as_text


def attached_to_stream(selector: str, stream: str) -> Conflict:
    """A chunk for a selector that applies a stream's chunks instead."""
    return Conflict(
        f"selector '{selector}' is attached to stream '{stream}' and applies its chunks: "
        f"expected them at POST /v1/streams/{stream}/chunks"
    )


def append_refusal(
    status: str, reply: Sequence[Any], owner: str, name: str, idempotency_key: str | None
) -> SiftError | None:
    """The error of an append's reply ``status`` (None when it is not a refusal this
    function knows); ``owner`` is ``selector`` or ``stream``, ``name`` its name."""
    if status == "ATTACHED":
        return attached_to_stream(name, as_text(reply[1]))
    if status == "MISMATCH":
        return IdempotencyMismatch(
            f"Idempotency-Key '{idempotency_key}' was first used with a different body"
        )
    if status == "NAME_TAKEN":
        return Conflict(
            f"feature name '{as_text(reply[1])}' is already used by feature "
            f"{as_text(reply[2])} of {owner} '{name}'; expected a new name"
        )
    if status == "NAME_RESERVED":
        return Conflict(
            f"feature name '{as_text(reply[1])}' is reserved: 'f<i>' is the name shown for "
            f"unnamed feature i, and this column is feature {as_text(reply[2])}"
        )
    return None
