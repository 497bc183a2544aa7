"""How the ``sift`` client commands show things: aligned tables (``table``, ``top_table``),
JSON documents, counts and a selector's size as text. Formatting only: no requests, no state."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import Any, TextIO

from siftstream.results import (
    Alert,
    AlertEvent,
    BaselineRule,
    Drift,
    FeatureRef,
    Moved,
    SelectorInfo,
    Source,
    StreamInfo,
    StreamRankings,
    Top,
)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Rows under headers in aligned columns (those in ``right`` aligned right)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        aligned = [
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(aligned).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])


def top_table(top: Top, test: tuple[float, str] | None = None) -> str:
    """A ranking as ``sift top`` prints it: a title line, then a row per feature (with its
    p-value when the answer has p-values), then its stability. ``test``: the level and the
    correction the features were selected by (``--alpha``, ``--correction``)."""
    seen = (
        f"{top.rows_seen:,} rows seen"
        if top.rows_seen is not None
        else f"{top.features_seen or 0:,} features seen"
    )
    title = f"{top.name}  {top.method}  version {top.version}  {seen}"
    if top.version == 0:  # a ranking of zeros would mean nothing
        where = "features" if top.features_seen is not None else "chunks"
        return f"{title}\nno data yet: push to {top.name} (POST /v1/selectors/{top.name}/{where})"
    if top.strategy:
        title += f"  ({top.strategy})"
    if test is not None:
        title += f"  (alpha {test[0]:g}, correction {test[1]})"
        if not top.features:
            return f"{title}\nno feature passes the test"
    multi_view = any(f.view is not None for f in top.features)
    tested = any(f.p_value is not None for f in top.features)
    headers = [
        "rank",
        *(["view"] if multi_view else []),
        "index",
        "name",
        "score",
        *(["p-value"] if tested else []),
    ]
    rows = [
        [
            str(f.rank),
            *([f.view or ""] if multi_view else []),
            str(f.index),
            f.name,
            f"{f.score:.6g}",
            # A test that is not a number (a feature with no spread) has a null p-value.
            *([f"{math.nan if f.p_value is None else f.p_value:.3g}"] if tested else []),
        ]
        for f in top.features
    ]
    numbers = {headers.index(h) for h in ("rank", "index", "score", "p-value") if h in headers}
    return title + "\n" + table(headers, rows, numbers) + stability_lines(top)


def stability_lines(top: Top) -> str:
    """What follows a ranking's table when it has a stability: the index with its interval,
    and each feature's band (the lowest and highest rank it takes over the resamples)."""
    stability = top.stability
    if stability is None:
        return ""
    low, high = stability.interval
    each = "" if stability.corrected else f" of {top.seen // stability.resamples:,} rows each"
    line = (
        f"\nstability of the top {stability.h}: {stability.index:.2f} "
        f"(95% interval {low:.2f} to {high:.2f}; {count(stability.resamples, 'resample')}{each})"
    )
    bands = [
        f"{f.name} {f.band[0]}-{f.band[1]}" if f.band[0] != f.band[1] else f"{f.name} {f.band[0]}"
        for f in top.features
        if f.band is not None
    ]
    return line + ("\nbands: " + ", ".join(bands) if bands else "")


def features_text(features: Sequence[FeatureRef]) -> str:
    return ", ".join(f"{f.view}:{f.name}" if f.view else f.name for f in features) or "none"


def moved_line(what: str, moved: Moved) -> str:
    line = (
        f"{what} (version {moved.version}): drift {moved.drift:.2f} "
        f"(rbo {moved.rbo:.2f}, jaccard {moved.jaccard:.2f})"
    )
    if moved.entered or moved.left:
        line += f"; entered {features_text(moved.entered)}; left {features_text(moved.left)}"
    return line


def baseline_wait_text(rule: BaselineRule | None) -> str:
    """Why there is no baseline yet, at the h the rule judges (which may not be the h shown)."""
    if rule is None:
        return "(until a version's ranking is stable)"
    now = "not estimated" if rule.stability is None else f"{rule.stability:.2f}"
    return (
        f"(a version becomes it when the stability of its top {rule.h} reaches "
        f"{rule.threshold:.2f}; now {now})"
    )


def drift_lines(drift: Drift) -> str:
    """How far the top h moved: since the previous version and since the baseline."""
    lines = [f"drift of the top {drift.h} at version {drift.version}"]
    if drift.previous is not None:
        lines.append("  " + moved_line("since the previous version", drift.previous))
    if drift.baseline is None:
        lines.append("  since the baseline: none yet " + baseline_wait_text(drift.baseline_rule))
    else:
        lines.append("  " + moved_line(f"since the baseline, {drift.baseline.how}", drift.baseline))
    return "\n".join(lines)


def alerts_table(alerts: Sequence[Alert]) -> str:
    if not alerts:
        return "no alerts"
    rows = [
        [
            a.id,
            str(a.h),
            f"{a.threshold:g}",
            "-" if a.min_stability is None else f"{a.min_stability:g}",
            "yes" if a.firing else "no",
            str(a.crossings),
            a.url,
        ]
        for a in alerts
    ]
    headers = ["id", "h", "threshold", "min stability", "firing", "crossings", "url"]
    return table(headers, rows, {1, 2, 3, 5})


def events_table(events: Sequence[AlertEvent]) -> str:
    if not events:
        return "no events"
    rows = [
        [
            e.id,
            str(e.version),
            str(e.baseline_version),
            f"{e.drift:.2f}",
            str((e.delivery or {}).get("status", "-")),
            features_text(e.entered),
            features_text(e.left),
        ]
        for e in events
    ]
    headers = ["event", "version", "baseline", "drift", "delivery", "entered", "left"]
    return table(headers, rows, {1, 2, 3})


def sources_table(sources: Sequence[Source]) -> str:
    if not sources:
        return "no sources"
    rows = [
        [
            s.name,
            s.kind,
            s.reads,
            f"{s.into_kind} {s.into_name}",
            s.state,
            f"{s.rows:,}",
            f"{s.rejected:,}",
            "-" if s.lag is None else f"{s.lag:,}",
        ]
        for s in sources
    ]
    headers = ["name", "kind", "reads", "into", "state", "rows", "rejected", "lag"]
    return table(headers, rows, {5, 6, 7})


def source_line(source: Source) -> str:
    """``NAME: KIND URL, key K, into selector S`` (``stream S, subject X`` for JetStream)."""
    if source.kind == "nats":
        subject = f", subject {source.subject}" if source.subject else ""
        reads = f"stream {source.stream}{subject}"
    elif source.kind == "kafka":
        reads = f"topic {source.topic}"
    else:
        reads = f"key {source.key}"
        if source.value_field is not None:
            reads += f" (field {source.value_field})"
    if source.format != "json":
        reads += f", {source.format}"
    return (
        f"{source.name}: {source.kind} {source.url}, {reads}, into {source.into_kind} "
        f"{source.into_name}"
    )


def _by_partition(source: Source) -> str:
    """`` (0: 12, 1: 0)``: each partition's lag, for a bus of several partitions."""
    if len(source.partition_lag) < 2:
        return ""
    ordered = sorted(source.partition_lag.items(), key=lambda item: (len(item[0]), item[0]))
    shown = [f"{p}: {'-' if lag is None else f'{lag:,}'}" for p, lag in ordered]
    return " (" + ", ".join(shown) + ")"


def source_lines(source: Source) -> str:
    """A source as ``sift source show`` prints it: what it reads and where it appends, its state
    (and last error), positions, lag and counts, then the newest entries it set aside."""
    positions = ", ".join(f"{p}: {at}" for p, at in sorted(source.positions.items()))
    lines = [f"source {source_line(source)}", f"state: {source.state}"]
    if source.last_error:
        lines.append(f"last error: {source.last_error}")
    lines += [
        f"positions: {positions or 'none yet'}",
        "lag: "
        + ("unknown" if source.lag is None else _entries(source.lag))
        + _by_partition(source),
        f"consumed: {_entries(source.entries)}: {count(source.rows, 'row')} appended, "
        f"{source.rejected:,} rejected; {source.rows_per_second:,.1f} rows/s",
        f"batches: up to {count(source.batch_rows, 'row')} or {source.batch_ms} ms; start "
        f"{source.start}; label field {source.label_field or '-'}; target field "
        f"{source.target_field or '-'}; on reset {source.on_reset}",
        "updated: " + ("never" if source.updated_at is None else _when(source.updated_at)),
    ]
    if source.rejected_entries:
        shown = len(source.rejected_entries)
        lines.append(f"rejected entries (the newest {shown} of {source.rejected:,}):")
        rows = [[r.partition, r.position, _when(r.at), r.reason] for r in source.rejected_entries]
        lines.append(table(["partition", "position", "at", "reason"], rows, set()))
    if source.resets:
        shown = len(source.resets)
        lines.append(f"bus resets (the newest {shown} of {source.reset_count:,}):")
        rows = [
            [
                e.partition,
                e.position,
                _when(e.at),
                e.action
                + ("" if e.restarted_from is None else f" (read again from {e.restarted_from})"),
                e.why,
            ]
            for e in source.resets
        ]
        lines.append(table(["partition", "position", "at", "action", "why"], rows, set()))
    return "\n".join(lines)


def _entries(n: int) -> str:
    return f"{n:,} entr" + ("y" if n == 1 else "ies")


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def print_json(out: TextIO, document: Any) -> None:
    out.write(json.dumps(document, indent=2) + "\n")


def count(n: int, thing: str) -> str:
    return f"{n:,} {thing}" + ("" if n == 1 else "s")


def selector_size(info: SelectorInfo) -> str:
    if info.is_feature_stream:
        return f"{info.n_samples} samples, {info.n_features} features so far"
    if info.views is not None:
        return ", ".join(f"{view} {width}" for view, width in info.views.items()) + " features"
    return f"{info.n_features} features"


def stream_size(info: StreamInfo) -> str:
    if info.is_feature_stream:
        return f"{info.n_samples} samples"
    if info.views is not None:
        return ", ".join(f"{view} {width}" for view, width in info.views.items()) + " features"
    return f"{info.n_features} features"


def stream_rankings_table(rankings: StreamRankings) -> str:
    """Every attached selector's top h in a column of its own (rank by rank), then how much
    every pair agrees."""
    shown = count(len(rankings.selectors), "selector")
    title = f"stream {rankings.stream}  top {rankings.h} of {shown}"
    if not rankings.selectors:
        lines = [
            title,
            "no selector attached: sift create NAME --method M --stream " + rankings.stream,
        ]
        lines += [f"{name}: {detail}" for name, detail in rankings.unranked.items()]
        return "\n".join(lines)
    headers = ["rank"] + [f"{t.name} ({t.method}, v{t.version})" for t in rankings.selectors]
    depth = max(len(t.features) for t in rankings.selectors)

    def cell(top: Top, rank: int) -> str:
        if rank >= len(top.features):
            return ""
        feature = top.features[rank]
        return f"{feature.view}/{feature.name}" if feature.view else feature.name

    rows = [[str(r + 1)] + [cell(t, r) for t in rankings.selectors] for r in range(depth)]
    out = [title, table(headers, rows, {0})]
    if rankings.agreement:
        pairs = [
            [
                a.a,
                a.b,
                *([a.view or ""] if any(x.view for x in rankings.agreement) else []),
                f"{a.jaccard:.2f}",
                f"{a.rbo:.2f}",
                str(a.shared),
            ]
            for a in rankings.agreement
        ]
        by_view = any(x.view for x in rankings.agreement)
        pair_headers = [
            "a",
            "b",
            *(["view"] if by_view else []),
            "jaccard",
            f"rbo (p={rankings.p:g})",
            "shared",
        ]
        last = len(pair_headers) - 1
        out += ["", table(pair_headers, pairs, {last - 2, last - 1, last})]
    for name, detail in rankings.unranked.items():
        out.append(f"{name}: no ranking ({detail})")
    return "\n".join(out)
