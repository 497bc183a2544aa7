"""The floor of Sift's request path: the same stack doing the least a chunk's POST must do.

FastAPI on uvicorn (the server ``sift serve`` runs, with the same HTTP parser and event loop),
redis-py to the same Redis: ``POST /floor/chunks`` reads the JSON body, parses it with orjson
and runs one script that appends it to a stream and sets a key (what an acknowledged chunk
needs at the least: one fsync'd append), answering a small JSON; ``POST /floor/blobs`` stores
a binary body as it came, the same way; ``GET /floor/top`` answers a constant JSON body of the
size of a ``top?h=10`` answer. ``bench_request_path.py`` runs it side by side with Sift,
interleaved, and reports Sift as ratios of it.

    python benchmarks/floor_app.py --port 8001 --redis-url redis://127.0.0.1:6380/0
"""

from __future__ import annotations

import argparse
import asyncio

import orjson
import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI, Request
from starlette.responses import Response

APPEND = """
local id = redis.call('XADD', KEYS[1], '*', 'payload', ARGV[1])
redis.call('SET', KEYS[2], id)
return id
"""

#: A ``top?h=10`` answer's size, give or take.
TOP_BODY = orjson.dumps(
    {
        "name": "floor",
        "method": "fsds",
        "version": 1,
        "rows_seen": 1,
        "features": [
            {"rank": r, "index": r, "name": f"f{r}", "score": 0.123456789} for r in range(1, 11)
        ],
    }
)


def create_app(redis_url: str) -> FastAPI:
    client = aioredis.from_url(redis_url)
    script = client.register_script(APPEND)
    app = FastAPI()

    @app.post("/floor/chunks")
    async def chunks(request: Request) -> Response:
        body = await request.body()
        orjson.loads(body)  # a chunk is parsed before it is appended
        log_id = await script(keys=["floor:log", "floor:last"], args=[body])
        return Response(orjson.dumps({"log_id": log_id.decode()}), media_type="application/json")

    @app.post("/floor/blobs")
    async def blobs(request: Request) -> Response:
        """A binary chunk (``.npz``, ``.npy``) stored durably once as it came: the floor of a
        large chunk's POST (``suite/big_chunk.py``)."""
        body = await request.body()
        log_id = await script(keys=["floor:blobs", "floor:last"], args=[body])
        await client.xtrim("floor:blobs", maxlen=8)  # bounded: each is megabytes
        return Response(orjson.dumps({"log_id": log_id.decode()}), media_type="application/json")

    @app.get("/floor/top")
    async def top() -> Response:
        return Response(TOP_BODY, media_type="application/json")

    @app.on_event("startup")
    async def trimmed() -> None:
        # Capped: the floor must not grow Redis without end during a long run.
        async def trim() -> None:
            while True:
                await client.xtrim("floor:log", maxlen=10_000, approximate=True)
                await asyncio.sleep(1.0)

        app.state.trimmer = asyncio.create_task(trim())

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--http", default="auto", help="uvicorn's HTTP parser (as Sift's)")
    parser.add_argument("--loop", default="auto", help="uvicorn's event loop (as Sift's)")
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.redis_url),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        http=args.http,
        loop=args.loop,
    )


if __name__ == "__main__":
    main()
