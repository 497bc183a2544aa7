"""The ``sift`` command line: ``sift serve [--host] [--port]``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sift", description="Streaming feature selection service."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="Run the HTTP service.",
        description="Run the HTTP service. Without SIFT_REDIS_URL it starts and manages its own "
        "Redis, persisting under SIFT_DATA_DIR (default ~/.local/share/sift).",
    )
    serve.add_argument("--host", default=None, help="Interface to bind (default 127.0.0.1).")
    serve.add_argument("--port", type=int, default=None, help="Port (default 8000).")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


def serve(host: str | None, port: int | None, log_level: str) -> None:
    import uvicorn

    from service.api.app import create_app
    from service.config import Settings

    overrides = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    settings = Settings(**overrides)  # type: ignore[arg-type]
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=log_level,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        serve(args.host, args.port, args.log_level)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
