"""cli/config/schema.py: values are coerced to their declared types or refused with the key, before any work.

Hardening, round 1 (docs/history.md): `grpo: {learning_rate: 1e-3}` (YAML 1.1 reads a string), `max_steps:
"two"`, negative rates and `max_steps: -5` were accepted, saved into the run's config.yaml and failed later
(or trained a whole epoch).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import SAMPLES, dry_run, fails_fast, one_line_error

from cli.common import GrpoError
from cli.config.schema import PRESETS, resolve
from cli.main import app


def test_yaml_strings_that_are_numbers_become_numbers(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        "grpo:\n  learning_rate: 1e-3\n  max_steps: '20'\n  gpu_memory_utilization: '0.25'\n"
        "lora:\n  rslora: 'no'\n"
    )
    assert yaml.safe_load(cfg_file.read_text())["grpo"]["learning_rate"] == "1e-3"  # what YAML 1.1 hands us
    cfg = resolve(config_file=cfg_file)
    assert cfg.grpo.learning_rate == 0.001 and cfg.grpo.max_steps == 20
    assert cfg.grpo.gpu_memory_utilization == 0.25 and cfg.lora.rslora is False
    assert resolve().grpo.gpu_memory_utilization == "auto"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"grpo.max_steps": "two"}, "config 'grpo.max_steps': expected a whole number, got 'two'"),
        ({"grpo.max_steps": 2.5}, "config 'grpo.max_steps': expected a whole number, got 2.5"),
        ({"grpo.learning_rate": "fast"}, "config 'grpo.learning_rate': expected a number, got 'fast'"),
        ({"grpo.learning_rate": "nan"}, "config 'grpo.learning_rate': expected a finite number"),
        ({"lora.rslora": "maybe"}, "config 'lora.rslora': expected true or false, got 'maybe'"),
        ({"lora.target_modules": 3}, "config 'lora.target_modules': expected a list, got 3"),
        ({"grpo.max_steps": -5}, "config 'grpo.max_steps' must be at least 1, not -5"),
        ({"grpo.learning_rate": -1e-5}, "config 'grpo.learning_rate' must be positive"),
        ({"grpo.temperature": 0}, "config 'grpo.temperature' must be positive, not 0.0"),
        ({"grpo.min_p": 1.5}, "config 'grpo.min_p' must be in [0, 1]"),
        (
            {"grpo.importance_sampling_level": "seq"},
            "config 'grpo.importance_sampling_level' must be token or sequence",
        ),
        ({"sft.max_steps": 0}, "config 'sft.max_steps' is 0: set sft.epochs"),
        ({"lora.dropout": 1}, "config 'lora.dropout' must be in [0, 1)"),
        ({"sft.lr_scheduler": "cosine_with_min_lr"}, "config 'sft.lr_scheduler' must be linear, cosine,"),
        ({"grpo.lr_scheduler": "wsd"}, "config 'grpo.lr_scheduler' must be linear, cosine,"),
    ],
)
def test_bad_values_name_their_key(override: dict, message: str) -> None:
    with pytest.raises(GrpoError) as info:
        resolve(overrides=override)
    assert message in str(info.value)


def test_presets_resolve() -> None:
    for name in PRESETS:
        cfg = resolve(preset=name)
        assert cfg.preset == name and cfg.grpo.max_steps >= 1


def test_the_cpu_preset_keeps_the_model_and_lists_only_what_differs() -> None:
    from cli.config.schema import Config

    cfg = resolve(preset="cpu", overrides={"model": "gemma3-270m"})
    assert (cfg.model, cfg.backend, cfg.max_seq_length, cfg.preset) == ("gemma3-270m", "hf", 512, "cpu")
    assert cfg.sft.grad_accum == 1 and cfg.grpo.max_completion_length == 128
    assert resolve(preset="cpu").model == "tiny"  # no model of its own: --model or the run's
    defaults = Config().to_dict()
    for key, value in PRESETS["cpu"].items():
        for sub, v in value.items() if isinstance(value, dict) else [(None, value)]:
            assert v != (defaults[key][sub] if sub else defaults[key]), (key, sub)


def test_a_bad_config_changes_nothing_in_the_run(tmp_path: Path) -> None:
    """Refused before the run saves its config: the run directory is exactly as it was."""
    run = tmp_path / "run"
    (run / "data").mkdir(parents=True)
    (run / "config.yaml").write_text("model: tiny\n")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    bad = tmp_path / "bad.yaml"
    for text, key in (
        ("grpo:\n  max_steps: two\n", "grpo.max_steps"),
        ("grpo:\n  max_steps: -5\n", "grpo.max_steps"),
        ("grpo:\n  temperature: -1\n", "grpo.temperature"),
    ):
        bad.write_text(text)
        line = fails_fast(["grpo", "--run", str(run), "--config", str(bad)])
        assert key in line
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_a_missing_local_model_is_not_taken_for_a_hub_id(tmp_path: Path, monkeypatch) -> None:
    """Hardening, round 1 (docs/history.md): `--model models/doesnotexist` was sent to the hub as a repo
    id."""
    from cli.models.resolve import resolve_model
    from cli.run.rundir import RunDir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    run = RunDir(tmp_path / "run")
    for name, message in (
        ("models/doesnotexist", "./models is a folder here"),
        ("a/b/c", "model path a/b/c does not exist"),
        ("./x", "model path ./x does not exist"),
    ):
        with pytest.raises(GrpoError, match=message.replace(".", r"\.")):
            resolve_model(resolve(overrides={"model": name}), run)
    hub_id = resolve_model(resolve(overrides={"model": "Qwen/Qwen3-4B"}), run)
    assert hub_id == "Qwen/Qwen3-4B"  # org/name with no local org folder: a hub id
    assert not (tmp_path / "run").exists()


def test_a_model_folder_s_own_code_never_runs(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """Hardening, round 1 (docs/history.md): a config.json with `auto_map` made transformers ask "run the
    custom code? [y/N]" and run it on "y". Loading is trust_remote_code=False everywhere: one clear line, no
    question."""
    import builtins
    import json
    import shutil

    from cli.models import loading

    folder = tmp_path / "evil"
    shutil.copytree(tiny_model_dir, folder)
    marker = tmp_path / "ran"
    (folder / "evil_code.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoConfig": "evil_code.Cfg", "AutoModelForCausalLM": "evil_code.Model"}
    cfg["model_type"] = "evil"  # no built-in class: only the folder's code could load it
    (folder / "config.json").write_text(json.dumps(cfg))
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    tok_cfg["auto_map"] = {"AutoTokenizer": ["evil_code.Tok", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tok_cfg))

    asked: list[str] = []

    def user_says_yes(prompt: str = "") -> str:  # what the user typed
        asked.append(prompt)
        return "y"

    monkeypatch.setattr(builtins, "input", user_says_yes)
    with pytest.raises(GrpoError) as info:
        loading.load_hf(folder, device="cpu")
    assert "custom code" in str(info.value) and "\n" not in str(info.value)
    assert not asked and not marker.exists()


# ---- presets, YAML and flags through the CLI (moved from test_cli.py) ---------------------------
# Seed values: 000 (Qwen3-4B: rsLoRA+DoRA r=16, alpha=16), 001 (Llama-3.2-3B: r=64, alpha=128,
# DoRA), 003 (Qwen3-8B: r=32, alpha=2r, no DoRA); G=4 and GRPO lr 5e-6 in all three.
SEED_VALUES = {
    "qwen3-4b": {"r": 16, "alpha": 16, "dora": True, "gens": 4, "lr": 5e-6, "model": "unsloth/Qwen3-4B-Base"},
    "llama3.2-3b": {
        "r": 64,
        "alpha": 128,
        "dora": True,
        "gens": 4,
        "lr": 5e-6,
        "model": "unsloth/Llama-3.2-3B-Instruct",
    },
    "qwen3-8b": {"r": 32, "alpha": 64, "dora": False, "gens": 4, "lr": 5e-6, "model": "Qwen/Qwen3-8B"},
}


@pytest.mark.parametrize("preset", sorted(SEED_VALUES))
def test_preset_dry_run_prints_seed_values(runner, tmp_path, preset):
    cfg = dry_run(runner, "prep", "--preset", preset, "--run", str(tmp_path / "run"))
    want = SEED_VALUES[preset]
    assert cfg["preset"] == preset
    assert cfg["model"] == want["model"]
    lora = cfg["lora"]
    assert (lora["r"], lora["alpha"], lora["dora"]) == (want["r"], want["alpha"], want["dora"])
    assert cfg["grpo"]["gens"] == want["gens"]
    assert cfg["grpo"]["learning_rate"] == pytest.approx(want["lr"])
    assert not (tmp_path / "run").exists(), "--dry-run must not create the run directory"


def test_flags_override_yaml_and_yaml_overrides_preset(runner, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("lora: {r: 8}\nprep: {eval_size: 10, prompt_quantile: 0.8}\ngrpo: {gens: 6}\n")
    run = str(tmp_path / "run")
    cfg = dry_run(
        runner, "prep", "--preset", "qwen3-4b", "--config", str(config), "--eval-size", "7", "--run", run
    )
    assert cfg["prep"]["eval_size"] == 7  # flag > YAML
    assert cfg["prep"]["prompt_quantile"] == 0.8  # YAML > default
    assert cfg["lora"]["r"] == 8 and cfg["grpo"]["gens"] == 6  # YAML > preset
    assert cfg["lora"]["alpha"] == 16 and cfg["lora"]["dora"] is True  # preset > default
    # A preset named inside the YAML applies too; the file still wins over it.
    config.write_text("preset: llama3.2-3b\nlora: {alpha: 32}\n")
    cfg = dry_run(runner, "doctor", "--config", str(config))
    assert (cfg["lora"]["r"], cfg["lora"]["alpha"], cfg["format"]) == (64, 32, "seed001")


def test_model_flag_is_remembered(runner, tiny_run):
    src = SAMPLES / "gsm8k_test.jsonl"
    result = runner.invoke(
        app,
        ["prep", "gsm8k", "--source", str(src), "--limit", "60", "--model", "tiny", "--run", str(tiny_run)],
    )
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((tiny_run / "config.yaml").read_text())["model"] == "tiny"
    assert dry_run(runner, "doctor", "--run", str(tiny_run))["model"] == "tiny"


def test_unknown_preset(runner, tmp_path):
    line = one_line_error(runner.invoke(app, ["prep", "--preset", "gpt5", "--dry-run"]))
    assert "unknown preset 'gpt5'" in line and "qwen3-4b" in line


def test_malformed_yaml(runner, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("lora:\n  r: [16\n")
    line = one_line_error(runner.invoke(app, ["prep", "--config", str(bad), "--dry-run"]))
    assert "malformed YAML" in line


def test_unknown_config_key(runner, tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text("lora: {rank: 8}\n")
    line = one_line_error(runner.invoke(app, ["doctor", "--config", str(bad), "--dry-run"]))
    assert "unknown config key" in line and "lora.rank" in line


def test_unknown_reward_name(tmp_path):
    py_rewards = pytest.importorskip("py_rewards")
    from cli.config.schema import resolve

    config = tmp_path / "r.yaml"
    config.write_text("grpo: {rewards: [match_format_exactly, check_answr]}\n")
    cfg = resolve(config_file=config)
    names = [r.name for r in cfg.grpo.rewards]
    assert names == ["match_format_exactly", "check_answr"]
    with pytest.raises(ValueError, match="unknown reward 'check_answr'"):
        for name in names:
            py_rewards.get_reward(name)
