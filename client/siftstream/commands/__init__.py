"""The client commands of ``sift``: create, push, top, watch, drift, baseline, alerts, ls,
describe, delete, export, import, ``sift stream create|push|top|ls|rm`` and
``sift source create|ls|show|rm`` (``sift serve`` is in ``siftstream.cli``). This module owns
their parser (``add_commands``) and their runner (``run``, one function per command); the
resumable push is ``siftstream.push``, the tables and JSON output ``siftstream.render``.

Every command talks to the service at ``--url`` (or ``SIFT_URL``, default
``http://127.0.0.1:8000``) with ``--api-key`` (or ``SIFT_API_KEY``, else ``SIFT_API_TOKEN``),
through ``Client``, which reads them as the library does: transport errors and 503s are retried
within ``--retry-budget`` seconds (10). A refusal prints the service's
problem detail and exits with status 1.

``sift push`` is resumable (``siftstream.push`` says how).
"""

from siftstream.commands.parser import add_commands, connection_options
from siftstream.commands.runners import CLIENT_COMMANDS, run

__all__ = ["CLIENT_COMMANDS", "add_commands", "connection_options", "run"]
