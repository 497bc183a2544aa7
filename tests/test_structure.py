"""The shape ARCHITECTURE.md promises, held to the code: modules of one job (at most
``MOST_LINES`` lines each, in the service and the client), and classes composed of parts rather
than stacked (none of the service's own classes assembled from more than two of its own bases,
nor more than two deep; exceptions and the methods, which implement the method protocol through
``MethodBase``, aside)."""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import service
from service.algorithms.base import MethodBase

ROOT = Path(__file__).resolve().parent.parent
#: The longest module ARCHITECTURE.md allows: a longer one holds more than one job.
MOST_LINES = 600
#: The deepest a class of the service may sit on its own classes, and the most it may derive from.
MOST_DEPTH = 2
MOST_BASES = 2


def _modules() -> list[Path]:
    return sorted(
        path
        for folder in (ROOT / "service", ROOT / "client" / "siftstream")
        for path in folder.rglob("*.py")
    )


@pytest.mark.parametrize("path", _modules(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_module_holds_one_job(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MOST_LINES, f"{path.relative_to(ROOT)} has {lines} lines"


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
