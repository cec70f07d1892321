"""Scripted scenarios from the design documents, and a seeded generator of benchmark traces.

Latency model (documented, used for every scripted trace): a model call takes ``MODEL_LATENCY_S``
(0.8 s, first chunk after a quarter of it) unless a scenario says otherwise; tools take 0.1-0.8 s as
each scenario states. Scenarios run on the virtual clock, so recording them is instant and exact.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolcall_lab.clock import run_virtual
from toolcall_lab.exceptions import UsageError
from toolcall_lab.loop import run
from toolcall_lab.models import ScriptedModel, ScriptedResponse
from toolcall_lab.records import Mode
from toolcall_lab.tools import Tool, ToolRegistry
from toolcall_lab.trace import Trace, TraceMetadata

MODEL_LATENCY_S = 0.8
CREATED = "2026-11-22"


def simulated(
    name: str,
    seconds: float,
    reply: Callable[[dict[str, Any]], str] | None = None,
    *,
    description: str = "",
    parameters: dict[str, Any] | None = None,
    fails: str | None = None,
    timeout_s: float | None = None,
) -> Tool:
    """A tool that takes `seconds` of (virtual) time and answers deterministically."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds < math.inf:
        raise UsageError(f"simulated({name!r}, seconds={seconds!r}): must be a finite number of seconds >= 0")

    async def fn(**kwargs: Any) -> str:
        await asyncio.sleep(seconds)
        if fails:
            raise RuntimeError(fails)
        return reply(kwargs) if reply else f"{name} result for {kwargs}"

    fn.__name__ = name
    props = parameters or {"type": "object", "properties": {}}
    return Tool(
        name=name,
        function=fn,
        description=description or f"{name} (simulated, {seconds} s)",
        parameters=props,
        timeout_s=timeout_s,
    )


def _obj(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: {"type": v} for k, v in props.items()},
        "required": list(props),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A scripted conversation: the model's turns, the tools, and the settings it is recorded with."""

    name: str
    title: str
    prompt: str
    steps: tuple[ScriptedResponse | str, ...]
    tools: tuple[Tool, ...]
    notes: str = ""
    mode: Mode = "parallel"
    settings: dict[str, Any] = field(default_factory=dict)

    def model(self) -> ScriptedModel:
        return ScriptedModel(list(self.steps), name=self.name)

    def registry(self) -> ToolRegistry:
        return ToolRegistry(self.tools)

    def record(self, mode: Mode | None = None) -> Trace:
        """Run the scenario on the virtual clock and return it as a scripted trace."""
        model = self.model()
        mode = mode or self.mode
        result = run_virtual(run(model, self.registry(), self.prompt, mode=mode, **self.settings))
        model.assert_consumed()
        meta = TraceMetadata(
            title=self.title,
            origin="scripted",
            provider="scripted",
            model="scripted",
            created=CREATED,
            source=f"toolcall_lab.scenarios:{self.name}",
            notes=self.notes or f"model {MODEL_LATENCY_S} s per call; tool times as scripted",
        )
        return Trace.from_run(result, meta)


def R(
    content: str | None = None, *calls: tuple[str, dict[str, Any]], latency: float = MODEL_LATENCY_S
) -> ScriptedResponse:
    return ScriptedResponse(content=content, tool_calls=tuple(calls), latency_s=latency)


def _scenarios() -> dict[str, Scenario]:
    weather = simulated(
        "get_weather", 0.5, lambda a: f"{a.get('city')}: 18°C, light rain", parameters=_obj(city="string")
    )
    news = simulated(
        "get_news", 0.8, lambda a: f"3 headlines about {a.get('topic')}", parameters=_obj(topic="string")
    )
    stock = simulated(
        "get_stock", 0.3, lambda a: f"{a.get('ticker')}: 142.10 EUR (+0.4%)", parameters=_obj(ticker="string")
    )
    web = simulated(
        "web_search",
        0.6,
        lambda a: f"top results for '{a.get('query')}': https://example.org/{len(str(a.get('query')))}",
        parameters=_obj(query="string"),
    )
    courses = simulated(
        "search_courses",
        0.4,
        lambda a: f"4 courses match '{a.get('topic')}'",
        parameters=_obj(topic="string"),
    )
    read = simulated(
        "read_page",
        0.7,
        lambda a: f"page {a.get('url')}: 1,200 words about tool calling",
        parameters=_obj(url="string"),
    )
    quick = [simulated(n, 0.1, parameters=_obj(q="string")) for n in ("tool_a", "tool_b", "tool_c")]
    flaky = simulated(
        "flaky_api", 0.2, fails="503 Service Unavailable from upstream", parameters=_obj(q="string")
    )
    hang = simulated("slow_service", 3600.0, parameters=_obj(q="string"), timeout_s=1.0)
    lookup = simulated("lookup", 0.1, parameters=_obj(key="string"))
    slow = simulated("slow_lookup", 2.0, parameters=_obj(key="string"))
    step = simulated(
        "step",
        0.2,
        lambda a: f"step {a.get('n')} done: ticket T{a.get('n')}-7731",
        parameters=_obj(n="integer"),
    )
    items = [
        Scenario(
            name="weather_news_stock",
            title="Weather, news and stock in one batch",
            prompt="What's the weather in Paris, the latest Paris news, and Airbus' share price?",
            steps=(
                R(
                    "Let me look all three up.",
                    ("get_weather", {"city": "Paris"}),
                    ("get_news", {"topic": "Paris"}),
                    ("get_stock", {"ticker": "AIR.PA"}),
                ),
                R("Paris: 18°C and light rain; 3 headlines; Airbus at 142.10 EUR."),
            ),
            tools=(weather, news, stock),
            notes="design doc: sequential tools of 0.5 s, 0.8 s and 0.3 s take 1.6 s; parallel takes 0.8 s",
        ),
        Scenario(
            name="multi_angle_search",
            title="Multi-angle web search",
            prompt="Research parallel tool calling from several angles.",
            steps=(
                R(
                    None,
                    *[
                        ("web_search", {"query": q})
                        for q in (
                            "parallel tool calls OpenAI",
                            "parallel_tool_calls false proxy",
                            "agent frameworks tool_calls[0] bug",
                            "asyncio gather tool execution",
                        )
                    ],
                ),
                R("Summary of four searches."),
            ),
            tools=(web,),
        ),
        Scenario(
            name="course_search_two_rounds",
            title="Two-round course search (could have been one batch)",
            prompt="Find me Python courses and data science courses.",
            steps=(
                R(None, ("search_courses", {"topic": "python"})),
                R(None, ("search_courses", {"topic": "data science"})),
                R("Here are courses for both topics."),
            ),
            tools=(courses,),
            notes="the second search uses nothing from the first: a single batch would have saved a round",
        ),
        Scenario(
            name="serialized_three",
            title="Three calls through a serialized proxy",
            prompt="Run tools a, b and c.",
            steps=(
                R(None, ("tool_a", {"q": "1"}), ("tool_b", {"q": "2"}), ("tool_c", {"q": "3"})),
                R("All three done."),
            ),
            tools=tuple(quick),
            mode="serialized",
            settings={"round_trip_s": 0.05},
            notes="design doc: three client round trips, one upstream call; 50 ms client round trip",
        ),
        Scenario(
            name="search_then_read",
            title="Search, then read what the search found",
            prompt="Find the best article on tool calling and summarise it.",
            steps=(
                R(None, ("web_search", {"query": "tool calling explained"})),
                R(None, ("read_page", {"url": "https://example.org/22"})),
                R("The article explains ..."),
            ),
            tools=(web, read),
            notes="round 2 needs round 1's URL: a real dependency, not missed parallelism",
        ),
        Scenario(
            name="failing_and_hanging",
            title="One failing and one hanging tool in a batch",
            prompt="Check the weather, the flaky API and the slow service.",
            steps=(
                R(
                    None,
                    ("get_weather", {"city": "Lyon"}),
                    ("flaky_api", {"q": "status"}),
                    ("slow_service", {"q": "report"}),
                ),
                R("Weather is fine; the API failed and the service timed out."),
            ),
            tools=(weather, flaky, hang),
            notes="slow_service has a 1 s timeout; flaky_api raises",
        ),
        Scenario(
            name="straggler",
            title="A batch with one slow straggler",
            prompt="Look up a, b, c and the big one.",
            steps=(
                R(
                    None,
                    ("lookup", {"key": "a"}),
                    ("lookup", {"key": "b"}),
                    ("lookup", {"key": "c"}),
                    ("slow_lookup", {"key": "big"}),
                ),
                R("Done."),
            ),
            tools=(lookup, slow),
            notes="parallel time is bounded by the 2 s straggler",
        ),
        Scenario(
            name="duplicate_call",
            title="A duplicated call, within a batch and across rounds",
            prompt="Weather in Paris please (the model asks twice).",
            steps=(
                R(None, ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Paris"})),
                R(None, ("get_weather", {"city": "Paris"})),
                R("18°C and light rain."),
            ),
            tools=(weather,),
            settings={"dedupe_across_rounds": True},
        ),
        Scenario(
            name="three_tools_100ms",
            title="Three tools of 100 ms each",
            prompt="Run a, b and c.",
            steps=(
                R(None, ("tool_a", {"q": "1"}), ("tool_b", {"q": "2"}), ("tool_c", {"q": "3"}), latency=0.0),
                R("done", latency=0.0),
            ),
            tools=tuple(quick),
            notes="design doc: parallel under 0.2 s, sequential 0.3 s (model time set to 0)",
        ),
        Scenario(
            name="one_tool_round",
            title="One tool round: 800 ms model, 200 ms tool, 800 ms final",
            prompt="Do one step.",
            steps=(R(None, ("step", {"n": 1})), R("done")),
            tools=(step,),
            notes="design doc: about 1.8 s",
        ),
        Scenario(
            name="two_tool_rounds",
            title="Two dependent tool rounds",
            prompt="Do two steps, the second after the first.",
            steps=(R(None, ("step", {"n": 1})), R(None, ("step", {"n": 2, "after": "T1-7731"})), R("done")),
            tools=(step,),
        ),
    ]
    return {s.name: s for s in items}


SCENARIOS: dict[str, Scenario] = _scenarios()


def generate_corpus(n: int = 300, seed: int = 7) -> list[Trace]:
    """`n` varied traces made deterministically from `seed` (recorded under parallel mode).

    Per trace: 1-4 tool rounds, 1-6 calls per batch (weighted to small batches), tool times log-normal
    around 0.3 s (0.02-4 s), model latency 0.4-1.6 s; about a fifth of the calls fail and some batches
    repeat an earlier call. The first call of a batch never fails (an all-failed batch ends a run).
    """
    rng = random.Random(seed)
    traces = []
    for t in range(n):
        rounds = rng.choice([1, 1, 2, 2, 2, 3, 3, 4])
        tools: dict[str, Tool] = {}
        steps: list[ScriptedResponse | str] = []
        used: list[tuple[str, dict[str, Any]]] = []
        for r in range(rounds):
            size = rng.choice([1, 1, 2, 2, 3, 3, 4, 5, 6])
            calls = []
            for c in range(size):
                if c > 0 and used and rng.random() < 0.05:
                    calls.append(used[rng.randrange(len(used))])
                    continue
                name = f"tool_{t}_{r}_{c}"
                seconds = round(min(4.0, max(0.02, rng.lognormvariate(-1.2, 0.8))), 3)
                tools[name] = simulated(
                    name,
                    seconds,
                    parameters=_obj(arg="string"),
                    fails="simulated failure" if c > 0 and rng.random() < 0.2 else None,
                )
                call = (name, {"arg": f"v{rng.randrange(1000)}"})
                used.append(call)
                calls.append(call)
            steps.append(ScriptedResponse(tool_calls=tuple(calls), latency_s=round(rng.uniform(0.4, 1.6), 3)))
        steps.append(ScriptedResponse(content=f"answer {t}", latency_s=round(rng.uniform(0.4, 1.6), 3)))
        scenario = Scenario(
            name=f"gen_{seed}_{t:04d}",
            title=f"generated trace {t} (seed {seed})",
            prompt=f"task {t}",
            steps=tuple(steps),
            tools=tuple(tools.values()),
            notes="generated by toolcall_lab.scenarios.generate_corpus",
        )
        traces.append(scenario.record())
    return traces
