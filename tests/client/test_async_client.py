"""The asyncio client: the same operations as ``Client`` (one implementation), awaited; against
the live service process and, through ``transport``, against the app in this process."""

from __future__ import annotations

import asyncio
import inspect

import httpx
import numpy as np
import pytest

from siftstream import AsyncClient, Client, NotFoundError
from siftstream._api import OPERATION_MODULES, selectors
from siftstream.clients import Operation, Operations
from siftstream.results import ChunkReceipt
from tests.support.api import make_settings, running_app
from tests.support.harness import ServiceProcess, modules_imported


async def test_both_clients_offer_every_operation_with_one_signature() -> None:
    operations = {
        name: member
        for module in OPERATION_MODULES
        for name, member in vars(module).items()
        if inspect.isfunction(member)
        and member.__module__ == module.__name__
        and not name.startswith("_")
    }
    offered = {name for name, member in vars(Operations).items() if isinstance(member, Operation)}
    assert offered == set(operations)
    for name, plan in operations.items():
        assert getattr(Client, name).plan is plan
    with Client("http://127.0.0.1:1") as blocking:
        assert not inspect.iscoroutinefunction(blocking.top)
        top = inspect.signature(selectors.top)
        assert inspect.signature(blocking.top) == top.replace(
            parameters=list(top.parameters.values())[1:]
        )
        assert list(inspect.signature(blocking.push).parameters)[:3] == ["name", "data", "y"]
    async with AsyncClient("http://127.0.0.1:1") as awaiting:
        assert inspect.iscoroutinefunction(awaiting.top)
        assert awaiting.top.__doc__ == selectors.top.__doc__


async def test_async_flow_against_the_service(service: ServiceProcess, selector_name: str) -> None:
    x = np.random.default_rng(0).normal(size=(700, 9))
    async with AsyncClient(service.url) as sift:
        created = await sift.create(selector_name, "variance", n_features=9)
        assert created.rows_seen == 0
        summary = await sift.push(selector_name, x, chunk_rows=200)
        assert [r.items for r in summary.receipts] == [200, 200, 200, 100]
        assert all(isinstance(r, ChunkReceipt) and r.applied for r in summary.receipts)
        weights = await sift.weights(selector_name)
        np.testing.assert_allclose(weights.weights, x.var(axis=0), rtol=1e-10)
        top = await sift.top(selector_name, h=3)
        assert top.version == weights.version and len(top.features) == 3
        await sift.delete(selector_name)
        with pytest.raises(NotFoundError):
            await sift.describe(selector_name)


async def test_concurrent_pushes_to_several_selectors(
    service: ServiceProcess, selector_name: str
) -> None:
    parts = [np.random.default_rng(s).normal(size=(300, 4)) for s in range(3)]
    names = [f"{selector_name}-{i}" for i in range(3)]
    async with AsyncClient(service.url) as sift:
        await asyncio.gather(*(sift.create(n, "variance", n_features=4) for n in names))
        summaries = await asyncio.gather(
            *(sift.push(n, part, chunk_rows=50) for n, part in zip(names, parts, strict=True))
        )
        assert [s.seen for s in summaries] == [300, 300, 300]
        for name, part in zip(names, parts, strict=True):
            np.testing.assert_allclose(
                (await sift.weights(name)).weights, part.var(axis=0), rtol=1e-10
            )


async def test_async_client_on_the_app_in_process(redis_url: str, redis_client: object) -> None:
    """``transport`` lets the client talk to an ASGI app directly (here the real app, with its
    lifespan, over the test redis-server)."""
    async with running_app(make_settings(redis_url)) as (app, _):
        transport = httpx.ASGITransport(app=app)
        async with AsyncClient("http://sift", transport=transport) as sift:
            await sift.create("in-process", "fsds", n_features=6, params={"k": 2})
            receipt = await sift.push_chunk(
                "in-process", np.random.default_rng(1).normal(size=(50, 6))
            )
            assert receipt.applied and receipt.rows_seen == 50
            assert (await sift.describe("in-process")).rows_seen == 50
            assert (await sift.ready()).status == "ready"


def test_the_client_never_imports_the_server() -> None:
    """Importing the client (and its command line) loads no server layer and nothing beyond
    httpx, numpy and scipy: it works where only those are installed."""
    heavy = ("service.api", "service.selectors", "service.store", "service.algorithms",
             "service.applier", "sklearn", "pandas", "pyarrow", "fastapi", "redis",
             "uvicorn", "pydantic", "orjson")  # fmt: skip
    statements = (
        "import siftstream, siftstream.cli, siftstream.commands\n"
        "siftstream.cli.build_parser()  # loads the installed server's `serve` too"
    )
    assert modules_imported(statements, heavy) == []
