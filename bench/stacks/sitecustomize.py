"""Where a GPU bench run's time goes when it looks stuck: every Python process started with this folder on
PYTHONPATH and ``GRPO_STACKS_DIR`` set writes all its threads' stacks to ``<dir>/<pid>.txt`` every
``GRPO_STACKS_EVERY`` seconds (faulthandler; no py-spy on the GPU image). bench/h200_vllm_run.sh and
bench/h200_qwen_coder.sh set both from ``STACKS=SECONDS``."""

import faulthandler
import os

_dir = os.environ.get("GRPO_STACKS_DIR")
if _dir:
    os.makedirs(_dir, exist_ok=True)
    _file = open(os.path.join(_dir, f"{os.getpid()}.txt"), "a")  # noqa: SIM115 - open for the process's life
    faulthandler.dump_traceback_later(int(os.environ.get("GRPO_STACKS_EVERY", "60")), repeat=True, file=_file)
