"""The layer order ARCHITECTURE.md states, held to the imports: every module of the service and
the client belongs to one entry of the map under "Layers" (its file, or the longest folder that
holds it), and a module imports only modules of its own entry or of the entries listed before
it. Every import counts: at the top, inside a function, or for the type checker only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.harness import modules_imported

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"service": ROOT / "service", "siftstream": ROOT / "client" / "siftstream"}
#: Imports that run back up, each with what it waits for; nothing else may (none today).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def stated_layers(text: str) -> list[str]:
    """The entries of the layer map (the first code block under "## Layers"), lowest first."""
    section = text.split("\n## Layers\n", 1)[1]
    block = section.split("```", 2)[1]
    return re.findall(r"^((?:service|client)/\S+)", block, flags=re.M)


def entry_of(path: str, layers: list[str]) -> str | None:
    """The entry ``path`` (relative to the repository) belongs to: itself, or the longest
    folder entry holding it."""
    if path in layers:
        return path
    folders = [entry for entry in layers if entry.endswith("/") and path.startswith(entry)]
    return max(folders, key=len, default=None)


def module_path(name: str) -> str | None:
    """The repository path of module ``name`` (``service.store.keys``), if it is ours."""
    top, *rest = name.split(".")
    if top not in PACKAGES:
        return None
    base = PACKAGES[top].joinpath(*rest)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return str(candidate.relative_to(ROOT))
    return None


def imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module of ours ``tree`` imports (``from a import b`` is ``a.b`` when ``b`` is a
    module), with its line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((node.lineno, sub if module_path(sub) else node.module))
    return [(line, name) for line, name in found if module_path(name)]


def upward_imports(layers: list[str], sources: dict[str, str]) -> list[str]:
    """Each import of ``sources`` (path -> text) that reaches a later entry than its module's,
    as ``path:line imports module (entry above entry)``; a module outside the map is one too."""
    rank = {entry: index for index, entry in enumerate(layers)}
    wrong = []
    for path, text in sources.items():
        own = entry_of(path, layers)
        if own is None:
            wrong.append(f"{path}: in no layer")
            continue
        for line, name in imported(ast.parse(text)):
            target = entry_of(module_path(name) or "", layers)
            if target is None or (rank[target] > rank[own] and (path, name) not in KNOWN_UPWARD):
                wrong.append(f"{path}:{line} imports {name} ({target} above {own})")
    return wrong


def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for folder in PACKAGES.values()
        for path in sorted(folder.rglob("*.py"))
        if path != ROOT / "service" / "__init__.py"
    }


def test_no_module_imports_a_layer_above_its_own() -> None:
    layers = stated_layers((ROOT / "ARCHITECTURE.md").read_text())
    assert layers[0] == "client/siftstream/" and "service/api/" in layers
    sources = _sources()
    assert len(sources) > 200
    assert upward_imports(layers, sources) == []


def test_the_rule_finds_an_import_running_back_up() -> None:
    """The check can fail: a planted import of the API in the store, one inside a function of
    the client, and a module in no layer are each found."""
    layers = stated_layers((ROOT / "ARCHITECTURE.md").read_text())
    planted = {
        "service/store/keys.py": "from service.api.app import create_app\n",
        "client/siftstream/files.py": "def f():\n    import service.errors\n",
        "service/errors.py": "from service.store import keys\nimport service.names\n",
        "elsewhere/module.py": "",
    }
    assert upward_imports(layers, planted) == [
        "service/store/keys.py:1 imports service.api.app (service/api/ above service/store/)",
        "client/siftstream/files.py:2 imports service.errors "
        "(service/errors.py above client/siftstream/)",
        "service/errors.py:1 imports service.store.keys (service/store/ above service/errors.py)",
        "service/errors.py:2 imports service.names (service/names.py above service/errors.py)",
        "elsewhere/module.py: in no layer",
    ]


def test_starting_the_service_leaves_the_heavy_statistics_libraries_out() -> None:
    """What a start imports is what every restart and takeover waits for: the service's app
    reaches for ``scipy.special``'s functions, never ``scipy.stats`` (half a second of imports
    on this machine) nor scikit-learn."""
    imported = modules_imported(
        "import service.api.app, service.server", ("sklearn", "scipy.stats")
    )
    assert imported == []
