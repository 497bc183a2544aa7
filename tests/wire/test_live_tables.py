"""Hostile table bodies sent to a live ``sift serve`` process (``service/wire/ipc.py`` and
``service/wire/tables.py``).

* Arrow: hundreds of mutants of valid streams (bytes changed, bits flipped, truncations, message
  lengths and metadata words rewritten), from streams of several column types, several batches,
  string and integer labels, schema metadata, nulls and a dictionary, among them a 504-byte
  stream that kills pyarrow itself (a schema message whose header says it is a record batch).
  Each is answered 200 or a 4xx problem, never a 5xx; the process is alive and answers after
  each; a refused one writes nothing, and what is accepted lands exactly as the same rows sent
  as JSON to a twin selector land, bit for bit.
* CSV: bodies that would build arrays per line before they are refused (an empty line after
  48 MiB of newlines, 8 million rows of ``0``, four of those at once) stay within the memory
  per body byte that docs/operations/limits.md states, measured as the process's peak RSS.
"""

from __future__ import annotations

import random
import signal
import struct
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest

from tests.support.harness import ServiceProcess, live_service

ARROW = {"content-type": "application/vnd.apache.arrow.stream"}
CSV = {"content-type": "text/csv"}
NAMES = ["a", "b", "c"]
#: Mutants drawn from each valid stream.
MUTANTS_PER_STREAM = 70
#: docs/operations/limits.md: a CSV refused for its lines costs about two to three times its
#: body (measured 2.0 to 3.1); the bound leaves room for the allocator's rounding, and stays
#: below the 7.5 times of any binary body.
PEAK_PER_BODY_BYTE = 4.0


def stream(table: pa.Table, batch_rows: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def three_doubles() -> bytes:
    """What ``pyarrow.ipc.new_stream`` writes for three float64 columns, one batch of two rows:
    504 bytes."""
    return stream(pa.table({name: [0.5, 1.5] for name in NAMES}))


#: Two bytes changed in ``three_doubles``: the schema message's header type (byte 29) says
#: record batch (3) or none (0), or its vtable entry (byte 20) points elsewhere, with one more
#: byte changed. ``pyarrow.ipc.read_schema`` reads the header as a schema regardless and the
#: process dies of a segmentation fault.
CRASHERS = (((29, 3), (153, 4)), ((29, 0), (152, 9)), ((20, 4), (22, 40)))


def crasher(changes: tuple[tuple[int, int], ...]) -> bytes:
    body = bytearray(three_doubles())
    for at, value in changes:
        body[at] = value
    return bytes(body)


@dataclass(frozen=True)
class Valid:
    """A valid stream, the selector it is sent to and the label column (None: unlabelled)."""

    name: str
    body: bytes
    labels: str | None


def valid_streams() -> list[Valid]:
    rng = np.random.default_rng(11)

    def normal(n: int) -> np.ndarray:
        return rng.standard_normal(n)

    mixed = pa.table(
        {
            "a": pa.array([1, -2, 3, 4, 5], pa.int8()),
            "b": pa.array([7, 8, 9, 10, 11], pa.uint32()),
            "c": pa.array([0.5, 1.5, 2.5, 3.5, 4.5], pa.float32()),
        }
    )
    words = pa.table({"a": normal(6), "b": normal(6), "c": normal(6), "y": list("xyxzyx")})
    large = pa.table(
        {
            "a": normal(3),
            "b": pa.array([1, 2, 3], pa.int64()),
            "c": pa.array([1, 2, 3], pa.float16()),
            "y": pa.array(["p", "q", "p"], pa.large_string()),
        }
    )
    integers = pa.table(
        {"a": normal(4), "b": normal(4), "c": normal(4), "y": pa.array([0, 1, 1, 0], pa.int16())}
    ).replace_schema_metadata({"pandas": "{}", "origin": "test"})
    nulls = pa.table({"a": [1.0, None, 3.0], "b": [1.0, 2.0, 3.0], "c": [1.0, 2.0, 3.0]})
    dictionary = pa.table(
        {"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0], "y": pa.array(["u", "v"])}
    )
    dictionary = dictionary.set_column(3, "y", dictionary.column("y").dictionary_encode())
    return [
        Valid("doubles", three_doubles(), None),
        Valid("mixed", stream(mixed, batch_rows=2), None),
        Valid("words", stream(words, batch_rows=4), "y"),
        Valid("large", stream(large), "y"),
        Valid("integers", stream(integers, batch_rows=1), "y"),
        Valid("nulls", stream(nulls), None),
        Valid("dictionary", stream(dictionary), "y"),
    ]


def message_starts(body: bytes) -> list[int]:
    """Where each message of a valid stream starts (its continuation marker)."""
    starts, at = [], 0
    while at + 8 <= len(body):
        (length,) = struct.unpack_from("<i", body, at + 4)
        if length == 0:
            break
        starts.append(at)
        message = pa.ipc.read_message(pa.py_buffer(body[at:]))
        at += 8 + length + message.body.size if message.body is not None else 8 + length
    return starts


def mutants(valid: Valid, count: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """``count`` mutants of a valid stream: bytes and bits changed, truncations, deletions,
    32- and 64-bit words rewritten, and every message's metadata length rewritten."""
    rng = random.Random(seed)
    body = valid.body
    for at in message_starts(body):
        (length,) = struct.unpack_from("<i", body, at + 4)
        for value in (-8, -1, 1, 4, length - 8, length + 8, len(body), 0x7FFFFFFF):
            changed = bytearray(body)
            struct.pack_into("<i", changed, at + 4, value)
            yield f"metadata length at {at} = {value}", bytes(changed)
        changed = bytearray(body)
        changed[at : at + 4] = b"\0\0\0\0"  # the pre-1.0 framing's place of the length
        yield f"no continuation at {at}", bytes(changed)
    for i in range(count):
        changed = bytearray(body)
        operation = i % 7
        if operation == 0:
            where = [rng.randrange(len(body)) for _ in range(rng.randint(1, 3))]
            for at in where:
                changed[at] = rng.randrange(256)
            what = f"bytes {where} changed"
        elif operation == 1:
            where = [rng.randrange(len(body)) for _ in range(2)]
            for at in where:
                changed[at] ^= 1 << rng.randrange(8)
            what = f"bits flipped at {where}"
        elif operation == 2:
            cut = rng.randrange(len(body))
            yield f"truncated to {cut}", body[:cut]
            continue
        elif operation == 3:
            at = rng.randrange(len(body) - 4) & ~3
            old = struct.unpack_from("<i", body, at)[0]
            value = rng.choice([0, 1, -1, 8, -8, 2**31 - 1, -(2**31), old + rng.choice([-4, 4])])
            struct.pack_into("<i", changed, at, value)
            what = f"int32 at {at} = {value}"
        elif operation == 4:
            at = rng.randrange(len(body) - 8) & ~7
            old = struct.unpack_from("<q", body, at)[0]
            value = rng.choice([0, 1, -1, 2**31, 2**62, -(2**62), old + rng.choice([-8, -1, 1, 8])])
            struct.pack_into("<q", changed, at, value)
            what = f"int64 at {at} = {value}"
        elif operation == 5:
            at = rng.randrange(len(body) - 2) & ~1
            value = rng.randrange(65536)
            struct.pack_into("<H", changed, at, value)
            what = f"uint16 at {at} = {value}"
        else:
            at = rng.randrange(len(body))
            size = rng.randint(1, 16)
            del changed[at : at + size]
            what = f"{size} bytes deleted at {at}"
        yield what, bytes(changed)


# -- a live process -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {"SIFT_APPLY_WAIT_SECONDS": "10"}
    with live_service(tmp_path_factory.mktemp("tables"), "tables", env) as started:
        yield started


def create(http: httpx.Client, name: str, labelled: bool) -> None:
    body = {
        "name": name,
        "method": "ocfs" if labelled else "variance",
        "n_features": len(NAMES),
        "feature_names": NAMES,
    }
    response = http.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text


def version(http: httpx.Client, name: str) -> int:
    response = http.get(f"/v1/selectors/{name}")
    assert response.status_code == 200, response.text
    found: int = response.json()["version"]
    return found


def as_json_chunk(body: bytes, labels: str | None) -> dict[str, Any]:
    """The rows (and labels) an accepted stream holds, as a JSON chunk, read by pyarrow here."""
    table = pa.ipc.open_stream(body).read_all()
    rows = np.column_stack([table.column(name).to_numpy().astype(np.float64) for name in NAMES])
    chunk: dict[str, Any] = {"rows": rows.tolist()}
    if labels is not None:
        chunk["labels"] = table.column(labels).to_pylist()
    return chunk


def weights(http: httpx.Client, name: str) -> bytes:
    response = http.get(f"/v1/selectors/{name}/weights", headers={"accept": "application/x-npy"})
    assert response.status_code == 200, response.text
    return response.content


def test_the_504_byte_mutant_kills_pyarrow_itself() -> None:
    """The corpus holds what it must: a body on which pyarrow dies (pyarrow 26, as locked)."""
    assert len(three_doubles()) == 504
    script = textwrap.dedent(
        """
        import sys
        import pyarrow as pa

        body = sys.stdin.buffer.read()
        messages = pa.ipc.MessageReader.open_stream(pa.py_buffer(body))
        pa.ipc.read_schema(messages.read_next_message())
        """
    )
    # The crash reads memory it should not, so whether it faults depends on the layout of the
    # process: each mutant is tried a few times, and the first fault of any is the proof.
    faults = (-signal.SIGSEGV, -signal.SIGBUS, -signal.SIGABRT)
    codes = []
    for changes in [c for c in CRASHERS for _ in range(5)]:
        run = [sys.executable, "-c", script]
        died = subprocess.run(run, input=crasher(changes), capture_output=True, timeout=60)
        codes.append(died.returncode)
        if died.returncode in faults:
            break
    assert codes[-1] in faults, codes


def test_mutated_arrow_streams_are_refused_or_applied_and_the_process_lives(
    service: ServiceProcess,
) -> None:
    corpus: list[tuple[Valid, str, bytes]] = []
    streams = valid_streams()
    doubles = streams[0]
    for changes in CRASHERS:
        corpus.append((doubles, f"pyarrow's crash {changes}", crasher(changes)))
    for seed, valid in enumerate(streams):
        corpus += [(valid, what, body) for what, body in mutants(valid, MUTANTS_PER_STREAM, seed)]
    assert len(corpus) >= 500
    wrong: list[str] = []
    applied = dict.fromkeys((valid.name for valid in streams), 0)
    refused = 0
    with httpx.Client(base_url=service.url, timeout=30) as http:
        for valid in streams:
            create(http, valid.name, valid.labels is not None)
            create(http, f"twin-{valid.name}", valid.labels is not None)
        for valid, what, body in corpus:
            params = {} if valid.labels is None else {"labels": valid.labels}
            response = http.post(
                f"/v1/selectors/{valid.name}/chunks", content=body, headers=ARROW, params=params
            )
            case = f"{valid.name}, {what}"
            assert service.alive, f"the service died on {case}: {service.log_tail()}"
            assert http.get("/v1/healthz").status_code == 200, case
            if response.status_code == 200:
                applied[valid.name] += 1
                chunk = as_json_chunk(body, valid.labels)
                twin = http.post(f"/v1/selectors/twin-{valid.name}/chunks", json=chunk)
                if twin.status_code != 200:
                    wrong.append(f"{case}: accepted, but its rows as JSON are {twin.text}")
            elif 400 <= response.status_code < 500:
                refused += 1
                if response.headers.get("content-type") != "application/problem+json":
                    wrong.append(f"{case}: {response.status_code} without a problem")
            else:
                wrong.append(f"{case}: {response.status_code} {response.text[:200]}")
        for valid in streams:
            # One version per chunk applied: a refused body wrote nothing.
            if version(http, valid.name) != applied[valid.name]:
                wrong.append(f"{valid.name}: version {version(http, valid.name)}, {applied}")
            if weights(http, valid.name) != weights(http, f"twin-{valid.name}"):
                wrong.append(f"{valid.name}: the accepted streams landed otherwise than JSON")
    accepted = sum(applied.values())
    print(f"\narrow mutants: {len(corpus)} sent, {accepted} applied, {refused} refused")
    assert not wrong, "\n".join(wrong)
    assert refused > len(corpus) // 2 and accepted > 0


# -- CSV memory ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A process of its own: its resident memory holds nothing of earlier large requests."""
    env = {"SIFT_APPLY_WAIT_SECONDS": "10"}
    with live_service(tmp_path_factory.mktemp("csv-memory"), "csv-memory", env) as started:
        with httpx.Client(base_url=started.url, timeout=30) as http:
            body = {"name": "one", "method": "variance", "n_features": 1, "feature_names": ["a"]}
            assert http.post("/v1/selectors", json=body).status_code == 201
        yield started


def status_bytes(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/{pid}/status")


def peak_growth(service: ServiceProcess, bodies: list[bytes]) -> tuple[int, list[httpx.Response]]:
    """The bodies posted at once; how far the process's peak RSS rose above its RSS before."""
    Path(f"/proc/{service.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status_bytes(service.pid, "VmRSS")
    answers: list[httpx.Response] = []

    def post(body: bytes) -> None:
        with httpx.Client(base_url=service.url, timeout=60) as http:
            answers.append(http.post("/v1/selectors/one/chunks", content=body, headers=CSV))

    threads = [threading.Thread(target=post, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return status_bytes(service.pid, "VmHWM") - before, answers


@pytest.mark.parametrize(
    ("case", "bodies", "fragment"),
    [
        ("an empty line after 48 MiB of newlines", 1, "line 3 of the CSV is empty"),
        ("8 million rows of 0", 1, "at most 1000000 rows; got 8388608"),
        ("four bodies of 8 million rows at once", 4, "at most 1000000 rows"),
    ],
)
def test_a_csv_refused_for_its_lines_costs_what_limits_md_says(
    fresh: ServiceProcess, case: str, bodies: int, fragment: str
) -> None:
    body = b"a\n1\n" + b"\n" * (48 << 20) if "newlines" in case else b"a\n" + b"0\n" * (8 << 20)
    growth, answers = peak_growth(fresh, [body] * bodies)
    for answer in answers:
        assert answer.status_code == 422, answer.text
        assert fragment in answer.json()["detail"], answer.text
    sent = len(body) * bodies
    print(f"\n{case}: {sent / 2**20:.0f} MiB sent, peak +{growth / 2**20:.0f} MiB")
    assert growth <= PEAK_PER_BODY_BYTE * sent, (case, growth / sent)
    assert fresh.alive
