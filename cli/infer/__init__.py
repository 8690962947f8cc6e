"""Inference shared by eval, filter, export's verification and chat.

- :mod:`cli.infer.prompting`: the format contract at inference (generation prompt, splitting an answer).
- :mod:`cli.infer.generation`: HF decoding (greedy batched, streamed, n sampled per prompt) and GGUF
  decoding through llama.cpp.
- :mod:`cli.infer.tool_loop`: a tool run's turns (generate, run the calls in the sandbox, append the results,
  continue) over any engine: eval and export's verification.
- :mod:`cli.infer.vllm_engine`: every checkpoint's prompts at once through vLLM (eval, filter).
- :mod:`cli.infer.llamacpp`: llama.cpp's C API from the prebuilt xllamacpp library (load, decode, quantize).
"""

from cli.common import lazy_exports

# What tools outside the package (bench/) may use: `from cli.infer import NAME` loads its module on first
# use.
_EXPORTS = {
    "generation": "generation:",
    "prompting": "prompting:",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
