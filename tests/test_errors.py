"""Every exception class lives in `maya_server/errors.py`, drawn in its docstring tree."""

from __future__ import annotations

import importlib
import pkgutil
import re

import maya_server
from maya_server import errors

NOT_IMPORTED = {"maya_server.__main__"}
"""Importing it runs the CLI."""

EXCEPTIONS_ELSEWHERE: dict[str, str] = {}
"""`module.Class` of an exception allowed outside errors.py, with the reason; none is today."""

_TREE_LINE = re.compile(r"^(?P<indent>[ │├└─]*?)(?P<name>[A-Z]\w+)\s")


def every_module() -> list:
    names = [info.name for info in pkgutil.walk_packages(maya_server.__path__, "maya_server.")]
    return [importlib.import_module(name) for name in names if name not in NOT_IMPORTED]


def drawn_parents(doc: str) -> dict[str, str | None]:
    """Each class the docstring tree draws, with the class drawn above it (None for the root)."""
    tree = doc.split("\n\n")[1]
    parents: dict[str, str | None] = {}
    path: list[tuple[int, str]] = []
    for line in tree.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        column = match.start("name")
        while path and path[-1][0] >= column:
            path.pop()
        parents[match["name"]] = path[-1][1] if path else None
        path.append((column, match["name"]))
    return parents


def all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | all_subclasses(sub)
    return found


def test_every_exception_in_errors_py_is_in_its_docstring_tree():
    classes = [name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__]
    assert len(classes) > 20
    assert [name for name in classes if f" {name} " not in errors.__doc__] == []


def test_no_module_but_errors_py_defines_an_exception():
    elsewhere = sorted(
        f"{module.__name__}.{name}"
        for module in every_module()
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == module.__name__
        and module is not errors
    )
    assert [name for name in elsewhere if name not in EXCEPTIONS_ELSEWHERE] == []


def test_every_maya_error_is_drawn_under_its_own_base():
    every_module()  # so that a subclass defined anywhere is found
    parents = drawn_parents(errors.__doc__)
    assert parents["MayaError"] is None and parents["ContextLengthExceeded"] == "InvalidRequestError"
    actual = {cls.__name__: cls.__bases__[0].__name__ for cls in all_subclasses(errors.MayaError)
              if not cls.__module__.startswith("tests")}
    assert {name: parents.get(name) for name in actual} == actual
