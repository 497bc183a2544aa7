"""The documentation site's hook (docs/_hooks/sift_docs.py): what it generates comes from the
code, and each kind of stale reference it looks for is found (``mkdocs build --strict`` in CI
fails on them; .ci/run builds the site)."""

from __future__ import annotations

import argparse
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from service.algorithms import METHODS
from service.config import Settings

UNREAD = "SIFT_" + "NO_SUCH_THING"
HOOK = Path(__file__).resolve().parents[1] / "docs" / "_hooks" / "sift_docs.py"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sift_docs", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_current_references_pass(hook: ModuleType) -> None:
    text = (
        "`SIFT_API_TOKEN`, `SIFT_URL` (the client's), `GET /v1/selectors/{name}/top?h=5`, "
        "`/v1/selectors/news/chunks`, `service.algorithms.METHODS`, `siftstream.Client`, "
        "`service/store/parts/{log,leases}.py`, `service/store/lua/*.lua`, "
        "`tests/api/test_write_path.py::test_x`, `tests/artifacts/dashboard.png`"
    )
    assert hook.stale_references(text) == []


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        # Built here, so that this file does not count as code that reads the name.
        (f"set `{UNREAD}`", f"{UNREAD}: no setting"),
        ("`GET /v1/selectors/{name}/nowhere`", "/v1/selectors/{name}/nowhere: the app serves"),
        ("`service.client.Client`", "service.client.Client: does not import"),
        ("`service.config.Settings.nope`", "service.config.Settings.nope: does not import"),
        ("`service/applier.py`", "service/applier.py: no such file"),
        ("`service/store/parts/{log,nope}.py`", "service/store/parts/nope.py: no such file"),
    ],
)
def test_each_kind_of_stale_reference_is_found(hook: ModuleType, text: str, complaint: str) -> None:
    problems = hook.stale_references(text)
    assert len(problems) == 1 and problems[0].startswith(complaint), problems


def test_the_configuration_table_lists_every_setting_with_its_meaning(hook: ModuleType) -> None:
    table = hook.settings_table()
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        listed = f"| `SIFT_{name.upper()}` |" in table
        assert listed != bool(extra.get("internal")), name
        assert field.description, f"Settings.{name} needs a description for the docs"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_has_its_docs_page_in_the_site_and_the_readme(method: str) -> None:
    """A method's docs page (``docs/methods/``) shows its parameters (``sift:params``), is in
    the site's navigation, and the README's table of methods names it."""
    root = HOOK.parents[2]
    pages = [
        page.name
        for page in sorted((root / "docs" / "methods").glob("*.md"))
        if f"<!-- sift:params {method} -->" in page.read_text()
    ]
    assert pages, f"no page under docs/methods/ shows <!-- sift:params {method} -->"
    assert f": methods/{pages[0]}" in (root / "mkdocs.yml").read_text()
    assert f"| `{method}` |" in (root / "README.md").read_text()


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_method_page_shows_every_parameter_it_takes(hook: ModuleType, method: str) -> None:
    table = hook.params_table(method)
    for parameter in METHODS[method].params_schema.get("properties", {}):
        assert f"| `{parameter}` |" in table


def test_the_command_table_names_every_client_command() -> None:
    """docs/client.md's table of commands has a row for every command ``sift`` has, and for
    every action of the commands that have actions."""
    from siftstream.commands import CLIENT_COMMANDS

    table = (Path(__file__).parents[1] / "docs" / "client.md").read_text()
    actions = {
        "alerts": ["add", "ls", "rm", "events", "rotate", "rearm", "redeliver"],
        "stream": ["create", "push", "top", "ls", "rm"],
        "source": ["create", "ls", "show", "restart", "rm"],
    }
    wanted = [
        f"`sift {command}{' ' + action if action else ''}"
        for command in sorted(CLIENT_COMMANDS)
        for action in actions.get(command, [""])
    ]
    wanted += ["`sift serve [--host] [--port] [--workers N]", "`sift delete --prefix P"]
    missing = [row for row in wanted if row not in table]
    assert not missing, missing


def _passages(text: str) -> list[str]:
    """Paragraphs, list items and table rows: the units a list of source kinds sits in."""
    return [part for part in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\|))", text) if part.strip()]


def _help_texts(parser: argparse.ArgumentParser) -> list[str]:
    """Every description and option help of a parser and of its subcommands."""
    texts = [parser.description or ""]
    for action in parser._actions:
        texts.append(action.help or "")
        if isinstance(action, argparse._SubParsersAction):
            texts += [choice.help or "" for choice in action._choices_actions]
            for sub in action.choices.values():
                texts += _help_texts(sub)
    return texts


def test_every_list_of_source_kinds_names_each_kind() -> None:
    """Wherever the pages, the ``sift`` help or the OpenAPI document name the buses a source
    reads (a passage naming both a Redis stream and NATS), every kind the service has is
    named there."""
    from service.api.app import create_app
    from service.sources.adapters import ADAPTERS
    from siftstream.cli import build_parser

    assert set(ADAPTERS) == {"redis-stream", "nats", "kafka"}, "name the new kind below"
    named = {"redis-stream": r"redis.stream", "nats": r"jetstream|nats", "kafka": r"kafka"}
    root = HOOK.parents[2]
    where = {
        str(path.relative_to(root)): path.read_text()
        for path in [root / "README.md", root / "ARCHITECTURE.md", *(root / "docs").rglob("*.md")]
    }
    where["sift --help"] = "\n\n".join(_help_texts(build_parser()))
    openapi = create_app(Settings()).openapi()
    where["OpenAPI"] = "\n\n".join(
        str(value) for value in _strings(openapi) if isinstance(value, str)
    )
    short = []
    for name, text in where.items():
        for passage in _passages(text):
            found = {k for k, pattern in named.items() if re.search(pattern, passage, re.I)}
            if {"redis-stream", "nats"} <= found and found != set(named):
                short.append(f"{name}: {passage.strip()[:160]}")
    assert not short, "\n".join(short)


def _strings(document: object) -> Iterator[object]:
    if isinstance(document, dict):
        for value in document.values():
            yield from _strings(value)
    elif isinstance(document, list):
        for value in document:
            yield from _strings(value)
    else:
        yield document
