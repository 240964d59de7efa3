"""The layers of durq, kept by a test: data flows one way.

    types, errors ← retry, settings ← states ← _drivers ← _engine, task, _tracing
        ← _worker, _maintenance ← registry, app, aio, testing, wire ← api, cli, dashboard, demo

A module may import from its own layer or lower ones, never higher; the module graph has
no cycles; and imports sit at the top of a module, except the optional extras and the
concrete drivers, which are loaded only when used.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "durq"

LAYERS: list[set[str]] = [
    {"types", "errors", "py", "logs"},
    {"retry", "settings", "keys", "jobmetrics"},
    {"states"},
    {"_drivers"},
    {"_engine", "task", "_tracing"},
    {"_worker", "_maintenance"},
    {
        "registry",
        "guards",
        "reads",
        "inline",
        "app",
        "aio",
        "testing",
        "wire",
        "webhooks",
        "outbox",
        "insights",
    },
    {"api", "cli", "dashboard", "demo", "__init__", "__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}

#: (importing module, imported module) pairs allowed inside a function: optional extras
#: and the concrete drivers, so ``import durq`` on SQLite never loads psycopg.
LAZY_ALLOWED = {
    ("durq._drivers", "durq._drivers.postgres.driver"),
    ("durq._drivers", "durq._drivers.sqlite.driver"),
    ("durq._drivers.sql", "sqlalchemy"),
    ("durq.cli.serve", "uvicorn"),
    ("durq.cli.serve", "durq.api"),
    ("durq.cli.serve", "durq.api.server"),  # uvicorn: the api extra
    ("durq.cli.keys", "durq.api.keys"),
    ("durq._tracing", "opentelemetry.trace"),
    ("durq._tracing", "opentelemetry.trace.propagation.tracecontext"),
    ("durq._engine.http", "httpx"),  # the webhooks extra
    ("durq._engine.secrets", "cryptography.exceptions"),  # the secrets extra
    ("durq._engine.secrets", "cryptography.hazmat.primitives.ciphers.aead"),
}


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


NAMES = {name for name, _ in modules()}


def imports(name: str, path: Path) -> Iterator[tuple[str, bool]]:
    """``(imported module, inside a function)`` for each durq or third-party import."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    local: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            local |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in local
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in NAMES]
            # ``from durq import states`` depends on durq.states, not on durq/__init__.
            for found in submodules or [target]:
                yield found, id(node) in local


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def durq_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in modules():
        graph[name] = {t for t, _ in imports(name, path) if t in NAMES and t != name}
    return graph


@pytest.mark.parametrize("name,path", list(modules()), ids=[n for n, _ in modules()])
def test_no_module_imports_a_higher_layer(name: str, path: Path) -> None:
    own = RANK[layer_of(name)]
    for target, _ in imports(name, path):
        if not target.startswith("durq.") or target == "durq":
            continue
        assert RANK[layer_of(target)] <= own, (
            f"{name} (layer {layer_of(name)}) imports {target} (layer {layer_of(target)}), "
            "a higher layer: move the shared piece down, or pass it in"
        )


def test_no_import_cycles() -> None:
    graph = durq_graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_imports_sit_at_the_top_except_optional_extras() -> None:
    found = sorted(
        (name, target)
        for name, path in modules()
        for target, inside in imports(name, path)
        if inside and (name, target) not in LAZY_ALLOWED
    )
    assert found == [], f"function-local imports (move them to the top): {found}"


def test_every_package_has_a_layer() -> None:
    assert {layer_of(name) for name, _ in modules()} <= set(RANK)


def test_the_layering_test_catches_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from ..app import App\n")
    assert ("durq.app", False) in set(imports("durq._drivers.bad", bad))
    assert RANK[layer_of("durq.app")] > RANK[layer_of("durq._drivers.bad")]
