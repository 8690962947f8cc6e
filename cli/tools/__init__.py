"""The model's Python tool: a sandbox on pydantic-monty, its per-call limits, its counters, and the typed
function TRL and the chat templates see (docs/tools.md "Sandbox").

Owns running code the model wrote: nothing it runs reaches the host (files, network, processes, the
environment), every failure comes back as one readable ``Error: ...`` text, and no call can hang or
outgrow its limits. Imports nothing else of ``cli``, so every stage can use it.
"""

from cli.tools.sandbox import PythonSandbox, SandboxLimits, ToolOutcome, ToolStats, python_tool

__all__ = ["PythonSandbox", "SandboxLimits", "ToolOutcome", "ToolStats", "python_tool"]
