"""`make lint`: every bench script imports, and uses only what a `cli` package exports.

    python tools/check_bench.py

Bench scripts run outside the test suite, often on a rented GPU, so a rename inside `cli/` would otherwise
break them silently. Two checks:

1. Every ``from cli... import ...`` in ``bench/**/*.py`` (at any depth of the file, lazy imports included)
   names a package of `cli/` (``cli.train``, not ``cli.train.profile``) and only names in that package's
   ``__all__``; each name is resolved for real (the submodule behind it is imported).
2. Every bench script is imported as a module (its top level runs, its ``main`` does not: each script keeps it
   behind ``if __name__ == "__main__"``).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def cli_imports(path: Path) -> list[str]:
    """Problems with the `cli` imports of one script."""
    problems: list[str] = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "cli" or alias.name.startswith("cli."):
                    where = f"{rel}:{node.lineno}"
                    problems.append(f"{where}: `import {alias.name}`: use `from cli.PKG import NAME`")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "cli":
            problems += _from_import(rel, node)
    return problems


def _from_import(rel: Path, node: ast.ImportFrom) -> list[str]:
    parts = (node.module or "").split(".")
    where = f"{rel}:{node.lineno}"
    if len(parts) != 2:
        package = ".".join(parts[:2])
        return [f"{where}: `from {node.module} import …`: import from the package (`from {package} …`)"]
    try:
        package = importlib.import_module(node.module or "")
    except ImportError as exc:
        return [f"{where}: `{node.module}` does not import: {exc}"]
    exported = set(getattr(package, "__all__", ()))
    problems = []
    for alias in node.names:
        if alias.name not in exported:
            problems.append(f"{where}: {node.module} does not export {alias.name!r} (its __all__)")
            continue
        try:
            getattr(package, alias.name)
        except (AttributeError, ImportError) as exc:
            problems.append(f"{where}: {node.module}.{alias.name} does not resolve: {exc}")
    return problems


def imports_cleanly(path: Path) -> str | None:
    """Import one script as a module (not as __main__); a problem line, or None."""
    name = "bench_check_" + "_".join(path.relative_to(BENCH).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return f"{path.relative_to(ROOT)}: cannot be loaded as a module"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    argv = sys.argv[:]
    sys.argv = [str(path)]
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        return f"{path.relative_to(ROOT)}: exits at import ({exc.code}); keep its work behind __main__"
    except Exception as exc:  # noqa: BLE001 - any failure at import is the finding
        return f"{path.relative_to(ROOT)}: fails at import: {type(exc).__name__}: {exc}"
    finally:
        sys.argv = argv
    return None


def main() -> int:
    sys.path.insert(0, str(ROOT))
    scripts = sorted(BENCH.rglob("*.py"))
    problems: list[str] = []
    for path in scripts:
        problems += cli_imports(path)
        problem = imports_cleanly(path)
        if problem:
            problems.append(problem)
    for line in problems:
        print(line)
    if problems:
        return 1
    print(f"bench: {len(scripts)} scripts import, and use only what cli's packages export")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
