"""The official OpenAI Python SDK, unmodified, through a running baton to a
simulated provider of each kind: a tool round trip whole and streamed, an
image as a data URL, and structured output parsed into a pydantic model.
Each test checks what the SDK returned and what the provider received."""

import json
from typing import Literal

import openai
import pytest
from pydantic import BaseModel

from shapes import KINDS, schema_sent, tool_names_sent, tool_result_sent

ROUTES = list(KINDS)
PNG = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
       "hQGAhKmMIQAAAABJRU5ErkJggg==")
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class GetWeather(BaseModel):
    """The weather in a city."""
    city: str


class Forecast(BaseModel):
    city: str
    days: int
    rain: bool
    tags: list[str]
    unit: Literal["c", "f"]


@pytest.fixture
def client(surface):
    return openai.OpenAI(base_url=surface.base_url, api_key="unused", max_retries=0, timeout=20)


def weather(city):
    return f"18C and sunny in {city}"


@pytest.mark.parametrize("route", ROUTES)
def test_a_tool_round_trip(client, surface, route):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model=route, messages=messages, tools=[WEATHER_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert tool_names_sent(route, surface.last(route)) == ["get_weather"]

    messages.append(choice.message.model_dump(exclude_none=True))
    result = weather(json.loads(call.function.arguments)["city"])
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model=route, messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == f"the tool said: {result}"
    assert not second.choices[0].message.tool_calls
    assert tool_result_sent(route, surface.last(route)) == result


@pytest.mark.parametrize("route", ROUTES)
def test_a_streamed_tool_round_trip_with_a_pydantic_tool(client, surface, route):
    tools = [openai.pydantic_function_tool(GetWeather)]
    messages = [{"role": "user", "content": "What is the weather in Lyon?"}]
    with client.chat.completions.stream(model=route, messages=messages, tools=tools) as stream:
        first = stream.get_final_completion()
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "GetWeather"
    assert call.function.parsed_arguments == GetWeather(city="Paris")

    messages.append({"role": "assistant", "content": choice.message.content, "tool_calls": [
        {"id": call.id, "type": "function",
         "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
    messages.append({"role": "tool", "tool_call_id": call.id, "content": weather("Paris")})
    text = ""
    with client.chat.completions.stream(model=route, messages=messages, tools=tools) as stream:
        for event in stream:
            if event.type == "content.delta":
                text += event.delta
        final = stream.get_final_completion()
    assert text == f"the tool said: {weather('Paris')}"
    assert final.choices[0].finish_reason == "stop"
    assert tool_result_sent(route, surface.last(route)) == weather("Paris")


@pytest.mark.parametrize("route", ROUTES)
def test_an_image_as_a_data_url(client, surface, route):
    content = [{"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": PNG}}]
    answer = client.chat.completions.create(model=route, messages=[{"role": "user", "content": content}])
    assert answer.choices[0].message.content.startswith("saw 1 image. ")
    body = surface.last(route)
    media, data = PNG.removeprefix("data:").split(";base64,")
    if KINDS[route] == "openai":
        assert body["messages"][0]["content"][1] == {"type": "image_url", "image_url": {"url": PNG}}
    elif KINDS[route] == "anthropic":
        assert body["messages"][0]["content"][1] == {
            "type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    else:
        assert body["contents"][0]["parts"][1] == {"inlineData": {"mimeType": media, "data": data}}


@pytest.mark.parametrize("route", ROUTES)
def test_structured_output_parsed_into_a_pydantic_model(client, surface, route):
    completion = client.chat.completions.parse(
        model=route, messages=[{"role": "user", "content": "The forecast for Paris"}], response_format=Forecast)
    message = completion.choices[0].message
    assert message.parsed == Forecast(city="x", days=1, rain=True, tags=[], unit="c")
    assert json.loads(message.content) == message.parsed.model_dump()
    schema = schema_sent(route, surface.last(route))
    assert sorted(schema["required"]) == ["city", "days", "rain", "tags", "unit"]
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
