"""The rooms you can see in the folder names, held by a walk over every import in src/.

    vocabulary  errors durations model events config inputs display   (the only top modules)
    core        waypost.core.*      pure rules: no I/O, no backend
    system      waypost.system.*    bounded commands, file reads, HTTP
    store       waypost.store.*     the Store contract, store/sqlite/, store/postgres/
    delivery    waypost.delivery.*  the relay, its targets, the receiver
    use cases   waypost.usecases.*  what every door calls
    hooks       waypost.hooks.*     agent-host hooks: the decision, hosts' JSON, the answer
    sdk         waypost.sdk.*       `with waypost.run(...)`
    adapters    waypost.cli.*, waypost.http.*, waypost.mcp.* (and `python -m waypost`)
    public      `waypost` itself and the thin aliases of documented paths

A module's room is decided by its name's prefix alone: a module at the top of the package
that is neither vocabulary nor a public alias has no room, and the test names it. Each
room imports only its own and the rooms below it; adapters never import each other
(except to start a server); nothing in src imports the public surface; nothing imports in
a cycle. Every import counts: at the top of a module, inside a function (a lazy import is
for start-up cost, never to hide a cycle) and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
ROOT = SRC.parent
VOCABULARY = ("waypost.errors", "waypost.durations", "waypost.model", "waypost.events",
              "waypost.config", "waypost.inputs", "waypost.display")
# the public surface: the package itself and thin re-exports of documented paths
PUBLIC = ("waypost", "waypost.receiver", "waypost.watchdog")
ROOMS = (("vocabulary", VOCABULARY), ("core", ("waypost.core",)),
         ("system", ("waypost.system",)), ("store", ("waypost.store",)),
         ("delivery", ("waypost.delivery",)), ("use cases", ("waypost.usecases",)),
         ("hooks", ("waypost.hooks",)), ("sdk", ("waypost.sdk",)),
         ("adapters", ("waypost.cli", "waypost.http", "waypost.mcp", "waypost.__main__")))
LAYERS = (*(name for name, _ in ROOMS), "public")
ADAPTERS = dict(ROOMS)["adapters"]
MAX_LINES = 450
# (importer, adapter package) pairs that start another adapter's server, e.g. `waypost serve`
SERVER_STARTS: frozenset[tuple[str, str]] = frozenset({("waypost.cli.mcp", "waypost.mcp"),
                                                      ("waypost.cli.serve", "waypost.http")})
IO_MODULES = {"os", "io", "sqlite3", "subprocess", "socket", "pathlib", "shutil", "tempfile",
              "threading", "time", "signal", "select", "urllib", "http", "httpx", "psycopg",
              "psycopg_pool", "random", "getpass", "mimetypes"}

Edge = tuple[str, str, int]  # importer, imported waypost module, line


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer(module: str) -> str:
    """The module's room, by its name's prefix alone; "unfiled" when it has none."""
    if module in PUBLIC:
        return "public"
    return next((name for name, prefixes in ROOMS
                 if any(_under(module, p) for p in prefixes)), "unfiled")


def adapter_of(module: str) -> str | None:
    return next((a for a in ADAPTERS if _under(module, a)), None)


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "waypost").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(module: str, path: Path, node: ast.Import | ast.ImportFrom,
             known: Iterable[str]) -> Iterator[str]:
    """The waypost modules an import statement names (`from waypost.core import machine`
    names waypost.core.machine; `from waypost.model import Packet` names waypost.model)."""
    names = set(known)
    if isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in names else base
                   for a in node.names]
    for named in targets:
        target = _nearest(named, names)
        if target and target != module:
            yield target


def _nearest(name: str, known: set[str]) -> str:
    """`name`, or the nearest package above it that is a module of the tree ("" if none)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def edges(found: dict[str, Path] | None = None) -> list[Edge]:
    found = found or modules()
    out = []
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                out += [(module, target, node.lineno)
                        for target in imported(module, path, node, found)]
    return out


def wrong_way(all_edges: Iterable[Edge]) -> list[str]:
    """Each import of a layer above the importer's, or of another adapter."""
    problems = []
    for importer, target, line in all_edges:
        mine, theirs = layer(importer), layer(target)
        if "unfiled" in (mine, theirs):
            continue  # named by test_every_module_has_a_room
        if LAYERS.index(theirs) > LAYERS.index(mine):
            problems.append(f"{importer} ({mine}) imports {target} ({theirs}), line {line}")
        own, other = adapter_of(importer), adapter_of(target)
        if (own and other and own not in (other, "waypost.__main__")
                and (importer, other) not in SERVER_STARTS):
            problems.append(f"adapter {importer} imports adapter {target}, line {line}")
    return problems


def cycles(all_edges: Iterable[Edge]) -> list[list[str]]:
    """The import cycles: every strongly connected group of more than one module."""
    graph: dict[str, set[str]] = {}
    for importer, target, _ in all_edges:
        graph.setdefault(importer, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is a few hundred edges
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_every_layer() -> None:
    """The walk really reads the tree: each layer has modules and imports below it."""
    seen = {layer(m) for m in modules()}
    assert seen == set(LAYERS)
    all_edges = edges()
    assert ("waypost.usecases.runs", "waypost.core.history") in {(a, b) for a, b, _ in all_edges}
    assert ("waypost.cli", "waypost.core.history") in {(a, b) for a, b, _ in all_edges}


def test_every_module_has_a_room() -> None:
    """A module at the top of the package is vocabulary or a public alias; all else lives
    in a room named by its folder."""
    assert [m for m in modules() if layer(m) == "unfiled"] == []


@pytest.mark.parametrize(("module", "room"), [
    ("waypost.runs", "unfiled"), ("waypost.hook_hosts", "unfiled"),
    ("waypost.usecases.runs", "use cases"), ("waypost.model.packet", "vocabulary"),
    ("waypost.receiver", "public"), ("waypost.store.sqlite.write", "store"),
    ("waypost.hooks.answer", "hooks"), ("waypost.sdk.block", "sdk"),
    ("waypost.modelling", "unfiled"), ("waypost.__main__", "adapters"),
])
def test_a_module_s_room_is_its_prefix(module: str, room: str) -> None:
    assert layer(module) == room


def test_the_public_aliases_are_thin() -> None:
    """An alias only re-exports: no definition of its own, one room below it."""
    for module in PUBLIC[1:]:
        tree = ast.parse(modules()[module].read_text())
        defined = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
        assert defined == [], module
        assert {layer(t) for a, t, _ in edges() if a == module} <= {"delivery", "use cases"}


def test_every_package_map_names_its_modules() -> None:
    """Each package's docstring lists every module in its folder (`name.py`)."""
    missing = []
    for init in sorted((SRC / "waypost").rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for module in sorted(init.parent.glob("*.py")):
            if module.name != "__init__.py" and not re.search(
                    rf"(?<![\w.]){re.escape(module.name)}\b", doc):
                missing.append(f"{init.relative_to(SRC)} does not name {module.name}")
        missing += [f"{init.relative_to(SRC)} does not name {sub.name}/"
                    for sub in sorted(init.parent.iterdir())
                    if (sub / "__init__.py").exists() and f"{sub.name}/" not in doc]
    assert missing == []


def test_no_module_is_over_the_size_limit() -> None:
    long = {m: n for m, p in modules().items()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_architecture_names_every_room_and_alias() -> None:
    """ARCHITECTURE.md draws the rooms this test holds: every folder of the package, every
    top-level module it allows, and every module of the rooms below the doors (the
    backends' own modules are their package maps' to name) are named there."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    folders = [p.name + "/" for p in sorted((SRC / "waypost").iterdir())
               if (p / "__init__.py").exists()]
    tops = [m.rpartition(".")[2] for m in (*VOCABULARY, *PUBLIC[1:])]
    inside = [p.stem for room in ("core", "system", "store", "delivery", "usecases", "hooks",
                                  "sdk", "model")
              for p in sorted((SRC / "waypost" / room).glob("*.py")) if p.stem != "__init__"]
    assert [n for n in folders + tops if n not in text] == []
    assert [n for n in inside if not re.search(rf"\b{n}\b", text)] == []


def test_imports_run_down_the_layers() -> None:
    assert wrong_way(edges()) == []


def test_no_import_cycles() -> None:
    assert cycles(edges()) == []


def test_the_core_does_no_io() -> None:
    """No core module imports an I/O module (nor calls `open`)."""
    found = []
    for module, path in modules().items():
        if layer(module) != "core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{module} imports {n}" for n in names if n.split(".")[0] in IO_MODULES]
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "open"):
                found.append(f"{module} calls open(), line {node.lineno}")
    assert found == []


@pytest.mark.parametrize(("edge", "expected"), [
    (("waypost.core.machine", "waypost.store.base", 7),
     "waypost.core.machine (core) imports waypost.store.base (store), line 7"),
    (("waypost.delivery.relay", "waypost.usecases.runs", 3),
     "waypost.delivery.relay (delivery) imports waypost.usecases.runs (use cases), line 3"),
    (("waypost.usecases.runs", "waypost.hooks.decide", 5),
     "waypost.usecases.runs (use cases) imports waypost.hooks.decide (hooks), line 5"),
    (("waypost.cli.hot", "waypost.watchdog", 2),
     "waypost.cli.hot (adapters) imports waypost.watchdog (public), line 2"),
    (("waypost.model", "waypost.core.due", 1),
     "waypost.model (vocabulary) imports waypost.core.due (core), line 1"),
    (("waypost.cli.hot", "waypost.mcp.server", 9),
     "adapter waypost.cli.hot imports adapter waypost.mcp.server, line 9"),
])
def test_a_wrong_way_import_is_named(edge: Edge, expected: str) -> None:
    assert wrong_way([edge]) == [expected]


def test_an_import_cycle_is_named() -> None:
    made = [("waypost.usecases.runs", "waypost.usecases.checks", 1),
            ("waypost.usecases.checks", "waypost.usecases.evidence", 2),
            ("waypost.usecases.evidence", "waypost.usecases.runs", 3),
            ("waypost.usecases.runs", "waypost.model", 4)]
    assert cycles(made) == [["waypost.usecases.checks", "waypost.usecases.evidence",
                             "waypost.usecases.runs"]]


def test_a_function_level_import_counts(tmp_path: Path) -> None:
    """A lazy import is an edge like any other, relative imports included."""
    package = tmp_path / "waypost" / "core"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "rules.py").write_text("def f():\n    from waypost.store import base\n"
                                      "    from ..cli import hot\n")
    (tmp_path / "other.py").write_text("")
    found = {"waypost.core": package / "__init__.py", "waypost.core.rules": package / "rules.py",
             "waypost.store.base": tmp_path / "other.py", "waypost.cli.hot": tmp_path / "other.py"}
    assert [(a, b) for a, b, _ in edges(found)] == [("waypost.core.rules", "waypost.store.base"),
                                                    ("waypost.core.rules", "waypost.cli.hot")]
