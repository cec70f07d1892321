"""Cells of notebook 01_how_tool_calling_works."""

from __future__ import annotations

from ._cells import SETUP, code, md

CELLS = [
        md("""
# How tool calling works

A model that may call tools answers with an assistant message carrying **tool calls** (an id, a
function name and an argument string). The client runs them and sends back one `tool` message per
call id, then asks the model again. This notebook walks through that protocol on bundled data:
the request with tools, a streamed response with three interleaved calls, the message rules, what
the legacy *first call only* bug breaks, and how calls without ids get reproducible fallback ids.
"""),
        code(SETUP),
        md("## 1. A request with tools\nTools are plain Python functions; their JSON schema comes from the type hints and docstring."),
        code("""
from toolcall_lab.tools import ToolRegistry

tools = ToolRegistry()

@tools.register
def get_weather(city: str, unit: str = "celsius") -> str:
    \"\"\"Current weather for a city.

    Args:
        city: the city name
        unit: celsius or fahrenheit
    \"\"\"
    return f"{city}: 18 degrees, light rain"

request = {"model": "any", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": tools.schemas()}
print(json.dumps(request, indent=1))
"""),
        md("""
## 2. A streamed response, chunk by chunk
The bundled recording `data/recordings/scripted_weather_news_stock.sse` is a scripted stream (made by
`data/make_recordings.py`, not a provider capture): some text, then three calls whose deltas are
interleaved by `index`; ids and names only on each call's first delta; arguments split mid-string.
Step with the buttons, press play, or drag the slider: each step shows what the chunk says, the calls
so far with what it appended highlighted, and any findings (the last step is after `finish()`).
"""),
        code("""
from toolcall_lab.notebook.widgets import StreamStepper

recording = DATA / "recordings" / "scripted_weather_news_stock.sse"
stepper = StreamStepper(recording)
stepper
"""),
        code("""
# the same states, printed (what the slider shows), at a few steps
for step in (4, 9, 13, len(stepper.chunks)):
    snapshot = stepper.states.snapshot(step)
    print(f"after chunk {step}:", {idx: c["arguments"] for idx, c in snapshot[0].items()})
"""),
        code("""
from toolcall_lab import read_recording

response = read_recording(recording).parse()[0]
for call in response.tool_calls:
    print(call.index, call.tool_call_id, call.name, call.arguments, "->", call.parse_arguments())
print("text before the calls:", repr(response.first.content))
"""),
        md("""
## 3. The message protocol
Every tool call of an assistant message must be answered by exactly one `tool` message with its id
before the next assistant or user turn. A run of the loop on a scripted model shows the shape; the
validator checks it.
"""),
        code("""
from toolcall_lab.clock import run_virtual
from toolcall_lab.loop import run
from toolcall_lab.protocol import validate_messages
from toolcall_lab.scenarios import SCENARIOS

scenario = SCENARIOS["weather_news_stock"]
result = run_virtual(run(scenario.model(), scenario.registry(), scenario.prompt, mode="parallel"))
for m in result.messages:
    calls = [c["id"] for c in m.get("tool_calls", [])]
    print(f"{m['role']:>9}: {(m.get('content') or '')[:60]!r} {calls or ''} {m.get('tool_call_id', '')}")
print("violations:", validate_messages(result.messages))
"""),
        md("""
## 4. What *first call only* breaks
Frameworks that read `tool_calls[0]` run one call and drop the rest. The assistant message still
holds all three calls, so two are never answered: real APIs reject the next request, and the model
never sees the weather and the news. The validator says exactly where.
"""),
        code("""
legacy = run_virtual(run(scenario.model(), scenario.registry(), scenario.prompt, mode="first_only"))
print([(e.name, e.status) for e in legacy.executions])
for violation in validate_messages(legacy.messages):
    print(violation)
"""),
        md("""
## 5. Fallback ids
Some providers send no id (or `""`). The accumulator then uses `call_{batch}_{index}`, where `batch`
counts the model calls of the run from 0: reproducible for the same responses and unique within a
run. A provider's id is never altered. Each substitution is reported as a finding.
"""),
        code("""
from toolcall_lab import ChatCompletionAccumulator

def chunk(tool_calls):
    return {"choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": None}]}

acc = ChatCompletionAccumulator(batch=2)   # the third model call of a run
acc.feed(chunk([{"index": 0, "function": {"name": "sum", "arguments": '{"a": 2'}}]))
acc.feed(chunk([{"index": 0, "function": {"arguments": ', "b": 2}'}}, {"index": 1, "id": "", "function": {"name": "sub", "arguments": "{}"}}]))
parsed = acc.finish()
print([(c.tool_call_id, c.id_source, c.name, c.arguments) for c in parsed.tool_calls])
for f in parsed.findings:
    print(f.kind, "-", f.message)
"""),
        md("## 6. The run as a trace\nA finished run becomes a `Trace`; its rich display shows each round's message tree and timing."),
        code("""
from toolcall_lab.trace import Trace, TraceMetadata

Trace.from_run(result, TraceMetadata(title="weather, news and stock (parallel)", origin="scripted"))
"""),
]
