"""The verifier audit during GRPO (``grpo.audit_every: N``): is the reward judging answers right?

Rewards fail silently: in verl PR #5635 a timeout raised inside workers and a broad ``except`` made every
MATH score 0, and Math-Verify PR #81 shows mixed numbers matching the wrong gold. So every Nth rollout batch,
a sample of ``grpo.audit_sample`` completions is re-judged by an independent verifier, Math-Verify (the
``math-verify`` package), and compared with the training verifier's verdict (the seed rule that `grpo eval`
calls correct: :func:`cli.eval.scoring.score`).

Math-Verify runs in a child process (``python -m cli.train.audit``: JSON lines in and out, its own
per-answer timeouts), fed and read by two daemon threads through a bounded queue: a training step only
samples, scores the sample with the Rust core and hands it over (no wait; a full queue skips the batch).
Results go to ``logs/audit.jsonl`` (per audited batch: the agreement, the disagreeing pairs, capped) and the
running agreement to the metrics rows (``audit_agreement``) and the live line. One warning line each:

- the running agreement falls below ``grpo.audit_min_agreement`` (after 20 judged answers);
- every correctness verdict of a batch is the same for ``grpo.audit_constant_batches`` batches in a row
  (all 0 is the verl #5635 failure; all 1 a reward that passes everything);
- the audit process dies (training goes on without it).

Math-Verify is called as docs/design-facts.md says: ``verify(parse("$" + gold + "$"), parse("$" + pred +
"$"))`` on the marked answer (:func:`py_rewards.extract_math_answer`).
"""

from __future__ import annotations

import functools
import json
import queue
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

MIN_JUDGED = 20  # answers judged before a low agreement is warned about
MAX_PAIRS = 8  # disagreeing pairs kept per audited batch in logs/audit.jsonl
TEXT_CAP = 400  # characters of a completion kept with a disagreeing pair
VERIFY_TIMEOUT = 5  # seconds Math-Verify may spend parsing or comparing one answer (its own timeouts)


def _text(completion: Any) -> str:
    """A TRL completion (a string, or a list of chat messages) as text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


class Auditor:
    """Samples rollout batches, hands them to the audit process, collects and reports its verdicts."""

    def __init__(
        self, spec: Any, logs_dir: Path, cfg: Any, seed: int = 0, warn: Callable[[str], None] | None = None
    ) -> None:
        self.spec, self.path = spec, logs_dir / "audit.jsonl"
        self.every, self.sample = int(cfg.audit_every), int(cfg.audit_sample)
        self.threshold, self.constant_k = float(cfg.audit_min_agreement), int(cfg.audit_constant_batches)
        self.rng = random.Random(seed)
        self.warn = warn or _warn
        self.batches = self.constant_streak = 0
        self.last_constant: bool | None = None
        self.judged = self.agreed = self.window_judged = self.window_agreed = 0
        self.warned: set[str] = set()
        self.outbox: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=4)
        self.results: queue.Queue[dict[str, Any]] = queue.Queue()
        self.skipped = 0
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self.observe_seconds = 0.0  # time spent in the training thread (the overhead of a step)
        self._acc: Callable[..., Any] | None = None

    # ---- the child process -------------------------------------------------------------------
    def start(self) -> Auditor:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.train.audit"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )  # fmt: skip
        threading.Thread(target=self._feed, daemon=True, name="audit-feed").start()
        self._reader = threading.Thread(target=self._read, daemon=True, name="audit-read")
        self._reader.start()
        return self

    def _feed(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        while (job := self.outbox.get()) is not None:
            try:
                self.proc.stdin.write(json.dumps(job) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return  # the process is gone: observe() says so
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                try:
                    self.results.put(json.loads(line))
                except ValueError:
                    continue
        except (OSError, ValueError):  # closed by close() after its wait
            return

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # ---- the training side -------------------------------------------------------------------
    def hook(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` (a TRL reward callable) that also lets the auditor see each batch it scores."""

        @functools.wraps(func)
        def audited(*args: Any, **kwargs: Any) -> Any:
            out = func(*args, **kwargs)
            try:
                self.observe(
                    kwargs.get("completions", args[1] if len(args) > 1 else []), kwargs.get("answer")
                )
            except Exception as exc:  # noqa: BLE001 - the audit must never stop training
                self._once("error", f"the verifier audit stopped looking ({type(exc).__name__}: {exc})")
            return out

        return audited

    def observe(self, completions: Any, answers: Any) -> None:
        """One rollout batch: the constant-verdict check on all of it, an audit sample every Nth batch."""
        from cli.eval import scoring

        start = time.perf_counter()
        self.collect()
        texts = [_text(c) for c in completions or []]
        golds = [str(a) for a in answers or []]
        if not texts or len(golds) != len(texts):
            return
        self.batches += 1
        if self._acc is None:  # the answer reward, bound once (the same Rust scorer training used)
            self._acc = scoring.reward_functions(self.spec)[1]
        msgs = [[{"role": "assistant", "content": t}] for t in texts]
        acc = [float(x) for x in self._acc(prompts=[""] * len(texts), completions=msgs, answer=golds)]
        correct = scoring.seed_verdicts(self.spec, texts, golds, acc)
        self._constant(correct)
        if self.batches % self.every == 0:
            self._submit(texts, golds, correct)
        self.observe_seconds += time.perf_counter() - start

    def _constant(self, correct: list[bool]) -> None:
        same = correct[0] if all(c == correct[0] for c in correct) else None
        if same is None:
            self.constant_streak = 0
        else:
            self.constant_streak = self.constant_streak + 1 if same == self.last_constant else 1
        self.last_constant = same
        if same is not None and self.constant_streak >= self.constant_k:
            what = "wrong (0)" if not same else "right (1)"
            self._once(
                f"constant-{same}",
                f"every correctness verdict was {what} in {self.constant_streak} rollout batches in a row: "
                "check that the reward can read the answers (all 0: a reward that times out or raises inside "
                "a broad except scores everything 0, verl #5635; all 1: a reward that passes everything), "
                "and the gold answer column",
            )

    def _submit(self, texts: list[str], golds: list[str], correct: list[bool]) -> None:
        from py_rewards import extract_math_answer

        if not self.alive():
            code = self.proc.returncode if self.proc is not None else None
            self._once("died", f"the verifier audit process died (exit code {code}); training goes on "
                       "without it: check that math-verify is installed")  # fmt: skip
            return
        picked = self.rng.sample(range(len(texts)), min(self.sample, len(texts)))
        pairs = []
        for i in picked:
            pred = extract_math_answer(texts[i], self.spec.solution_start, self.spec.solution_end)
            pairs.append(
                {"gold": golds[i], "pred": pred, "train": bool(correct[i]), "text": texts[i][-TEXT_CAP:]}
            )
        try:
            self.outbox.put_nowait({"batch": self.batches, "pairs": pairs})
        except queue.Full:
            self.skipped += 1  # the audit is behind: this batch goes unaudited rather than wait

    def collect(self) -> None:
        """Write the verdicts that came back to logs/audit.jsonl; warn on a low agreement."""
        rows = []
        while True:
            try:
                rows.append(self.results.get_nowait())
            except queue.Empty:
                break
        for row in rows:
            if "error" in row:
                self._once("died", f"the verifier audit could not start: {row['error']}; training goes on "
                           "without it")  # fmt: skip
                continue
            self.judged += row["n"]
            self.agreed += row["agree"]
            self.window_judged += row["n"]
            self.window_agreed += row["agree"]
            row["running_agreement"] = round(self.agreed / self.judged, 4) if self.judged else None
        if rows:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        if self.judged >= MIN_JUDGED and self.agreed / self.judged < self.threshold:
            self._once(
                "low",
                f"the verifier audit (Math-Verify) agrees with the training verifier on only "
                f"{self.agreed / self.judged:.0%} of {self.judged} answers (grpo.audit_min_agreement "
                f"{self.threshold:g}): read the disagreeing pairs in {self.path} — a gold answer column in "
                "another form, answers the reward cannot parse, or a reward that passes wrong answers",
            )

    def take(self) -> dict[str, Any]:
        """The metrics row's audit figures since the last log step (and the running rate)."""
        self.collect()
        row: dict[str, Any] = {
            "audit_agreement": round(self.agreed / self.judged, 4) if self.judged else None,
            "audit_judged": self.judged,
        }
        self.window_judged = self.window_agreed = 0
        return row

    def close(self, wait: float = 10.0) -> None:
        """Let the process finish what it was given (up to ``wait`` s), collect, stop it."""
        if self.proc is None:
            return
        try:
            self.outbox.put(None, timeout=1)
        except queue.Full:
            pass
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=2)  # the process has ended: its last lines, then end of file
        self.collect()
        for pipe in (self.proc.stdin, self.proc.stdout):  # not left to the garbage collector
            if pipe is not None:
                try:
                    pipe.close()
                except (OSError, ValueError):
                    pass

    def _once(self, key: str, text: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            self.warn(text)


def _warn(text: str) -> None:
    from cli.run.console import err_console

    err_console.print(f"[yellow]warning:[/] {text}", soft_wrap=True)


# ---- the audit process ------------------------------------------------------------------------
def judge(gold: str, pred: str | None, verify: Any, parse: Any) -> bool:
    """Math-Verify's verdict on one answer (False when there is none, or on its own timeout/error)."""
    if pred is None or not pred.strip():
        return False
    try:
        g = parse("$" + gold + "$", parsing_timeout=VERIFY_TIMEOUT)
        p = parse("$" + pred + "$", parsing_timeout=VERIFY_TIMEOUT)
        return bool(verify(g, p, timeout_seconds=VERIFY_TIMEOUT))
    except Exception:  # noqa: BLE001 - Math-Verify's own failures are a False verdict
        return False


def serve(inbox: IO[str], outbox: IO[str]) -> int:
    """The child: one JSON line per audited batch in, one verdict line out."""
    try:
        from math_verify import parse, verify
    except ImportError as exc:
        outbox.write(json.dumps({"error": f"math-verify is not installed ({exc})"}) + "\n")
        outbox.flush()
        return 1
    for line in inbox:
        job = json.loads(line)
        t0 = time.perf_counter()
        agree, disagree = 0, list[dict[str, Any]]()
        for pair in job["pairs"]:
            ref = judge(pair["gold"], pair["pred"], verify, parse)
            if ref == pair["train"]:
                agree += 1
            elif len(disagree) < MAX_PAIRS:
                disagree.append({**pair, "math_verify": ref})
        n = len(job["pairs"])
        row = {"batch": job["batch"], "n": n, "agree": agree, "agreement": round(agree / n, 4) if n else None,
               "seconds": round(time.perf_counter() - t0, 3), "disagreements": disagree}  # fmt: skip
        outbox.write(json.dumps(row, ensure_ascii=False) + "\n")
        outbox.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.stdin, sys.stdout))
