"""Structure check of `cli/` (docs/history.md "Structure"), run by `make lint`:

- no function longer than MAX_FUNCTION lines, and none taking more than MAX_PARAMS parameters (a split that
  leaves many parameters behind wants its shared state named: a dataclass);
- no file longer than MAX_FILE lines unless its docstring says why, in a line starting ``Long because:``;
- no import cycle between `cli` modules (every import counts, also those inside functions: a cycle
  through a function-level import is still two modules that need each other);
- the packages of `cli/` in layers (LAYERS, lowest first): a module imports only from its own layer's
  package or from lower ones, so the house reads top-down (commands over the stages over the run
  directory and the config), with no arrow back up;
- every package says in its ``__init__`` docstring what it owns.

    python3 tools/check_structure.py            # exit 1 and one line per problem
    python3 tools/check_structure.py --report   # also the longest files and functions
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "cli"
MAX_FUNCTION = 80
MAX_PARAMS = 8
MAX_FILE = 400
REASON = "Long because:"

# The layers of cli/, lowest first. A root module (cli/common.py, cli/errors.py, cli/main.py) is its own room.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("compat",),  # cli/compat.py: the library internals grpo relies on; it imports nothing of cli
    ("common",),
    ("tools",),
    ("config",),
    ("run",),
    ("models", "prep"),
    ("infer",),
    ("eval",),
    ("export", "train"),
    ("errors",),
    ("commands",),
    ("main",),
    ("__main__",),
)

# What is still over the limits when this check was written (docs/history.md "Structure"): each may not grow,
# and leaves
# this list when it is split. A new function or file over the limits fails the check.
KNOWN: dict[str, int] = {
    # functions (path:name) -> lines now
    # files: none; a file over MAX_FILE says why in its docstring (REASON)
}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(name: str, path: Path, tree: ast.AST, known: dict[str, Path]) -> set[str]:
    """The `cli` modules that module ``name`` imports (``from cli import x`` counts as ``cli.x``)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t != PACKAGE:
                found.add(t)
    return found


def room(name: str) -> str:
    """The package (or root module) of ``cli.a.b``: ``a``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def layer(name: str) -> int | None:
    r = room(name)
    return next((i for i, rooms in enumerate(LAYERS) if r in rooms), None)


def layering(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run back up (to a higher layer), or between two packages of one layer."""
    out = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            la, lb = layer(a), layer(b)
            if room(a) == room(b) or la is None or lb is None:
                continue
            if lb >= la:
                out.append(
                    f"{a} imports {b}: {room(b)}/ is not below {room(a)}/ (tools/check_structure.py LAYERS)"
                )
    out += [
        f"{m}: cli/{room(m)} is in no layer (tools/check_structure.py LAYERS)"
        for m in graph
        if layer(m) is None and m != PACKAGE
    ]
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(argv: list[str]) -> int:
    known = modules()
    problems: list[str] = []
    graph: dict[str, set[str]] = {}
    functions: list[tuple[int, str]] = []
    sizes: list[tuple[int, str]] = []
    for name, path in known.items():
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, str(path))
        rel = path.relative_to(ROOT)
        graph[name] = imported(name, path, tree, known)
        lines = len(text.splitlines())
        sizes.append((lines, str(rel)))
        doc = ast.get_docstring(tree) or ""
        if lines > MAX_FILE and REASON not in doc and lines > KNOWN.get(str(rel), 0):
            problems.append(f"{rel}: {lines} lines (> {MAX_FILE}) and no '{REASON}' line in its docstring")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((n, f"{rel}:{node.lineno} {node.name}"))
                if n > MAX_FUNCTION and n > KNOWN.get(f"{rel}:{node.name}", 0):
                    problems.append(
                        f"{rel}:{node.lineno}: function {node.name} is {n} lines (> {MAX_FUNCTION})"
                    )
                a = node.args
                params = [
                    x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")
                ]
                if len(params) > MAX_PARAMS:
                    problems.append(
                        f"{rel}:{node.lineno}: function {node.name} takes {len(params)} parameters "
                        f"(> {MAX_PARAMS}): name their shared state (a dataclass)"
                    )
    for cycle in cycles(graph):
        problems.append(f"import cycle: {' <-> '.join(cycle)}")
    problems += layering(graph)
    for init in sorted((ROOT / PACKAGE).rglob("__init__.py")):
        if "data" in init.relative_to(ROOT).parts:
            continue
        if not (ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or "").strip():
            problems.append(f"{init.relative_to(ROOT)}: no docstring saying what the package owns")
    if "--report" in argv:
        print("largest files:")
        for n, what in sorted(sizes, reverse=True)[:10]:
            print(f"  {n:5d}  {what}")
        print("longest functions:")
        for n, what in sorted(functions, reverse=True)[:10]:
            print(f"  {n:5d}  {what}")
    if "--report" in argv:
        print(f"known, allowed not to grow ({len(KNOWN)}): {', '.join(KNOWN)}")
    for p in problems:
        print(p)
    print(f"check_structure: {len(known)} modules, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
