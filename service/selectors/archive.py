"""Selector archives: one selector's committed state as a self-describing file, and back.

``GET /v1/selectors/{name}/export`` writes one; ``POST /v1/selectors/import`` recreates the
selector from it (under its name or another), at the same version and count of items seen, so
that it answers as the original did and goes on from there with the next chunk.

Format (version 1; every integer little-endian)::

    offset  size  field
    0       8     magic b"SIFTARCH"
    8       4     format version (u32): 1
    12      4     reserved, 0
    16      8     manifest length M (u64)
    24      M     manifest: UTF-8 JSON (below)
    24+M    D     members: the bytes the manifest lists, back to back in its order
    end-32  32    SHA-256 of every byte before it

The manifest says what the archive holds: ``format`` ("sift-selector-archive"),
``format_version``, ``sift_version``, ``exported_at``; ``selector`` (name, method, resolved
params, created_at, and the shape fields of a creation body: ``n_features`` with
``feature_names``, ``views`` with per-view ``feature_names``, or ``n_samples``); ``version``,
``items_seen`` (and the same number under the answers' name, ``rows_seen`` or
``features_seen``), ``updated_at``; ``item_names`` (``[[index, name], ...]``: the names given
to feature columns on arrival); ``state`` and ``segments``, each a list of
``{"field"|"id", "length"}`` members in the order of their bytes: every state field as a codec
blob (``service.store.codec``: an array blob with its own CRC32, or the scalars' JSON) and every
immutable segment the state refers to (IQRP's blocks of columns, as array blobs).

Not included: the ingest log (an export first waits until it is applied), idempotency records
(a retry against the imported selector is a new request), rejected entries, and the ranking
history (the import starts it anew with one entry at its version).

Reading one is as careful as reading a chunk: the size is checked before the body is read (by
the route), then the magic, the format version (another one is refused, naming the versions
understood), the digest (damage anywhere is a 422), the manifest's structure, every member's
codec checksum, and finally the method's own rules for its state (``check_state``), so no
archive can create a selector that a later chunk or a reader would fail on. Nothing is ever
unpickled: arrays are codec blobs, everything else is JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from service.algorithms import get_method
from service.algorithms.base import AnyMethod, State, StoresSegments, check_state
from service.algorithms.params import MethodParams
from service.applier import (
    Applier,
    UpdateFailed,
    compute_update,
    publish,
    resolved_params,
    state_size_problem,
)
from service.config import Settings
from service.errors import (
    CodecError,
    Forbidden,
    Inconsistent,
    InvalidInput,
    SelectorMismatch,
    StateTooLarge,
    shown,
)
from service.selectors.history import History
from service.selectors.lifecycle import Admit, selector_out, shaped_meta
from service.selectors.reading import StateReader, settle
from service.selectors.results import SelectorOut
from service.store.codec import (
    array_nbytes,
    decode_array,
    decode_state,
    encode_state,
    stored_nbytes,
)
from service.store.inventory import declared_state_bytes
from service.store.keys import validate_name
from service.store.records import Imported, SelectorMeta, Snapshot
from service.store.redis_store import SelectorStore
from service.wire.kinds import ChunkFormat, Shape, chunk_format, creation_shape
from service.wire.names import validate_names

#: The media type of an archive (``application/octet-stream`` is accepted on import too).
MEDIA_TYPE = "application/vnd.sift.archive"
MAGIC = b"SIFTARCH"
FORMAT = "sift-selector-archive"
FORMAT_VERSION = 1
#: The format versions this server reads.
READABLE_VERSIONS = (1,)

_PREAMBLE = struct.Struct("<8sIIQ")  # magic, format version, reserved, manifest length
_DIGEST_BYTES = hashlib.sha256().digest_size
#: ``f<j>``: the name shown for an unnamed item ``j`` (``service.store.records.default_name``).
_DEFAULT_NAME = re.compile(r"f([0-9]+)")


def _sift_version() -> str:
    try:
        return importlib.metadata.version("siftstream-server")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree
        return "unknown"


@dataclass(frozen=True)
class Archive:
    """What an archive holds, read and checked for structure (not yet for the method)."""

    manifest: dict[str, Any]
    #: Encoded state fields and segments, by name, as the manifest lists them.
    state: dict[str, bytes]
    segments: dict[str, bytes]


# -- writing ---------------------------------------------------------------------------------


def pack(snapshot: Snapshot, kind: ChunkFormat, segments: dict[str, bytes]) -> bytes:
    """An archive of ``snapshot`` (and the ``segments`` its state refers to)."""
    meta, head = snapshot.meta, snapshot.head
    members = [*snapshot.state.values(), *segments.values()]
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sift_version": _sift_version(),
        "exported_at": time.time(),
        "selector": {
            "name": meta.name,
            "method": meta.method,
            "params": meta.params,
            "created_at": meta.created_at,
            **creation_shape(meta),
        },
        "version": head.version,
        "items_seen": head.items_seen,
        kind.seen_field: head.items_seen,
        "updated_at": head.updated_at,
        "item_names": sorted([index, name] for index, name in snapshot.item_names.items()),
        "state": [{"field": f, "length": len(v)} for f, v in snapshot.state.items()],
        "segments": [{"id": s, "length": len(v)} for s, v in segments.items()],
    }
    encoded = json.dumps(manifest, allow_nan=False, ensure_ascii=False).encode("utf-8")
    body = b"".join([_PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0, len(encoded)), encoded, *members])
    return body + hashlib.sha256(body).digest()


# -- reading ---------------------------------------------------------------------------------

#: Largest version or count an archive may carry: 2^53 - 1, the largest integer every JSON
#: client (a browser's numbers are doubles) and Redis's Lua scripts count exactly.
MAX_COUNT = 2**53 - 1
#: Latest creation time an archive may carry (seconds since 1970): the year 9999.
LATEST_TIME = 253_402_300_799.0


def unpack(body: bytes) -> Archive:
    """The manifest and members of an archive; InvalidInput (422) for anything else."""
    view = memoryview(body)
    if len(view) < _PREAMBLE.size + _DIGEST_BYTES:
        raise InvalidInput(
            f"not a Sift selector archive: {len(view)} bytes, fewer than the "
            f"{_PREAMBLE.size + _DIGEST_BYTES} of an empty one"
        )
    magic, version, reserved, manifest_length = _PREAMBLE.unpack_from(view, 0)
    if magic != MAGIC:
        raise InvalidInput(
            f"not a Sift selector archive: it starts with {bytes(magic)!r}, expected {MAGIC!r} "
            "(export one with GET /v1/selectors/{name}/export)"
        )
    if version not in READABLE_VERSIONS:
        raise InvalidInput(
            f"archive format version {version} is not understood here; this server reads "
            f"format version(s) {', '.join(map(str, READABLE_VERSIONS))}"
        )
    content = view[: len(view) - _DIGEST_BYTES]
    if hashlib.sha256(content).digest() != bytes(view[len(content) :]):
        raise InvalidInput(
            "the archive is damaged: its SHA-256 does not match its content (truncated, or "
            "changed in transit)"
        )
    if reserved != 0 or manifest_length > len(content) - _PREAMBLE.size:
        raise InvalidInput(
            f"the archive's header is inconsistent: manifest of {manifest_length} bytes in "
            f"{len(content)}"
        )
    members_at = _PREAMBLE.size + manifest_length
    manifest = _manifest(bytes(content[_PREAMBLE.size : members_at]))
    state_list = _members(manifest, "state", "field")
    segment_list = _members(manifest, "segments", "id")
    if sum(length for _, length in state_list + segment_list) != len(content) - members_at:
        raise InvalidInput(
            f"the archive's members take {len(content) - members_at} bytes; its manifest lists "
            f"{sum(length for _, length in state_list + segment_list)}"
        )
    offset = members_at
    taken: list[dict[str, bytes]] = []
    for listed in (state_list, segment_list):
        part: dict[str, bytes] = {}
        for name, length in listed:
            part[name] = bytes(content[offset : offset + length])
            offset += length
        taken.append(part)
    return Archive(manifest, taken[0], taken[1])


def _manifest(raw: bytes) -> dict[str, Any]:
    def reject_constant(token: str) -> float:
        raise ValueError(f"{token} is not JSON")

    try:
        manifest = json.loads(raw.decode("utf-8"), parse_constant=reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"the archive's manifest is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise InvalidInput(f"the archive's manifest does not describe a {FORMAT}")
    if manifest.get("format_version") not in READABLE_VERSIONS:
        raise Inconsistent(
            f"the manifest says format version {manifest.get('format_version')!r}; the "
            f"header {FORMAT_VERSION}"
        )
    return manifest


def _members(manifest: dict[str, Any], key: str, label: str) -> list[tuple[str, int]]:
    listed = manifest.get(key)
    out: list[tuple[str, int]] = []
    if not isinstance(listed, list):
        raise InvalidInput(f"the archive's manifest lacks the list '{key}'")
    for member in listed:
        name = member.get(label) if isinstance(member, dict) else None
        length = member.get("length") if isinstance(member, dict) else None
        if not isinstance(name, str) or not name or not _is_count(length):
            raise InvalidInput(
                f"every entry of the manifest's '{key}' is {{'{label}': <name>, 'length': "
                f"<bytes>}}; got {str(member)[:100]}"
            )
        out.append((name, length))
    if len({name for name, _ in out}) != len(out):
        raise Inconsistent(f"the manifest's '{key}' names a member twice")
    return out


def _count(manifest: dict[str, Any], key: str) -> int:
    """A count of the manifest: an integer in [0, ``MAX_COUNT``] (what every JSON client reads
    exactly, and what the store's scripts count with)."""
    value = manifest.get(key)
    if not _is_count(value) or value > MAX_COUNT:
        raise InvalidInput(
            f"the archive's '{key}' must be an integer from 0 to {MAX_COUNT}; got {shown(value)}"
        )
    return value


def _is_count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _field(document: dict[str, Any], key: str, kinds: type | tuple[type, ...]) -> Any:
    value = document.get(key)
    if not isinstance(value, kinds) or isinstance(value, bool):
        raise InvalidInput(f"the archive's manifest lacks a valid '{key}'; got {value!r}")
    return value


@dataclass(frozen=True)
class Restored:
    """A checked archive, ready for the store: everything a selector is at one version."""

    meta: SelectorMeta
    kind: ChunkFormat
    version: int
    items_seen: int
    state: dict[str, bytes]
    segments: dict[str, bytes]
    item_names: dict[int, str]


def restore(archive: Archive, name: str | None, max_state_bytes: int) -> Restored:
    """Check an archive as a creation body and a state of its method; worker-thread work.

    The selector is described exactly as a creation would (its shape through its chunk kind,
    its parameters resolving to themselves, the state limit), then its state must be one its
    method could have reached (``check_state``) with as many scores as features, and the names
    given on arrival must be names the ingest path would have accepted.
    """
    manifest = archive.manifest
    described = _field(manifest, "selector", dict)
    name = validate_name(name if name is not None else described.get("name"))
    method = get_method(_field(described, "method", str))
    kind = chunk_format(method.chunk_kind)
    shape, resolved = _shape_and_params(described, method, kind)
    version = _count(manifest, "version")
    items_seen = _items_seen(manifest, kind)
    created_at = _created_at(described)
    meta = shaped_meta(name, method.name, resolved.as_params(), created_at, shape)
    state, segments = _decoded(archive, max_state_bytes)
    check_state(method, state, resolved, segments)
    _check_scores(method, kind, meta, state, items_seen)
    _check_takes_a_chunk(meta, kind, state, max_state_bytes)
    return Restored(
        meta=meta,
        kind=kind,
        version=version,
        items_seen=items_seen,
        # Re-encoded: exactly the fields the state has, in the codec's own form.
        state=encode_state(state),
        segments=archive.segments,
        item_names=_item_names(manifest, kind, items_seen),
    )


def _shape_and_params(
    described: dict[str, Any], method: AnyMethod, kind: ChunkFormat
) -> tuple[Shape, MethodParams]:
    """The archived selector's shape, and its params, which must resolve to themselves."""
    params = _field(described, "params", dict)
    shape_fields = ("n_features", "n_samples", "views", "feature_names")
    document = {k: described[k] for k in shape_fields if described.get(k) is not None}
    shape = kind.shape(document, method.name)
    # Resolved as stored params: an archive of a selector created before a parameter existed
    # resolves to what it was created with (no resamples, say).
    resolved = method.resolve_params({**params, **shape.params}, shape.size, stored=True)
    stored = resolved.as_params()
    if json.loads(json.dumps(stored)) != params:
        raise Inconsistent(
            f"the archive's params do not resolve to themselves for {method.name}: "
            f"{json.dumps(params)[:200]} became {json.dumps(stored)[:200]}"
        )
    return shape, resolved


def _items_seen(manifest: dict[str, Any], kind: ChunkFormat) -> int:
    """The items seen, given again under the answers' name (``rows_seen``, ...)."""
    items_seen = _count(manifest, "items_seen")
    if manifest.get(kind.seen_field) != items_seen:
        raise Inconsistent(
            f"the archive's items seen ({items_seen}) must be given again as "
            f"'{kind.seen_field}'; got {shown(manifest.get(kind.seen_field))}"
        )
    return items_seen


def _created_at(described: dict[str, Any]) -> float:
    """When the archived selector was created: seconds since 1970, up to ``LATEST_TIME``."""
    created_at = _field(described, "created_at", (int, float))
    if not (isinstance(created_at, float) or abs(created_at) <= MAX_COUNT) or not (
        0 <= created_at <= LATEST_TIME
    ):
        raise InvalidInput(
            f"the archive's created_at must be a time in seconds since 1970 (0 to "
            f"{LATEST_TIME:.0f}); got {shown(created_at)}"
        )
    return float(created_at)


def _decoded(archive: Archive, max_state_bytes: int) -> tuple[State, dict[str, np.ndarray]]:
    """The archive's state and segments, decoded once their sizes are known to fit."""
    try:
        sizes = {field: stored_nbytes(value) for field, value in archive.state.items()}
    except CodecError as exc:
        raise InvalidInput(f"the archive's state does not decode: {exc.detail}") from exc
    problem = state_size_problem(sizes, max_state_bytes)
    if problem is not None:
        raise StateTooLarge(f"the archive's state cannot be stored here: {problem}")
    try:
        # Segments are stored in full, never as ZEROS blobs: a blob smaller than its array is
        # forged (it would decode to memory its archive never paid for).
        if any(array_nbytes(blob) > len(blob) for blob in archive.segments.values()):
            raise InvalidInput("the archive's segments must be stored in full")
        state = decode_state(archive.state)
        segments = {s: decode_array(blob) for s, blob in archive.segments.items()}
    except CodecError as exc:
        raise InvalidInput(f"the archive's state does not decode: {exc.detail}") from exc
    return state, segments


def _check_scores(
    method: AnyMethod, kind: ChunkFormat, meta: SelectorMeta, state: State, items_seen: int
) -> None:
    """As many scores as features: fixed ones, or (feature streams) every item seen."""
    expected = kind.features_scored(meta, items_seen)
    scores = np.asarray(method.weights(state, resolved_params(meta)))
    if scores.shape != (expected,):
        raise SelectorMismatch(
            f"the archive's state has scores for {scores.shape[0] if scores.ndim else 0} "
            f"features; having seen {items_seen} items, its {meta.method} selector needs "
            f"{expected}"
        )


def _check_takes_a_chunk(
    meta: SelectorMeta, kind: ChunkFormat, state: State, max_state_bytes: int
) -> None:
    """The state can take an ordinary chunk (``ChunkFormat.probe``) and stay finite: values within
    ``MAX_STATE_MAGNITUDE`` that the method's update would still blow up (a product of three of
    them, say) did not come from chunks, and would reject every chunk after the import."""
    try:
        # Room for the chunk itself: a state at the limit is the limit's business, not this.
        compute_update(meta, state, [kind.probe(meta)], 2 * max_state_bytes + 2**20)
    except UpdateFailed as exc:
        raise Inconsistent(
            f"the archive's state cannot take a chunk of ones ({exc.reason}): its values are "
            "beyond what chunks reach"
        ) from None


def _item_names(manifest: dict[str, Any], kind: ChunkFormat, items_seen: int) -> dict[int, str]:
    """Names given on arrival: distinct, each a valid name, ``f<j>`` only for feature ``j``."""
    listed = manifest.get("item_names", [])
    if not isinstance(listed, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and _is_count(pair[0]) for pair in listed
    ):
        raise InvalidInput("the manifest's item_names must be a list of [index, name] pairs")
    if listed and not kind.names_on_arrival:
        raise Inconsistent(f"{kind.name} selectors name their features at creation, not items")
    names = {int(index): name for index, name in listed}
    validate_names(list(names.values()), len(names), "item_names", "item")
    for index, label in names.items():
        if index >= items_seen or _reserved(label, index):
            raise Inconsistent(
                f"item name '{label}' of item {index} is out of place: items are numbered below "
                f"{items_seen}, and 'f<j>' names only item j"
            )
    if len(names) != len(listed):
        raise Inconsistent("the manifest's item_names name an item twice")
    return names


def _reserved(label: str, index: int) -> bool:
    """Whether ``label`` is ``f<j>`` for ``j != index``: the name shown for unnamed item ``j``
    (the ingest path refuses it likewise)."""
    match = _DEFAULT_NAME.fullmatch(label)
    return match is not None and int(match.group(1)) != index


# -- the room --------------------------------------------------------------------------------


class Archives:
    def __init__(
        self,
        store: SelectorStore,
        reader: StateReader,
        applier: Applier,
        history: History,
        settings: Settings,
    ) -> None:
        self.store = store
        self.reader = reader
        self.applier = applier
        self.history = history
        self.settings = settings

    async def export(self, name: str) -> bytes:
        """The archive of ``name`` as committed once its pending chunks are applied.

        Conflict (409) if they are not applied within ``SIFT_APPLY_WAIT_SECONDS``;
        StateTooLarge if the archive would exceed the archive limit; SelectorMismatch for a
        partitioned selector (its partitions are selectors of their own, not one state).
        """
        if (await self.store.registry.get_meta(name)).partitioned:
            raise SelectorMismatch(
                f"selector '{name}' is partitioned: an archive holds one selector's state, and "
                "its partitions learn apart (their merged answers are served, not stored)"
            )
        await settle(self.applier, name, self.settings.apply_wait_seconds, "export")
        # The archive holds the whole state, which a checkpoint of the current version has.
        await self.applier.checkpoint_now(name)
        snapshot = await self.store.checkpoints.snapshot(name)
        method = get_method(snapshot.meta.method)
        segments: dict[str, bytes] = {}
        if isinstance(method, StoresSegments):
            state = await asyncio.to_thread(decode_state, snapshot.state)
            ids = method.segment_ids(state, resolved_params(snapshot.meta))
            segments = await self.store.checkpoints.get_segments(name, ids)
        size = sum(map(len, snapshot.state.values())) + sum(map(len, segments.values()))
        limit = self.settings.archive_limit
        if size > limit:
            raise StateTooLarge(
                f"the archive of '{name}' would take more than {size} bytes, over the "
                f"{limit} an import takes (SIFT_MAX_ARCHIVE_BYTES)"
            )
        kind = chunk_format(method.chunk_kind)
        return await asyncio.to_thread(pack, snapshot, kind, segments)

    async def import_(
        self,
        body: bytes,
        name: str | None,
        may_create: Callable[[str], bool],
        admit: Admit | None = None,
    ) -> SelectorOut:
        """Recreate the archived selector (as ``name`` if given) at its version; the first
        history entry is that version's ranking. ``may_create(name)`` says whether the caller
        may create a selector of that name (Forbidden otherwise); ``admit`` checks its quotas
        before anything is written."""
        restored = await asyncio.to_thread(self._restore, body, name)
        if not may_create(restored.meta.name):
            raise Forbidden(
                f"this API key may not create a selector named '{restored.meta.name}' (its name "
                "prefix); import it under another name with ?name="
            )
        if admit is not None:
            await admit(
                restored.meta.name, selectors=1, state_bytes=declared_state_bytes(restored.meta)
            )
        published = await asyncio.to_thread(
            lambda: publish(restored.meta, decode_state(restored.state))
        )
        head = await self.store.registry.create(
            restored.meta,
            restored.state,
            published=published,
            imported=Imported(
                restored.version, restored.items_seen, restored.segments, restored.item_names
            ),
        )
        await self.history.start(restored.meta, head, restored.state)
        return selector_out(restored.meta, restored.kind, head)

    def _restore(self, body: bytes, name: str | None) -> Restored:
        """``restore(unpack(body))``; a plain InvalidInput becomes Inconsistent: the body is
        any bytes to the API's schema, so what makes an archive invalid is a rule the schema
        cannot state (ARCHITECTURE.md, "The service's answers")."""
        try:
            return restore(unpack(body), name, self.settings.max_state_bytes)
        except InvalidInput as exc:
            if type(exc) is not InvalidInput:
                raise
            raise Inconsistent(exc.detail) from exc
