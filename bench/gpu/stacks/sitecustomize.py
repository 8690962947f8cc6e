"""Where a GPU bench run's time goes when it looks stuck: every Python process started with this folder on
PYTHONPATH and ``GRPO_STACKS_DIR`` set appends all its threads' stacks to ``<dir>/<pid>.txt`` every
``GRPO_STACKS_EVERY`` seconds, most recent call first (no py-spy on the GPU image).
``python3 bench/gpu/stacks/last_dump.py DIR`` prints each process's latest dump without the idle threads.
bench/gpu/h200_vllm_run.sh and bench/gpu/h200_qwen_coder.sh set both from ``STACKS=SECONDS``.

A daemon thread reads ``sys._current_frames()`` under the GIL. faulthandler's ``dump_traceback_later``
(the first version of this file) walks other threads' frames without it: on the H200 both runs it
watched died of a segmentation fault after 80 s, mid-dump (2026-12-01, bench/learning-gpu.md@ea4c471 round 7).
A thread that holds the GIL for long delays the dump instead, which is a finding too.
"""

import os
import sys
import threading
import time
import traceback

_dir = os.environ.get("GRPO_STACKS_DIR")


def _dump(path: str) -> None:
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    lines = [f"Timeout ({time.strftime('%H:%M:%S')})!"]
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        lines.append(f"Thread 0x{ident:016x} ({names.get(ident, '?')}, most recent call first):")
        for f in reversed(traceback.extract_stack(frame)):
            lines.append(f'  File "{f.filename}", line {f.lineno} in {f.name}')
        lines.append("")
    with open(path, "a") as out:
        out.write("\n".join(lines) + "\n")


def _watch(path: str, every: float) -> None:
    while True:
        time.sleep(every)
        try:
            _dump(path)
        except Exception:  # noqa: BLE001, S112 - a failed dump must never stop the run it watches
            continue


if _dir:
    os.makedirs(_dir, exist_ok=True)
    _every = float(os.environ.get("GRPO_STACKS_EVERY", "60"))
    _path = os.path.join(_dir, f"{os.getpid()}.txt")
    threading.Thread(target=_watch, args=(_path, _every), name="grpo-stacks", daemon=True).start()
