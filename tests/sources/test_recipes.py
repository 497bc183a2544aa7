"""The try-it recipes of the source pages run as written: "Try it: a JetStream stream on this
machine" (docs/sources.md) against Debian's ``nats-server -js``, and "Trying it"
(docs/operations/kafka.md) against an Apache Kafka broker started from the jars
``scripts/kafka/fetch`` brings, as the page starts it.

Each recipe's first ``bash`` block starts ``sift serve`` (allowing sources on loopback, as the
pages say a bus on this machine needs) and its second the bus's server, each in a terminal of
its own, and the test waits for the line the page says to wait for; the third block runs in a
fresh shell in the reader's folder (``.venv`` there, and ``scripts`` for the Kafka recipe, which
runs in a checkout). The ports the pages say the reader chooses (the
service's 8765, NATS's 4222, Kafka's 9092 and 9093) are swapped for free ones; nothing else is
changed. What ``sift top`` prints is the page's ``text`` block line for line, except the
version number, which counts the commits that applied the source's batches (as the pages say:
it depends on how fast the source read).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.harness import REPO_ROOT, wait_for
from tests.support.recipes import (
    Terminal,
    blocks,
    chosen,
    reader_environment,
    reader_folder,
    run_script,
    section,
)
from tests.support.redis import free_port

SOURCES = REPO_ROOT / "docs" / "sources.md"
KAFKA = REPO_ROOT / "docs" / "operations" / "kafka.md"
NATS_RECIPE = "Try it: a JetStream stream on this machine"
KAFKA_RECIPE = "Trying it"
#: The port the quickstart serves on.
SIFT_PORT = "8765"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reader's checkout of Sift, where they installed it."""
    return reader_folder(tmp_path_factory.mktemp("reader"), checkout=True)


@pytest.fixture(scope="module")
def environment(folder: Path) -> dict[str, str]:
    return reader_environment(folder)


@pytest.fixture(scope="module")
def served(folder: Path, environment: dict[str, str]) -> Iterator[str]:
    """The recipes' ``sift serve``, as written (the same in both pages), on a free port."""
    serve, *_ = blocks(section(NATS_RECIPE, SOURCES), "bash")
    assert blocks(section(KAFKA_RECIPE, KAFKA), "bash")[0] == serve
    assert "SIFT_SOURCE_PRIVATE=127.0.0.1 sift serve" in serve
    port = str(free_port())
    with Terminal(chosen(serve, {SIFT_PORT: port}), folder, environment, "serve") as terminal:

        def ready() -> bool:
            assert terminal.process.poll() is None, terminal.said()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/readyz", timeout=1).is_success
            except httpx.HTTPError:
                return False

        wait_for(ready, 30, "sift serve to be ready")
        yield port


def top_as_shown(said: str, shown: str, selector: str) -> None:
    """``sift top``'s lines in ``said`` are the page's ``shown`` ones, the version aside."""
    expected = shown.rstrip("\n").splitlines()
    out = said.splitlines()
    starts = [i for i, line in enumerate(out) if line.startswith(f"{selector}  variance  ")]
    assert len(starts) == 1, said
    got = out[starts[0] : starts[0] + len(expected)]
    version = re.compile(r"  version (\d+)  ")
    found = version.search(got[0])
    assert found is not None and int(found.group(1)) >= 1, got[0]
    assert [version.sub("  version N  ", got[0]), *got[1:]] == [
        version.sub("  version N  ", expected[0]),
        *expected[1:],
    ], said


def test_the_jetstream_recipe_runs_as_written(
    served: str, folder: Path, environment: dict[str, str]
) -> None:
    recipe = section(NATS_RECIPE, SOURCES)
    _serve, server, commands = blocks(recipe, "bash")
    (shown,) = blocks(recipe, "text")
    assert Path(server.split()[0]).exists(), f"not where Debian installs it: {server}"
    nats_port = str(free_port())
    with Terminal(chosen(server, {"4222": nats_port}), folder, environment, "nats") as nats:
        nats.wait_for_line("Server is ready", 20)
        script = chosen(commands, {SIFT_PORT: served, "4222": nats_port})
        shell = run_script(script, folder, environment)
    top_as_shown(shell.stdout, shown, "weather-js")
    # What the page says `sift source show` shows.
    source = httpx.get(f"http://127.0.0.1:{served}/v1/sources/weather-js", timeout=10).json()
    assert source["positions"] == {"0": "5000"} and source["rejected"] == 0, source


def test_the_kafka_recipe_runs_as_written(
    served: str, folder: Path, environment: dict[str, str]
) -> None:
    recipe = section(KAFKA_RECIPE, KAFKA)
    _serve, broker, commands = blocks(recipe, "bash")
    (shown,) = blocks(recipe, "text")
    ports = {"9092": str(free_port()), "9093": str(free_port())}
    while ports["9093"] == ports["9092"]:
        ports["9093"] = str(free_port())
    with Terminal(chosen(broker, ports), folder, environment, "kafka") as kafka:
        kafka.wait_for_line("Kafka Server started", 120)
        script = chosen(commands, {SIFT_PORT: served, "9092": ports["9092"]})
        shell = run_script(script, folder, environment)
        top_as_shown(shell.stdout, shown, "weather-kafka")
        source = httpx.get(f"http://127.0.0.1:{served}/v1/sources/weather-kafka", timeout=10)
        assert source.json()["positions"] == {"0": "4999"}, source.json()
        assert source.json()["rejected"] == 0, source.json()
    assert (folder / "kafka-data" / "meta.properties").exists()
