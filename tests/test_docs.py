"""The documentation site's hook (docs/_hooks/sift_docs.py): what it generates comes from the
code, and each kind of stale reference it looks for is found (``mkdocs build --strict`` in CI
fails on them; .ci/run builds the site)."""

from __future__ import annotations

import importlib.util
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
        "source": ["create", "ls", "show", "rm"],
    }
    wanted = [
        f"`sift {command}{' ' + action if action else ''}"
        for command in sorted(CLIENT_COMMANDS)
        for action in actions.get(command, [""])
    ]
    wanted += ["`sift serve [--host] [--port] [--workers N]", "`sift delete --prefix P"]
    missing = [row for row in wanted if row not in table]
    assert not missing, missing
