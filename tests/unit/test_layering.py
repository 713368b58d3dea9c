"""The layering docs/architecture.md draws: nothing above ``store/`` holds SQL.

Every statement on the truth tables and the derived indexes lives in ``core/store/`` (and the benchmarks in
``core/bench/`` measure other systems' SQL too); the other layers call repository functions. The test walks every
module of the engine outside those two folders with :mod:`ast` and fails on a call of ``execute`` /
``executemany`` / ``executescript`` and on a string that is a SQL statement.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"
SQL_HOMES = ("store", "bench")
"""Folders of ``core/`` where SQL belongs."""
ALLOWED: set[str] = set()
"""Modules outside store/ and bench/ that may still hold SQL (none: keep it empty)."""
EXECUTE = {"execute", "executemany", "executescript"}
STATEMENT = re.compile(
    r"^(select\b[\s\S]*\bfrom\b|insert\s+(or\s+\w+\s+)?into\b|update\s+\w+\s+set\b|delete\s+from\b"
    r"|create\s+(table|index|unique\s+index|virtual\s+table|trigger|view|schema)\b|drop\s+(table|index|schema)\b)",
    re.IGNORECASE)
"""The opening of a SQL statement (SELECT … FROM, INSERT INTO, UPDATE … SET, DELETE FROM, CREATE/DROP …)."""


def _modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if p.relative_to(CORE).parts[0] not in SQL_HOMES)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose about SQL is allowed)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with each replacement field as ``x``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def sql_in(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every ``execute``-family call and SQL statement string in a module's source."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    inside_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXECUTE:
            found.append((node.lineno, f".{node.func.attr}(...)"))
        elif id(node) not in docs and id(node) not in inside_fstring:
            text = _text(node)
            if text is not None and STATEMENT.match(text.strip()):
                found.append((getattr(node, "lineno", 0), repr(text.strip()[:60])))
    return sorted(found)


def test_the_detector_sees_statements_and_calls_but_not_prose() -> None:
    source = '''
"""Select the rows from the table (a docstring: prose)."""
conn.execute("SELECT id FROM turns WHERE ns_id=?", (1,))
q = f"update files SET title=? WHERE fid={fid}"
s = "DELETE FROM claims"
message = "delete the memory, then select another"
'''
    found = sql_in(source)
    assert [line for line, _ in found] == [3, 3, 4, 5]


def test_no_sql_outside_store_and_bench() -> None:
    offenders = []
    for path in _modules():
        rel = path.relative_to(CORE).as_posix()
        if rel in ALLOWED:
            continue
        offenders += [f"core/{rel}:{line}: {what}" for line, what in sql_in(path.read_text(encoding="utf-8"))]
    assert not offenders, "SQL outside core/store/ (move it into a store module):\n" + "\n".join(offenders)


def test_the_allow_list_holds_only_modules_with_sql() -> None:
    for rel in ALLOWED:
        source = (CORE / rel).read_text(encoding="utf-8")
        assert sql_in(source), f"core/{rel} holds no SQL any more: drop it from ALLOWED"


# -- the truth-store seam: code above store/ types against memory_ext.store.interface ---------------------------
BACKEND_NAMERS = {"assembly.py", "cli.py"}
"""Modules outside store/ that may name a backend package: assembly builds the store; the CLI's ``postgres``
and ``migrate`` commands address one backend by name."""
DRIVER_USERS = ("bench/",)
"""Where ``sqlite3`` may be imported outside store/: the benchmarks measure SQLite on its own."""


def _imports(source: str, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in a module of ``package`` (dotted, under memory_ext), resolved to an
    absolute module name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out += [(node.lineno, f"{name}.{a.name}") for a in node.names]
    return out


def _package(path: Path) -> str:
    """The package a module's relative imports start from."""
    return ".".join(["memory_ext", *path.relative_to(CORE).parent.parts])


def test_the_import_resolver() -> None:
    found = _imports("from ..sqlite import TruthStore\nfrom . import truth\nimport sqlite3\n", "memory_ext.store.pg")
    assert [m for _, m in found] == ["memory_ext.store.sqlite.TruthStore", "memory_ext.store.pg.truth", "sqlite3"]


def test_only_assembly_names_a_backend() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        if rel.startswith("store/") or rel in BACKEND_NAMERS:
            continue
        for line, module in _imports(path.read_text(encoding="utf-8"), _package(path)):
            if module.startswith(("memory_ext.store.sqlite.", "memory_ext.store.pg.")) and \
                    not (rel.startswith("bench/") and module.startswith("memory_ext.store.pg.server.")):
                offenders.append(f"core/{rel}:{line}: {module}")
    assert not offenders, ("a module above store/ names a backend (type against memory_ext.store.interface; only "
                           "assembly.py builds a backend):\n" + "\n".join(offenders))


def test_no_sqlite3_import_above_store() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        rel = path.relative_to(CORE).as_posix()
        if rel.startswith(("store/", *DRIVER_USERS)):
            continue
        offenders += [f"core/{rel}:{line}" for line, module in _imports(path.read_text(encoding="utf-8"),
                                                                         _package(path))
                      if module == "sqlite3" or module.startswith("sqlite3.")]
    assert not offenders, "sqlite3 imported above store/ (use memory_ext.store.interface):\n" + "\n".join(offenders)


def test_the_postgres_backend_imports_nothing_of_sqlite() -> None:
    offenders = []
    for path in sorted((CORE / "store" / "pg").rglob("*.py")):
        offenders += [f"core/{path.relative_to(CORE).as_posix()}:{line}: {module}"
                      for line, module in _imports(path.read_text(encoding="utf-8"), _package(path))
                      if module == "sqlite3" or module.startswith(("sqlite3.", "memory_ext.store.sqlite."))]
    assert not offenders, "store/pg imports the SQLite backend or sqlite3:\n" + "\n".join(offenders)


# -- module size (issue 23): a module may be long or hold many functions, not both ----------------------------
MAX_LINES = 900
MAX_FUNCTIONS = 20


def size_of(source: str) -> tuple[int, int]:
    """``(lines, functions)`` of a module's source; methods and nested functions count as functions."""
    tree = ast.parse(source)
    return (len(source.splitlines()),
            sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(tree)))


def test_the_size_counter() -> None:
    source = "def a():\n    def b():\n        pass\n\n\nclass C:\n    async def d(self):\n        pass\n"
    assert size_of(source) == (8, 3)


def test_no_module_is_both_long_and_many_functioned() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        lines, functions = size_of(path.read_text(encoding="utf-8"))
        if lines > MAX_LINES and functions > MAX_FUNCTIONS:
            offenders.append(f"core/{path.relative_to(CORE).as_posix()}: {lines} lines, {functions} functions")
    assert not offenders, (f"modules over {MAX_LINES} lines with more than {MAX_FUNCTIONS} functions (split them):\n"
                           + "\n".join(offenders))
