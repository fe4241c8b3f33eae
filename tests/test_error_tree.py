"""`maya_server/errors.py` draws every exception class it defines in its docstring tree."""

from __future__ import annotations

from maya_server import errors


def test_every_exception_in_errors_py_is_in_its_docstring_tree():
    classes = [name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__]
    assert len(classes) > 20
    assert [name for name in classes if f" {name} " not in errors.__doc__] == []
