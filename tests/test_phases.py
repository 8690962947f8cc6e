"""cli/train/phases.py: the per-step phase clock of `grpo grpo` (where a step's time goes)."""

from __future__ import annotations

from cli.train.phases import PhaseTimes


class Engine:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, prompts: list[str]) -> list[str]:
        self.calls.append("decode")
        return [p + "!" for p in prompts]

    def wake_up(self) -> None:
        self.calls.append("wake")

    def sleep(self, level: int = 1) -> None:
        self.calls.append("sleep")


class Generation:
    """The shape of TRL's ``VLLMGeneration``: weight hand-off, then the engine around standby."""

    def __init__(self) -> None:
        self.llm = Engine()

    def sync_weights(self) -> None:
        self.llm.calls.append("sync")

    def generate(self, prompts: list[str]) -> list[str]:
        self.sync_weights()
        self.llm.wake_up()
        out = self.llm.generate(prompts)
        self.llm.sleep()
        return out


class Trainer:
    def __init__(self) -> None:
        self.vllm_generation = Generation()

    def _generate_and_score_completions(self, prompts: list[str]) -> list[str]:
        return self.vllm_generation.generate(prompts)

    def compute_loss(self, x: float) -> float:
        return self._generate_and_score_completions(["a"]) and x * 2

    def training_step(self, x: float) -> float:
        return self.compute_loss(x)


def test_phases_are_timed_per_step_and_reset() -> None:
    trainer = Trainer()
    ticks: list[int] = []
    phases = PhaseTimes(sync=lambda: ticks.append(1)).wrap(trainer)
    assert trainer.training_step(1.5) == 3.0  # wrapped methods still return what they returned
    assert trainer.vllm_generation.generate(["b"]) == ["b!"]
    row = phases.take()
    expected = {"rollout", "generate", "decode", "weight_sync", "wake_sleep"}
    expected |= {"loss", "train_step", "backward"}
    assert {k.removeprefix("phase_").removesuffix("_s") for k in row} == expected
    assert all(v >= 0 for v in row.values())
    assert row["phase_decode_s"] <= row["phase_generate_s"]
    assert ticks, "the device is synchronised around each timed call"
    assert phases.take() == {}, "a step's counters start from zero"
    # The call order inside the wrapped objects is untouched.
    assert trainer.vllm_generation.llm.calls[:4] == ["sync", "wake", "decode", "sleep"]


def test_wrapping_twice_and_missing_methods_are_harmless() -> None:
    trainer = Trainer()
    phases = PhaseTimes().wrap(trainer)
    PhaseTimes().wrap(trainer)  # already wrapped: left as is
    assert "decode:generate" in phases.wrapped
    assert not any(name.endswith(":_calculate_rewards") for name in phases.wrapped)
    trainer.training_step(1.0)
    assert phases.take()["phase_train_step_s"] >= 0
