"""Write docs/cli.md from every command's ``--help``, so the flag reference cannot go stale.

    python tools/gen_cli_docs.py            # rewrite docs/cli.md
    python tools/gen_cli_docs.py --check    # exit 1 if docs/cli.md differs from --help (make lint)

Each command's help is rendered in a fresh interpreter at a fixed width with colour off, so the file is the
same on every machine (simonw/llm checks its docs/help.md the same way).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "cli.md"
WIDTH = "100"
HEADER = """# Command reference

Generated from each command's `--help` by `python tools/gen_cli_docs.py` (`make docs`); `make lint` fails when
it is out of date. The manual is the [README](../README.md); the long form is [usage.md](usage.md).
"""


def _help(args: list[str]) -> str:
    env = {
        **os.environ,
        "COLUMNS": WIDTH,
        "LINES": "50",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "_TYPER_FORCE_DISABLE_TERMINAL": "1",
        "PYTHONPATH": str(ROOT),
    }
    for key in [k for k in env if k.startswith("GRPO_")] + ["FORCE_COLOR"]:
        env.pop(key, None)
    out = subprocess.run(
        [sys.executable, "-m", "cli", *args, "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=True,
    ).stdout
    out = out.replace("python -m cli", "grpo")
    lines = [line.rstrip() for line in out.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _commands(top: str) -> list[str]:
    """The command names in the top-level help's Commands panel, in its order."""
    names: list[str] = []
    inside = False
    for line in top.splitlines():
        if "Commands" in line and line.lstrip().startswith(("╭", "+")):
            inside = True
            continue
        if inside:
            match = re.match(r"^[│|]\s([a-z][a-z0-9-]*)\s", line)
            if match:
                names.append(match.group(1))
            elif line.lstrip().startswith(("╰", "+")):
                break
    return names


def render() -> str:
    top = _help([])
    parts = [HEADER, "## grpo\n", "```\n" + top + "\n```\n"]
    for name in _commands(top):
        parts.append(f"## grpo {name}\n")
        parts.append("```\n" + _help([name]) + "\n```\n")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if docs/cli.md is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print("docs/cli.md is out of date: run `make docs` (python tools/gen_cli_docs.py)")
            return 1
        print("docs/cli.md is up to date")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
