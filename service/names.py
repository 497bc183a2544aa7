"""The one rule for the names users give: selectors, streams, sources, views and their
features' views. A name becomes part of Redis keys (``{name}`` is a hash tag), of URLs and of
``Location`` headers, so it has no braces, colons, slashes, spaces or control characters."""

from __future__ import annotations

import re

#: The rule as a regular expression, unanchored.
NAME_TEXT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
#: Compiled: always ``fullmatch`` (``$`` would accept a final newline).
NAME_PATTERN = re.compile(NAME_TEXT)
#: Anchored, for JSON Schema and FastAPI (which search).
ANCHORED_NAME = f"^{NAME_TEXT}$"
#: The rule in words, for refusals and descriptions.
NAME_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"
