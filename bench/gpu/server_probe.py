"""Ask a running `grpo serve` (TRL's vLLM server) for greedy completions of fixed prompts, with logprobs.

    python bench/gpu/server_probe.py 127.0.0.1:8000 OUT.json            # before training
    python bench/gpu/server_probe.py 127.0.0.1:8000 OUT2.json --against OUT.json   # after: what changed

Run once before `grpo grpo --vllm-server` and once after: the trainer pushes its LoRA-merged weights to
the server after every optimizer step, so the same greedy request must come back different (tokens or
logprobs) once the weights have moved.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting.",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("server", help="HOST:PORT")
    p.add_argument("out", type=Path)
    p.add_argument("--against", type=Path, help="an earlier probe to compare with")
    args = p.parse_args(argv)
    from trl.generation.vllm_client import VLLMClient

    host, _, port = args.server.rpartition(":")
    client = VLLMClient(base_url=f"http://{host}:{port}", connection_timeout=60)
    res = client.generate(PROMPTS, temperature=0.0, max_tokens=24, logprobs=0)
    probe = {
        "completion_ids": res["completion_ids"],
        "logprobs": [[float(t[0]) for t in seq] for seq in res["logprobs"]],
    }
    args.out.write_text(json.dumps(probe) + "\n")
    if args.against:
        old = json.loads(args.against.read_text())
        same_tokens = old["completion_ids"] == probe["completion_ids"]
        diffs = [
            abs(a - b)
            for s_old, s_new in zip(old["logprobs"], probe["logprobs"], strict=False)
            for a, b in zip(s_old, s_new, strict=False)
        ]
        print(
            json.dumps(
                {
                    "same_tokens": same_tokens,
                    "max_abs_logprob_change": max(diffs) if diffs else None,
                    "mean_abs_logprob_change": sum(diffs) / len(diffs) if diffs else None,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
