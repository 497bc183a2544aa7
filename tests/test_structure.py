"""The shape ARCHITECTURE.md promises, held to the code: dispatch through the method protocol
and the chunk kinds, never on names (no branch on a method's name outside ``service/algorithms/``,
none on a chunk kind outside ``service/wire/kinds.py``), and classes composed of parts rather
than stacked (none of the service's own classes assembled from more than two of its own bases,
nor more than two deep; exceptions and the methods, which implement the method protocol through
``MethodBase``, aside), and the applier used through its door only."""

from __future__ import annotations

import ast
import fnmatch
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import service
from service.algorithms import METHODS
from service.algorithms.base import MethodBase
from service.applier import Applier
from service.wire.kinds import CHUNK_FORMATS

ROOT = Path(__file__).resolve().parent.parent
#: The deepest a class of the service may sit on its own classes, and the most it may derive from.
MOST_DEPTH = 2
MOST_BASES = 2
#: Where a branch on a chunk kind or a method's name belongs: the kinds, and the methods.
KINDS_MODULE = Path("service/wire/kinds.py")
METHODS_FOLDER = Path("service/algorithms")


def _modules() -> list[Path]:
    return sorted(
        path
        for folder in (ROOT / "service", ROOT / "client" / "siftstream")
        for path in folder.rglob("*.py")
    )


def _literals(node: ast.AST) -> set[str]:
    """The strings ``node`` is, or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {text for element in node.elts for text in _literals(element)}
    return set()


def branches(source: str, names: set[str], attribute: str | None = None) -> list[str]:
    """The branches of ``source`` that ask which of ``names`` a value is: a comparison with one
    of them (``== 'rows'``, ``in ('rows', 'views')``; a lookup such as ``'rows' in document``
    asks of a mapping, not of a value, and is not one), a ``case`` of one, or any comparison
    of an ``attribute`` (``method.chunk_kind``); each as ``line: code``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            asked = any(
                (
                    isinstance(op, ast.Eq | ast.NotEq | ast.Is | ast.IsNot)
                    and (_literals(left) | _literals(right)) & names
                )
                or (
                    isinstance(op, ast.In | ast.NotIn)
                    and isinstance(right, ast.Tuple | ast.List | ast.Set)
                    and _literals(right) & names
                )
                for op, left, right in zip(node.ops, operands, operands[1:], strict=False)
            )
            if asked or any(
                isinstance(operand, ast.Attribute) and operand.attr == attribute
                for operand in operands
            ):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.match_case):
            values = [p.value for p in ast.walk(node.pattern) if isinstance(p, ast.MatchValue)]
            if any(_literals(value) & names for value in values):
                found.append(f"{node.pattern.lineno}: case {ast.unparse(node.pattern)}")
    return found


def _found_in(paths: list[Path], names: set[str], attribute: str | None = None) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{branch}"
        for path in paths
        for branch in branches(path.read_text(), names, attribute)
    ]


def test_no_branch_on_a_chunk_kind_outside_the_kinds() -> None:
    """What differs between chunk kinds is said by the kind (``ChunkFormat``), so a new kind
    is one class in ``service/wire/kinds.py``, not a hunt for every ``if kind == ...``."""
    kinds: set[str] = set(CHUNK_FORMATS)
    assert kinds == {"rows", "labelled rows", "rows with a target", "views", "columns"}
    paths = [p for p in _modules() if p.relative_to(ROOT).parts[0] == "service"]
    outside = [p for p in paths if p.relative_to(ROOT) != KINDS_MODULE]
    assert len(outside) > 100
    assert _found_in(outside, kinds, "chunk_kind") == []


def test_no_branch_on_a_method_name_outside_the_methods() -> None:
    """What differs between methods is said by the method protocol (``Method``), so a new
    method is a module of ``service/algorithms/`` and one registration."""
    names = set(METHODS)
    assert {"variance", "ocfs", "omvfs"} <= names
    outside = [p for p in _modules() if METHODS_FOLDER not in p.relative_to(ROOT).parents]
    assert _found_in(outside, names) == []


PLANTED = """
def shaped(meta, kind, method):
    if kind.name == "columns":
        return 1
    if meta.kind not in ("rows", "labelled rows"):
        return 2
    if method.chunk_kind in kind.feeds:
        return 3
    match meta.method:
        case "ocfs":
            return 4
    if "rows" in document or kind.name == meta.kind:
        return 5
"""


def test_the_rules_find_a_planted_branch() -> None:
    """The checks above can fail: each planted branch is found, the lookup and the comparison
    of two values are not."""
    kinds: set[str] = set(CHUNK_FORMATS)
    assert branches(PLANTED, kinds, "chunk_kind") == [
        "3: kind.name == 'columns'",
        "5: meta.kind not in ('rows', 'labelled rows')",
        "7: method.chunk_kind in kind.feeds",
    ]
    assert branches(PLANTED, set(METHODS)) == ["10: case 'ocfs'"]


def _own(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "service"


def _depth(cls: type) -> int:
    bases = [base for base in cls.__bases__ if _own(base)]
    return 1 + max(map(_depth, bases)) if bases else 0


def _service_classes() -> list[type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(service.__path__, "service."):
        if info.name.endswith("__main__"):  # runs the command line when imported
            continue
        module = importlib.import_module(info.name)
        for _name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [found[name] for name in sorted(found)]


def test_classes_are_composed_not_stacked() -> None:
    classes = _service_classes()
    assert len(classes) > 100  # the walk found the service, not an empty package
    stacked = []
    for cls in classes:
        if issubclass(cls, BaseException | MethodBase):
            continue
        bases = [base.__name__ for base in cls.__bases__ if _own(base)]
        if len(bases) > MOST_BASES or _depth(cls) > MOST_DEPTH:
            stacked.append(f"{cls.__module__}.{cls.__qualname__}({', '.join(bases)})")
    assert stacked == []


def test_the_rule_finds_a_stack() -> None:
    """The check above can fail: a class three deep is found."""

    class Bottom:
        pass

    Bottom.__module__ = "service.example"

    class Middle(Bottom):
        pass

    Middle.__module__ = "service.example"

    class Top(Middle):
        pass

    Top.__module__ = "service.example"
    assert _depth(Top) == 2 and _depth(Middle) == 1

    class Deeper(Top):
        pass

    assert _depth(Deeper) == 3 > MOST_DEPTH


def _named_in_architecture() -> set[str]:
    """Every module path ARCHITECTURE.md names: in its layer map (``service/x.py`` or a folder
    ``service/x/``) or in its table (``x.py``, ``x/{a,b}.py``, ``x/<method>.py``, ``x/*.py``)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    names: set[str] = set(re.findall(r"^service/(\S+)", text, flags=re.M))
    for cell in re.findall(r"`([^`\s]+)`", text):
        cell = cell.removeprefix("service/")
        braces = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", cell)
        if braces:
            names.update(braces[1] + alt + braces[3] for alt in braces[2].split(","))
        else:
            names.add(cell)
    return names


def test_architecture_names_every_module() -> None:
    """ARCHITECTURE.md's map matches the code: every module of the service is named there, by
    its path, a pattern of its folder, or its folder (a package whose row names its parts)."""
    named = _named_in_architecture()
    patterns = [name for name in named if "*" in name or "<" in name]
    unnamed = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        module = path.relative_to(ROOT / "service")
        folder = f"{module.parent}/"
        if (
            module.name == "__init__.py"
            or str(module) in named
            or folder in named
            or any(fnmatch.fnmatch(str(module), re.sub(r"<\w+>", "*", p)) for p in patterns)
        ):
            continue
        unnamed.append(str(module))
    assert unnamed == []


#: Where the applier is used from: everything but the package itself. The package's own unit
#: tests (``tests/applier/``) may open its pure modules (the checkpoint policy); they too use
#: an ``Applier`` through its verbs only.
APPLIER_USERS = ("service", "client", "benchmarks", "evaluation", "docs/_hooks", "tests")
APPLIER_PACKAGE = "service.applier"


def _applier_breaches(source: str, may_open_modules: bool = False) -> list[str]:
    """What ``source`` (a module outside ``service/applier/``) names behind the applier's door:
    an import of one of the package's modules (``service.applier.<module>``, or
    ``from service.applier import <module>``), or an attribute of an applier (a name or an
    attribute ``applier``) that is not one of ``Applier``'s public verbs."""
    modules = {
        info.name
        for info in pkgutil.iter_modules(importlib.import_module(APPLIER_PACKAGE).__path__)
    }
    public = {name for name in dir(Applier) if not name.startswith("_")}
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom) and not may_open_modules:
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif node.module == APPLIER_PACKAGE:
                targets = [f"{APPLIER_PACKAGE}.{alias.name}" for alias in node.names]
                targets = [t for t in targets if t.rsplit(".", 1)[1] in modules]
            else:
                targets = [node.module or ""]
            found += [
                f"line {node.lineno}: imports {target}"
                for target in targets
                if target.startswith(f"{APPLIER_PACKAGE}.")
            ]
        elif isinstance(node, ast.Attribute) and node.attr not in public:
            owner = node.value
            named = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if named == "applier":
                found.append(f"line {node.lineno}: applier.{node.attr}")
    return found


def _applier_users() -> list[Path]:
    inside = ROOT / "service" / "applier"
    return sorted(
        path
        for folder in APPLIER_USERS
        for path in (ROOT / folder).rglob("*.py")
        if inside not in path.parents
    )


def test_nothing_outside_the_applier_names_its_parts() -> None:
    """Outside ``service/applier/``, the applier is its package's door and ``Applier``'s
    public verbs: no module of the package is imported, no part of an applier reached."""
    users = _applier_users()
    assert len(users) > 300  # the walk found the code, not an empty folder
    breaches = [
        f"{path.relative_to(ROOT)} {breach}"
        for path in users
        for breach in _applier_breaches(
            path.read_text(), may_open_modules=ROOT / "tests" / "applier" in path.parents
        )
    ]
    assert breaches == []


def test_the_door_rule_finds_a_breach() -> None:
    """The check above can fail: a part reached, a module imported, each is found."""
    source = (
        "from service.applier.waits import Waits\n"
        "from service.applier import Applier, waiting\n"
        "import service.applier.drain\n"
        "self.applier.scheduler.kick('s')\n"
        "applier.shared.hand_over('s')\n"
        "self.applier.appended('1-0', None, 0, [])\n"
    )
    assert _applier_breaches(source) == [
        "line 1: imports service.applier.waits",
        "line 2: imports service.applier.waiting",
        "line 3: imports service.applier.drain",
        "line 4: applier.scheduler",
        "line 5: applier.shared",
    ]
