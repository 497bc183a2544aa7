"""MkDocs hooks of Sift's documentation site (mkdocs.yml, ``hooks``).

Two jobs, both so that a page cannot say what the code no longer does:

* **Generate** what is declared in the code, at build time: the configuration table from
  ``service.config.Settings`` (``<!-- sift:settings -->``) and a method's parameters from its
  parameter model (``<!-- sift:params fsds -->``, the method's ``params_schema``); the plots
  that ``EVALUATION.md`` (included by ``development/evaluation.md``) shows.
* **Check** every page, with what it includes from the repository's root (``--8<--``), for
  stale references, each a warning that ``mkdocs build --strict`` turns into a failure: a
  ``SIFT_*`` variable that nothing reads, a route ``/v1/...`` the app does not serve, a
  ``service.*`` / ``siftstream.*`` name that does not import, a repository path that does not
  exist. Links between pages and their anchors are MkDocs's own to check (``validation``).
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import logging
import re
from functools import cache
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.sift_docs")

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_MARK = "<!-- sift:settings -->"
PARAMS_MARK = re.compile(r"<!-- sift:params ([a-z_]+) -->")
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::([\w-]+))?"\s*$', re.MULTILINE)

SIFT_NAME = re.compile(r"\bSIFT_[A-Z0-9_]*[A-Z0-9]\b")
ROUTE = re.compile(r"(?<![\w.])/v1/[A-Za-z0-9_{}.:/-]*[A-Za-z0-9_}]")
PYTHON_NAME = re.compile(r"`((?:service|siftstream)(?:\.[A-Za-z_]\w*)+)(?:\(\))?`")
REPO_DIRS = "service|client|tests|benchmarks|deploy|evaluation|datasets|scripts|requirements|docs"
REPO_PATH = re.compile(rf"`((?:{REPO_DIRS})/[^`\s]*)`")
#: Code that reads environment variables of its own (the client, the tests, the benchmarks).
CODE_READING_SIFT_NAMES = ("service", "client", "tests", "benchmarks", "evaluation", "scripts")


# -- what the code declares ----------------------------------------------------------------------


@cache
def settings_names() -> frozenset[str]:
    from service.config import Settings

    return frozenset(f"SIFT_{name.upper()}" for name in Settings.model_fields)


@cache
def known_sift_names() -> frozenset[str]:
    """Every SIFT_* name some code of the repository reads or sets."""
    names = set(settings_names())
    for folder in CODE_READING_SIFT_NAMES:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", "") and "__pycache__" not in path.parts:
                names |= set(SIFT_NAME.findall(path.read_text(errors="replace")))
    return frozenset(names)


@cache
def route_patterns() -> tuple[re.Pattern[str], ...]:
    """The app's paths as patterns (``{name}`` matches one path segment)."""
    from service.api.app import create_app
    from service.config import Settings

    app = create_app(Settings())
    paths = {getattr(route, "path", None) for route in app.routes}
    for router in app.state.routers:
        paths |= {getattr(route, "path", None) for route in router.routes}
    return tuple(
        re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(path)))
        for path in paths
        if isinstance(path, str)
    )


@cache
def ignored_prefixes() -> tuple[str, ...]:
    """Folders git ignores (``tests/artifacts/``): files the tests write, absent from a clone."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line for line in lines if "/" in line.rstrip("/") and line.endswith("/"))


# -- generated parts -----------------------------------------------------------------------------


def _default(field: Any) -> str:
    if field.default_factory is not None:
        return "(see meaning)"
    value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and value >= 1024**2 and value % 1024**2 == 0:
        return f"{value} ({value // 1024**2} MiB)"
    if value == "":
        return "empty"
    return f"`{value}`"


def _bounds(metadata: list[Any]) -> str:
    words = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    found = []
    for item in metadata:
        for attribute, word in words.items():
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(f"{word} {value}")
    return ", ".join(found)


def settings_table() -> str:
    from service.config import Settings

    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("internal"):
            continue
        if not field.description:
            log.warning("Settings.%s has no description: the configuration page needs one", name)
        bounds = _bounds(field.metadata)
        meaning = (field.description or "").replace("|", "\\|")
        if bounds:
            meaning += f" ({bounds})"
        rows.append(f"| `SIFT_{name.upper()}` | {_default(field)} | {meaning} |")
    return "\n".join(rows)


def _schema_type(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " or ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    if "anyOf" in schema:
        return " or ".join(_schema_type(option) for option in schema["anyOf"])
    if schema.get("type") == "object" and "additionalProperties" in schema:
        return "{view: " + _schema_type(schema["additionalProperties"]) + "}"
    return str(schema.get("type", "any"))


def _schema_bounds(schema: dict[str, Any]) -> str:
    words = {
        "minimum": ">=",
        "exclusiveMinimum": ">",
        "maximum": "<=",
        "exclusiveMaximum": "<",
    }
    found = [f"{word} {schema[key]}" for key, word in words.items() if key in schema]
    for option in schema.get("anyOf", ()):
        found += [f"{word} {option[key]}" for key, word in words.items() if key in option]
    return ", ".join(found)


def params_table(method_name: str) -> str:
    from service.algorithms import METHODS

    method = METHODS.get(method_name)
    if method is None:
        log.warning("<!-- sift:params %s -->: no such method", method_name)
        return ""
    properties = method.params_schema.get("properties", {})
    if not properties:
        return f"`{method_name}` has no parameters."
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for name, schema in properties.items():
        shown = f"`{json.dumps(schema['default'])}`" if "default" in schema else "computed"
        bounds = _schema_bounds(schema)
        meaning = (schema.get("description") or "").replace("|", "\\|").replace("\n", " ")
        if bounds:
            meaning += f" ({bounds})"
        rows.append(f"| `{name}` | {_schema_type(schema)} | {shown} | {meaning} |")
    return "\n".join(rows)


# -- checks --------------------------------------------------------------------------------------


def with_snippets(markdown: str) -> str:
    """The page and the files it includes with ``--8<--`` (for the checks)."""
    included = []
    for match in SNIPPET.finditer(markdown):
        path = ROOT / match.group(1)
        if path.is_file():
            included.append(path.read_text())
    return "\n".join([markdown, *included])


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                target = getattr(target, attribute)
        except AttributeError:
            return False
        return True
    return False


def _expand_braces(path: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    head, tail = path[: match.start()], path[match.end() :]
    return [x for option in match.group(1).split(",") for x in _expand_braces(head + option + tail)]


def _path_exists(path: str) -> bool:
    if any(path.startswith(prefix) for prefix in ignored_prefixes()):
        return True
    if "*" in path:
        folder, _, pattern = path.rpartition("/")
        base = ROOT / folder
        return base.is_dir() and any(fnmatch.fnmatch(p.name, pattern) for p in base.iterdir())
    return (ROOT / path).exists()


def stale_references(text: str) -> list[str]:
    """What ``text`` names that the repository does not have."""
    found = []
    for name in sorted(set(SIFT_NAME.findall(text)) - known_sift_names()):
        found.append(f"{name}: no setting, and nothing in the code reads it")
    for route in sorted(set(ROUTE.findall(text))):
        if not any(pattern.fullmatch(route) for pattern in route_patterns()):
            found.append(f"{route}: the app serves no such route")
    for dotted in sorted(set(PYTHON_NAME.findall(text))):
        if not _resolves(dotted):
            found.append(f"{dotted}: does not import")
    for raw in sorted(set(REPO_PATH.findall(text))):
        path = re.split(r"::|#", raw)[0].rstrip(".,:;)")
        if "<" in path or "..." in path:  # a placeholder, not a path
            continue
        for candidate in _expand_braces(path):
            if not _path_exists(candidate):
                found.append(f"{candidate}: no such file or folder in the repository")
    return found


# -- MkDocs events -------------------------------------------------------------------------------


def on_files(files: Files, config: Any) -> Files:
    """EVALUATION.md's plots, where its inclusion in development/evaluation.md looks for them."""
    for plot in sorted((ROOT / "evaluation" / "plots").glob("*.png")):
        files.append(
            File.generated(
                config, f"development/evaluation/plots/{plot.name}", abs_src_path=str(plot)
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    for problem in stale_references(with_snippets(markdown)):
        log.warning("%s: %s", page.file.src_uri, problem)
    if SETTINGS_MARK in markdown:
        markdown = markdown.replace(SETTINGS_MARK, settings_table())
    return PARAMS_MARK.sub(lambda match: params_table(match.group(1)), markdown)
