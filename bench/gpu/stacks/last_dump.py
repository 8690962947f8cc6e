"""The latest stack dump of each process under a GRPO_STACKS_DIR, without the threads that only wait: per
thread the FRAMES innermost frames (where it is) and the FRAMES outermost (who called it).

Usage: python3 bench/gpu/stacks/last_dump.py DIR [FRAMES=12]
"""

import re
import sys
from pathlib import Path

IDLE = re.compile(r"threading\.py.*in (wait|_wait_for_tstate_lock)|selectors\.py|queue\.py.*in get|in _recv")


def last_dump(text: str) -> str:
    parts = [p for p in re.split(r"^Timeout \([0-9:]+\)!\n", text, flags=re.M) if 'File "' in p]
    return parts[-1] if parts else ""


def busy_threads(dump: str, frames: int) -> list[str]:
    out = []
    for block in re.split(r"\n(?=(?:Thread|Current thread) 0x)", dump.strip()):
        lines = block.strip().splitlines()
        if len(lines) < 2:
            continue
        if IDLE.search(lines[1]):
            continue
        body = lines[1:]
        if len(body) > 2 * frames:  # the innermost frames (where it is) and the outermost (who called)
            body = [*body[:frames], f"  … {len(body) - 2 * frames} frames …", *body[-frames:]]
        out.append("\n".join([lines[0], *body]))
    return out


def main() -> None:
    root = Path(sys.argv[1])
    frames = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    for f in sorted(root.glob("*.txt"), key=lambda p: p.stat().st_size, reverse=True):
        text = f.read_text(errors="replace")
        dumps = text.count("Timeout (")
        threads = busy_threads(last_dump(text), frames)
        if not threads:
            continue
        print(f"== pid {f.stem}: {dumps} dumps, {len(threads)} busy threads")
        for t in threads:
            print(t)


if __name__ == "__main__":
    main()
