"""``sift serve``: the server's part of the ``sift`` command.

The ``sift`` command belongs to the client distribution (``siftstream``, ``client/``), which
knows nothing of the server; this distribution registers ``serve`` with it through the
``sift.commands`` entry point (``add_serve``). ``python -m service serve`` runs the same parser
without relying on installed entry points (a checkout on ``PYTHONPATH`` has none).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from collections.abc import Sequence
from typing import Any


def add_serve(commands: Any) -> None:
    """Add ``serve`` to the ``sift`` subcommands (the ``sift.commands`` entry point)."""
    parser = commands.add_parser(
        "serve",
        help="Run the HTTP service.",
        description="Run the HTTP service. Without SIFT_REDIS_URL it starts and manages its own "
        "Redis, persisting under SIFT_DATA_DIR (default ~/.local/share/sift).",
    )
    parser.add_argument("--host", default=None, help="Interface to bind (default 127.0.0.1).")
    parser.add_argument("--port", type=int, default=None, help="Port (default 8000).")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--log-format",
        default=None,
        choices=["text", "json"],
        help="Log lines as text or as one JSON object per line (default SIFT_LOG_FORMAT, text).",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Processes serving the port, each a replica on the same Redis (default "
        "SIFT_WORKERS, 1); the embedded Redis is then run by the parent process.",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="On a failed start, print the traceback as well as the reason.",
    )
    parser.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="Serve on a non-loopback address without SIFT_API_TOKEN (anyone who can reach "
        "it may do everything). Refused otherwise.",
    )
    parser.set_defaults(handler=_serve_from_args)


def _serve_from_args(args: argparse.Namespace) -> int:
    return serve(
        args.host,
        args.port,
        args.log_level,
        args.allow_unauthenticated,
        args.log_format,
        args.debug,
        args.workers,
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def exposure_problem(host: str, api_token: str | None, allow_unauthenticated: bool) -> str | None:
    """Why serving on ``host`` this way is refused, or None if it is fine."""
    if api_token or allow_unauthenticated or is_loopback(host):
        return None
    return (
        f"refusing to serve on {host} without authentication: anyone who can reach it could "
        "create, change and delete every selector. Set SIFT_API_TOKEN (the admin key; create "
        "scoped keys with POST /v1/keys), or pass --allow-unauthenticated if the network in "
        "front of Sift does the access control."
    )


def serve(
    host: str | None,
    port: int | None,
    log_level: str,
    allow_unauthenticated: bool,
    log_format: str | None = None,
    debug: bool = False,
    workers: int | None = None,
) -> int:
    # Imported here: ``sift top`` and the other client commands load this module (the entry
    # point) without wanting FastAPI, uvicorn and redis imported.
    from service.config import Settings
    from service.logs import configure_logging
    from service.server import serve as run_server
    from service.workers import serve_workers

    overrides = {
        key: value
        for key, value in (
            ("host", host),
            ("port", port),
            ("log_format", log_format),
            ("workers", workers),
        )
        if value is not None
    }
    settings = Settings(**overrides)  # type: ignore[arg-type]
    problem = exposure_problem(settings.host, settings.api_token, allow_unauthenticated)
    if problem is not None:
        print(f"sift: {problem}", file=sys.stderr)
        return 2
    # Every logger, uvicorn's access log included, writes through one handler that adds the
    # request id (service.logs); uvicorn must not install its own.
    configure_logging(settings.log_format, log_level)
    if settings.workers > 1:
        worker_args = ["--log-level", log_level, "--log-format", settings.log_format]
        return serve_workers(
            settings, settings.workers, worker_args + (["--debug"] if debug else [])
        )
    return run_server(settings, log_level, debug)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m service``: the ``sift`` command with ``serve`` registered directly."""
    from siftstream.cli import main as sift_main

    return sift_main(argv, extra_commands=[add_serve])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
