"""The usage examples in the methods' docstrings run as written: a user meets a method there."""

from __future__ import annotations

import doctest
import sys

import pytest

from service.algorithms import METHODS

WITH_EXAMPLES = sorted(n for n, m in METHODS.items() if ">>>" in (type(m).__doc__ or ""))


def test_the_statistics_methods_show_how_they_are_used() -> None:
    assert {"variance", "ocfs"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_a_methods_docstring_example_runs(name: str) -> None:
    cls = type(METHODS[name])
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    module = sys.modules[cls.__module__]
    for test in doctest.DocTestFinder(recurse=False).find(cls, cls.__name__, module=module):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0
