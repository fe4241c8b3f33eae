"""The layers' import rules, checked on the source: a rule that slips fails here, not in review.

Why: the listing is the architecture only while the arrows between packages stay one-way. Each rule names
a package and the packages it must not import, directly or through a lazy import inside a function.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "maya_server"

RULES = {
    "chat": ("responses",),
    "responses": ("chat",),
    "http": ("chat", "responses", "mcp"),
    "neutral": ("config", "cli", "app", "http", "chat", "responses", "engine", "pipeline", "families", "images"),
    "pipeline": ("config", "cli", "app", "engine_setup", "http", "chat", "responses"),
    "engine": ("config", "cli", "app", "engine_setup", "http", "chat", "responses", "families.detection"),
    "images": ("config", "cli", "app", "http", "chat", "responses"),
    "model": ("config", "cli", "app", "http", "chat", "responses", "engine", "pipeline"),
    "families": ("config", "cli", "app", "http", "chat", "responses", "engine"),
    "structured": ("config", "cli", "app", "http", "chat", "responses", "engine"),
    "util": ("config", "cli", "app", "http", "chat", "responses", "engine", "pipeline"),
}
"""package -> what it must not import (`families.detection` is a module: engines report facts, the edge decides)."""


def imports_of(path: Path) -> set[str]:
    """Every maya_server module `path` imports, as a dotted name below maya_server, relative imports resolved."""
    module = path.relative_to(PACKAGE).with_suffix("").parts
    package = module[:-1] if module[-1] != "__init__" else module[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
            elif (node.module or "").startswith("maya_server"):
                target = node.module.split(".")[1:]
            else:
                continue
            found.add(".".join(target))
            found.update(".".join(target + [alias.name]) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(".".join(a.name.split(".")[1:]) for a in node.names if a.name.startswith("maya_server."))
    return found


def _breaks(imported: str, forbidden: str) -> bool:
    return imported == forbidden or imported.startswith(forbidden + ".")


@pytest.mark.parametrize("package", sorted(RULES))
def test_package_keeps_its_import_rule(package):
    offending = sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {imported}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for imported in imports_of(path)
        for forbidden in RULES[package]
        if _breaks(imported, forbidden))
    assert not offending, "\n".join(offending)


def test_the_rules_read_relative_imports():
    """The checker itself can fail: a known import of today's tree is found through a relative import."""
    assert "neutral.events" in imports_of(PACKAGE / "chat" / "assembler.py")


def _package_of(module: str) -> str:
    head = module.split(".")[0]
    return head if (PACKAGE / head).is_dir() else "(root)"


def test_packages_import_each_other_one_way():
    """No cycle between packages: a walk of the package graph never comes back to where it started."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = _package_of(".".join(path.relative_to(PACKAGE).with_suffix("").parts))
        for imported in imports_of(path):
            if imported and (PACKAGE / imported.split(".")[0]).is_dir() and _package_of(imported) != source:
                graph.setdefault(source, set()).add(_package_of(imported))
    graph.pop("(root)", None)  # the composition root imports everything and nothing imports it back (checked below)
    cycles = [f"{a} -> {b} -> ... -> {a}" for a in graph for b in graph[a] if a in _reachable(graph, b)]
    assert not cycles, "\n".join(sorted(cycles))


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen
