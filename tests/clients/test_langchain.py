"""LangChain's `ChatOpenAI`, unmodified, through a running baton to a
simulated provider of each kind: tools bound with `bind_tools` and their
results sent back, whole and streamed, and `with_structured_output` into a
pydantic model. Each test checks what LangChain returned and what the
provider received."""

from typing import Literal

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from shapes import KINDS, schema_sent, tool_names_sent, tool_result_sent

ROUTES = list(KINDS)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"18C and sunny in {city}"


class Forecast(BaseModel):
    """A weather forecast."""
    city: str
    days: int
    rain: bool
    unit: Literal["c", "f"]


def chat(surface, route, **options):
    return ChatOpenAI(model=route, base_url=surface.base_url, api_key="unused", max_retries=0, timeout=20, **options)


@pytest.mark.parametrize("route", ROUTES)
def test_bind_tools_round_trip(surface, route):
    model = chat(surface, route).bind_tools([get_weather])
    messages = [HumanMessage("What is the weather in Paris?")]
    asked = model.invoke(messages)
    [call] = asked.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
    assert tool_names_sent(route, surface.last(route)) == ["get_weather"]

    messages += [asked, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answered = model.invoke(messages)
    assert answered.content == "the tool said: 18C and sunny in Paris"
    assert answered.tool_calls == []
    assert tool_result_sent(route, surface.last(route)) == "18C and sunny in Paris"


@pytest.mark.parametrize("route", ROUTES)
def test_bind_tools_round_trip_streamed(surface, route):
    model = chat(surface, route, streaming=True).bind_tools([get_weather])
    messages = [HumanMessage("What is the weather in Rome?")]
    asked = None
    for chunk in model.stream(messages):
        asked = chunk if asked is None else asked + chunk
    [call] = asked.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})

    messages += [asked, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    pieces = [chunk.content for chunk in model.stream(messages)]
    assert "".join(pieces) == "the tool said: 18C and sunny in Paris"
    assert len([p for p in pieces if p]) > 1, "the answer came in pieces"
    assert tool_result_sent(route, surface.last(route)) == "18C and sunny in Paris"


@pytest.mark.parametrize("route", ROUTES)
def test_with_structured_output(surface, route):
    model = chat(surface, route).with_structured_output(Forecast)
    forecast = model.invoke("The forecast for Paris")
    assert forecast == Forecast(city="x", days=1, rain=True, unit="c")
    schema = schema_sent(route, surface.last(route))
    assert sorted(schema["required"]) == ["city", "days", "rain", "unit"]
