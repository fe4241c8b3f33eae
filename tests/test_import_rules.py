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

ROOMS = ("engine.llama_server", "engine.upstream", "engine.replicas", "responses.store", "responses.jobs",
         "responses.request", "responses.conversion", "responses.assembly",
         "responses.persistence", "responses.background", "responses.endpoints")
"""The sub-packages: each a room of its own inside its package, with the rules below."""

ROOM_RULES = {
    "engine": ("engine.llama_server", "engine.upstream", "engine.replicas"),
    "engine.upstream": ("engine.llama_server", "engine.replicas"),
    "engine.llama_server": ("engine.replicas",),
    "engine.replicas": ("engine.llama_server",),
    "responses": ("responses.request", "responses.conversion", "responses.assembly", "responses.persistence",
                  "responses.background", "responses.endpoints"),
}
"""room -> the rooms of its own package it must not import (`engine`, `responses`: the modules directly in the
package; responses/'s own, its settings and metrics, read the store and the jobs and none of the API's rooms)."""

ROOM_MAY_IMPORT = {
    "responses.request": ("responses.request",),
    "responses.conversion": ("responses.conversion", "responses.request"),
    "responses.assembly": ("responses.assembly", "responses.request"),
    "responses.persistence": ("responses.persistence", "responses.request", "responses.assembly.assembler",
                              "responses.store.interface"),
    "responses.background": ("responses.background", "responses.request", "responses.conversion", "responses.assembly",
                             "responses.persistence", "responses.jobs", "responses.store"),
    "responses.endpoints": ("responses.endpoints", "responses.request", "responses.conversion", "responses.assembly",
                            "responses.persistence", "responses.jobs", "responses.store",
                            "responses.background.worker_generation"),
    "responses.store": ("responses.store", "responses.settings"),
    "responses.jobs": ("responses.jobs", "responses.store", "responses.settings", "responses.assembly.assembler",
                       "responses.persistence.stored_turn"),
}
"""room -> all it may import of its own package: the API's modules above it are out of reach, whatever is added."""


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


def _files_run_by(imported: str) -> list[Path]:
    """The files an import of `imported` runs: each package's `__init__.py` on the way and the module itself."""
    parts, files = imported.split("."), []
    for end in range(1, len(parts) + 1):
        path = PACKAGE.joinpath(*parts[:end])
        if (path / "__init__.py").exists():
            files.append(path / "__init__.py")
        elif path.with_suffix(".py").exists():
            files.append(path.with_suffix(".py"))
            break
        else:
            break
    return files


def test_the_configuration_imports_nothing_of_responses():
    """`config.py` checks every setting, `--store` included (`util/store_url.py`), without the Responses service:
    neither it nor anything it imports, at any depth and lazy imports included, imports `responses/`."""
    assert not [imported for imported in imports_of(PACKAGE / "config.py") if _breaks(imported, "responses")]
    seen, todo = set(), [PACKAGE / "config.py"]
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(file for imported in imports_of(path) for file in _files_run_by(imported))
    reached = sorted(str(path.relative_to(PACKAGE.parent)) for path in seen
                     if path.is_relative_to(PACKAGE / "responses"))
    assert not reached, "\n".join(reached)


def room_of(module: str) -> str:
    """The room a dotted module is in: a sub-package of ROOMS, else its package's own modules."""
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    return module.split(".")[0]


def _files_of(room: str) -> list[Path]:
    return [path for path in sorted((PACKAGE / room.replace(".", "/")).rglob("*.py"))
            if room_of(".".join(path.relative_to(PACKAGE).with_suffix("").parts)) == room]


@pytest.mark.parametrize("room", sorted(ROOM_RULES))
def test_room_keeps_its_import_rule(room):
    offending = sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {imported}"
        for path in _files_of(room)
        for imported in imports_of(path)
        for forbidden in ROOM_RULES[room]
        if _breaks(imported, forbidden))
    assert not offending, "\n".join(offending)


@pytest.mark.parametrize("room", sorted(ROOM_MAY_IMPORT))
def test_room_imports_only_what_it_may_of_its_package(room):
    package = room.split(".")[0]
    offending = sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {imported}"
        for path in _files_of(room)
        for imported in imports_of(path)
        if _breaks(imported, package) and imported != package
        and not any(_breaks(imported, allowed) for allowed in ROOM_MAY_IMPORT[room]))
    assert not offending, "\n".join(offending)


def test_every_room_is_a_package_with_its_paragraph():
    """Each sub-package opens with what it does, what it may import and what imports it."""
    for room in ROOMS:
        init = PACKAGE / room.replace(".", "/") / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "may import" in doc and "import" in doc.split("may import", 1)[1], f"{init}: {doc[:80]!r}"


def test_rooms_import_each_other_one_way():
    """No cycle between the rooms of engine/ and responses/: a sub-package is one node, a module directly in the
    package is a node of its own (settings.py is not store/), so a store module importing settings.py while
    metrics.py imports store/ is one way, and a circle like replicas -> metrics -> replicas is caught."""
    graph: dict[str, set[str]] = {}
    for package in ("engine", "responses"):
        for path in (PACKAGE / package).rglob("*.py"):
            module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
            source = _node_of(module)
            for imported in imports_of(path):
                if imported.split(".")[0] == package and _node_of(imported) != source:
                    graph.setdefault(source, set()).add(_node_of(imported))
    cycles = [f"{a} -> {b} -> ... -> {a}" for a in graph for b in graph[a] if a in _reachable(graph, b)]
    assert not cycles, "\n".join(sorted(cycles))


def _node_of(module: str) -> str:
    room = room_of(module)
    if room in ROOMS:
        return room
    parts = module.split(".")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    path = PACKAGE.joinpath(*parts)
    return ".".join(parts[:2]) if path.with_suffix(".py").exists() or path.is_dir() else ".".join(parts[:-1][:2])


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


def test_modules_import_each_other_one_way():
    """No circle between modules either, inside a room included (a type-only import counts: it is still an arrow
    a reader must follow back), so the replica set and its metrics cannot import each other again."""
    graph: dict[str, set[str]] = {}
    modules = {".".join(p.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
               for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        source = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        for imported in imports_of(path):
            if imported in modules and imported != source and not (PACKAGE / imported.replace(".", "/")).is_dir():
                graph.setdefault(source, set()).add(imported)
    cycles = [f"{a} -> {b} -> ... -> {a}" for a in graph for b in graph[a] if a in _reachable(graph, b)]
    assert not cycles, "\n".join(sorted(cycles))


def test_a_server_without_mcp_servers_never_imports_the_mcp_sdk():
    """The MCP SDK is half of importing the app (some 0.4 s of every start, `mcp/connection.py`): a Maya with no
    `--mcp-config` must not pay it, so importing the app and the command line leaves it unloaded."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, maya_server.app, maya_server.cli; "
                               "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types'}))"],
        capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert loaded == "[]"
