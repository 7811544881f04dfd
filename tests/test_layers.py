"""The package tree keeps the layer order written in docs/ARCHITECTURE.md: imports (lazy ones
too) only run down, peers on one row never import each other, no module imports itself back
through others, no file is named with the prefix of a folder beside it, and nothing in src/ is
imported by tests alone."""

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
ORDER_MARK = "<!-- layer order, read by tests/test_layers.py -->"
SEAMS_MARK = "<!-- seams, read by tests/test_layers.py -->"
# Run by path or as a program, not imported: the CLI's `python -m posttrain`, the code suite's
# recorder (copied into generated tasks). schedule/pool.py waits for eval/rl to use it (issue 29).
NOT_IMPORTED = {"posttrain.__main__", "posttrain.tasks.suites.code.record", "posttrain.schedule.pool"}


def module_files(src: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under src (a package is its __init__)."""
    out = {}
    for path in sorted(src.rglob("*.py")):
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def imports_of(path: Path, modules: dict) -> set[str]:
    """The project modules a file imports anywhere in it; `from pkg import sub` counts as sub."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
            found.update(subs or {node.module})
            if len(subs) < len(node.names):
                found.add(node.module)
    return found


def import_graph(src: Path) -> dict[str, set[str]]:
    modules = module_files(src)
    return {name: imports_of(path, modules) - {name} for name, path in modules.items()}


def read_orders(text: str) -> dict[str, list[list[str]]]:
    """`scope: a, b > c > d` lines of the marked block -> {scope: [[a, b], [c], [d]]}."""
    block = text.split(ORDER_MARK, 1)[1].split("```")[1]
    orders = {}
    for line in block.strip().splitlines():
        scope, _, rows = line.partition(":")
        orders[scope.strip()] = [[n.strip() for n in row.split(",")] for row in rows.split(">")]
    return orders


def unit_of(module: str, scope: str) -> str | None:
    """The part of `module` right below `scope` (posttrain.engine.paged.x in posttrain.engine -> paged)."""
    if not module.startswith(scope + "."):
        return None
    return module[len(scope) + 1:].split(".")[0]


def order_violations(graph: dict, scope: str, rows: list[list[str]]) -> list[str]:
    """Every import inside scope that runs up a row or across one; a unit on no row is one too."""
    rank = {unit: i for i, row in enumerate(rows) for unit in row}
    bad = []
    for module, targets in sorted(graph.items()):
        unit = unit_of(module, scope)
        if unit is None:
            continue
        if unit not in rank:
            bad.append(f"{module}: {unit} is on no row of {scope}'s layer order")
            continue
        for target in sorted(targets):
            other = unit_of(target, scope)
            if other is not None and other != unit and rank.get(other, -1) <= rank[unit]:
                bad.append(f"{module} imports {target} ({other} is not below {unit})")
    return bad


def cycles(graph: dict) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def code_strings(path: Path) -> list[str]:
    """The string constants of a file, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


@pytest.fixture(scope="module")
def graph():
    return import_graph(SRC)


def test_imports_keep_the_documented_layer_order(graph):
    orders = read_orders((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert "posttrain" in orders
    bad = [v for scope, rows in orders.items() for v in order_violations(graph, scope, rows)]
    assert not bad, "\n".join(bad)


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_the_checks_catch_a_back_arrow_and_a_cycle(tmp_path):
    pkg = tmp_path / "posttrain"
    for name, body in {"__init__": "", "low": "from posttrain import high\n",
                       "high": "import posttrain.low\n", "peer": "def f():\n    import posttrain.other\n",
                       "other": ""}.items():
        pkg.mkdir(exist_ok=True)
        (pkg / f"{name}.py").write_text(body)
    g = import_graph(tmp_path)
    rows = [["high"], ["peer", "other"], ["low"]]
    assert order_violations(g, "posttrain", rows) == [
        "posttrain.low imports posttrain.high (high is not below low)",
        "posttrain.peer imports posttrain.other (other is not below peer)"]
    assert "posttrain.other: other is on no row of posttrain's layer order" in order_violations(
        g, "posttrain", [["high"], ["low"]])
    assert cycles(g) == [["posttrain.high", "posttrain.low"]]


def test_no_file_is_named_with_the_prefix_of_a_folder_beside_it():
    bad = [str(p.relative_to(SRC)) for p in SRC.rglob("[!_]*_*.py")
           if (p.parent / p.name.split("_")[0]).is_dir()]
    assert bad == []


def test_every_module_is_imported_by_the_project_itself(graph):
    """A module only tests import is dead code (or a feature nothing reaches)."""
    used = set().union(*graph.values())
    for path in module_files(SRC).values():  # modules named in strings: importlib, -m, extensions
        used.update(*(re.findall(r"posttrain(?:\.\w+)+", s) for s in code_strings(path)))
    reached = {".".join(m.split(".")[:i]) for m in used for i in range(1, m.count(".") + 2)}
    assert sorted(set(graph) - reached - NOT_IMPORTED - {"posttrain"}) == []


def test_each_seam_is_chosen_where_architecture_says():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").split(SEAMS_MARK, 1)[1]
    rows = [line.split("|")[1:-1] for line in text.strip().split("\n\n", 1)[0].splitlines()[2:]]
    assert len(rows) >= 4
    for _, where, symbol, _ in rows:
        path, _, line = where.strip(" `").partition(":")
        lines = (REPO / path).read_text(encoding="utf-8").splitlines()
        found = [lines[int(line) - 1]] if line else lines
        assert any(symbol.strip(" `") in x for x in found), f"{where}: no {symbol}"
