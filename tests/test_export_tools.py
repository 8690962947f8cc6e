"""`grpo export` of a tool run (docs/tools.md "Export"): the GGUF's template and the Modelfile keep the tool
format, and the verification runs the tool loop through llama.cpp against HF.

The run is tests/tool_runs.py's: a tiny model taught in-process to call the tool, then answer after it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO, copy_run, invoke, needs_gguf
from tool_runs import TOOL_CODE, TURN2, shared_tool_run


@pytest.fixture(scope="module")
def tool_run(tmp_path_factory):
    return shared_tool_run(tmp_path_factory)


def test_modelfile_template_of_a_tool_run_keeps_the_tool_turns():
    from cli.export import gguf as gg
    from py_rewards.spec import FormatSpec

    spec = FormatSpec(tools=("python",))
    text = gg.modelfile("m.gguf", spec, "<eos>", temperature=1.0, min_p=0.1, num_ctx=2048)
    template = gg.ollama_tool_template(spec, "<eos>")
    assert f'TEMPLATE """{template}"""' in text and f'SYSTEM """{spec.system_prompt}"""' in text
    assert "You can run Python" in spec.system_prompt  # the tool's description rides in the system prompt
    # A call: the tool_call block around Ollama's parsed call, then EOS; a result: the tool_response block and
    # no generation prompt after it (the model goes on with its working out).
    assert (
        '<tool_call>\n{"name": "{{ $c.Function.Name }}", "arguments": {{ $c.Function.Arguments }}}\n'
        in template
    )
    assert "</tool_call>{{ end }}<eos>" in template
    assert (
        '{{- else if eq .Role "tool" }}<tool_response>\n{{ .Content }}\n</tool_response>\n{{ end }}'
        in template
    )
    assert template.endswith("{{- if not $tool }}<start_working_out>{{ end }}")
    # A run without the tool keeps its template byte for byte.
    plain = gg.modelfile("m.gguf", FormatSpec(), "<eos>", temperature=1.0, min_p=0.1, num_ctx=2048)
    assert "ToolCalls" not in plain and gg.ollama_template(FormatSpec(), "<eos>") in plain


# Ollama's template data, as far as the template reads it (api.Message: Role, Content, ToolCalls; a call's
# arguments print as compact JSON), rendering the template in argv[1] for the messages of argv[2] (JSON).
_OLLAMA_GO = """
package main

import ("encoding/json"; "os"; "text/template")

type Args map[string]any
func (a Args) String() string { b, _ := json.Marshal(a); return string(b) }
type Fn struct { Name string; Arguments Args }
type Call struct { Function Fn }
type Msg struct { Role string; Content string; ToolCalls []Call }

func main() {
	src, _ := os.ReadFile(os.Args[1])
	raw, _ := os.ReadFile(os.Args[2])
	var msgs []Msg
	if err := json.Unmarshal(raw, &msgs); err != nil { panic(err) }
	t := template.Must(template.New("m").Parse(string(src)))
	if err := t.Execute(os.Stdout, map[string]any{"Messages": msgs}); err != nil { panic(err) }
}
"""


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go's text/template (Ollama's template engine)")
def test_ollama_template_renders_what_the_jinja_template_renders(tmp_path):
    """The Modelfile's template through Go's text/template gives the GGUF's Jinja template's text."""
    from transformers.utils.chat_template_utils import render_jinja_template

    from cli.export import gguf as gg
    from py_rewards.spec import FormatSpec

    spec = FormatSpec(tools=("python",))

    calls = [{"code": "9+9"}, {"code": "print(1/0)"}]
    ollama = [
        {"Role": "system", "Content": spec.system_prompt},
        {"Role": "user", "Content": "What is 2+3?"},
        {"Role": "assistant", "Content": "Add them. ",
         "ToolCalls": [{"Function": {"Name": "python", "Arguments": c}} for c in calls]},
        {"Role": "tool", "Content": "18"},
        {"Role": "tool", "Content": "Error: ZeroDivisionError: division by zero (line 1)"},
        {"Role": "assistant", "Content": "So 18.<end_working_out><SOLUTION>18</SOLUTION>"},
        {"Role": "user", "Content": "And 4+4?"},
    ]  # fmt: skip
    (tmp_path / "main.go").write_text(_OLLAMA_GO)
    (tmp_path / "tpl").write_text(gg.ollama_tool_template(spec, "<eos>"))
    for n in (2, 5, 7):  # a first turn, after tool results (no generation prompt), a second question
        (tmp_path / "msgs.json").write_text(json.dumps(ollama[:n]))
        proc = subprocess.run(["go", "run", "main.go", "tpl", "msgs.json"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        messages = [
            {"role": m["Role"].lower(), "content": m["Content"],
             **({"tool_calls": [{"type": "function", "function": {"name": "python",
                                 "arguments": json.dumps(c["Function"]["Arguments"], separators=(",", ":"))}}
                                for c in m["ToolCalls"]]} if m.get("ToolCalls") else {})}
            for m in ollama[:n]
        ]  # fmt: skip
        rendered, _ = render_jinja_template([messages], chat_template=spec.chat_template(),
                                            add_generation_prompt=True, eos_token="<eos>")  # fmt: skip
        assert proc.stdout == rendered[0]


@pytest.mark.slow
@needs_gguf
def test_gguf_export_of_a_tool_run_runs_the_tool_loop_in_llama_cpp(tool_run, tmp_path):
    from cli.run.rundir import RunDir, run_config

    run = copy_run(tool_run, tmp_path / "run")
    spec = run_config(RunDir(run), None).format_spec()
    out = tmp_path / "export"
    result = invoke("export", "--run", run, "--gguf", "q8_0", "--adapter", "grpo", "--out", out,
                    "--verify", "3", "--verify-tokens", "96")  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((out / "verify.json").read_text())
    (art,) = report["artifacts"]
    # The GGUF carries the tool contract's template, which renders the tool turns (and the tool paragraph of
    # the system prompt when none is given).
    assert art["chat_template"] is True and art["prompt_tokenization_match"] == 1.0
    # llama.cpp ran the loop: the same call as HF on every prompt, its own sandbox gave the same result.
    tools = art["tools"]
    assert tools["call_match"] == 1.0 and tools["result_match"] == 1.0
    assert tools["calls_per_completion"] == {"hf": 1.0, "artifact": 1.0}
    assert art["agreement"]["token_match"] >= 0.9
    assert (
        art["rewards"]["artifact"]["match_format_exactly"] == art["rewards"]["hf"]["match_format_exactly"] > 0
    )
    assert "gguf-q8_0: tool calls match HF on 100% of prompts" in result.output
    modelfile = (out / "gguf-q8_0" / "Modelfile").read_text()
    assert ".ToolCalls" in modelfile and "<tool_response>" in modelfile and spec.system_prompt in modelfile

    # llama.cpp's own chat endpoint (xllamacpp's server, its Jinja engine, the template in the GGUF; no code
    # of ours, no torch in the process): after an assistant call and a tool result, the model answers.
    script = textwrap.dedent(
        """
        import json, sys
        import xllamacpp as xlc
        params = xlc.CommonParams()
        params.model.path = sys.argv[1]
        params.n_ctx = 512
        params.n_parallel = 1
        params.use_jinja = True
        server = xlc.Server(params)
        call = {"type": "function", "id": "c1", "function": {"name": "python", "arguments": json.dumps(
            {"code": sys.argv[2]})}}
        messages = [{"role": "user", "content": "What is 2+3?"},
                    {"role": "assistant", "content": "Add them. ", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c1", "content": "18"}]
        out = server.handle_chat_completions({"messages": messages, "max_tokens": 24, "temperature": 0.0})
        print(json.dumps(out["choices"][0]["message"]["content"]))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, art["path"], TOOL_CODE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == TURN2
