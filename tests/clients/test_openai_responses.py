"""The official OpenAI Python SDK's `client.responses`, unmodified, pointed at
a running `baton serve` whose routes answer from a simulated provider of each
kind: streamed and not, a function-call round trip, structured output,
`previous_response_id` refused by name, and what each provider received."""

import json

import openai
import pytest
from pydantic import BaseModel

from shapes import KINDS, expected, schema_sent, tool_names_sent, tool_result_sent

ROUTES = list(KINDS)

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def client(surface):
    return openai.OpenAI(base_url=surface.base_url, api_key="unused", max_retries=0, timeout=20)


@pytest.mark.parametrize("route", ROUTES)
def test_create_answers_one_response(client, route):
    response = client.responses.create(model=route, instructions="be brief", input="hello", store=False)
    assert response.object == "response" and response.status == "completed"
    assert response.output_text == expected(route)
    assert response.model == f"{route}-sim", "the model that answered"
    assert response.store is False, "baton keeps nothing"
    assert response.usage.output_tokens == 3
    assert response.instructions == "be brief", "the request's settings are echoed"


@pytest.mark.parametrize("route", ROUTES)
def test_streaming_events_come_in_order_with_sequence_numbers(client, route):
    stream = client.responses.create(model=route, input=[{"role": "user", "content": "hello"}], stream=True)
    events = list(stream)
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text == expected(route)
    done = [event for event in events if event.type == "response.output_text.done"]
    assert [event.text for event in done] == [expected(route)]
    assert events[-1].response.output_text == expected(route)


@pytest.mark.parametrize("route", ROUTES)
def test_the_stream_helper_assembles_the_final_response(client, route):
    with client.responses.stream(model=route, input="hello") as stream:
        deltas = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == expected(route)
    assert final.output_text == expected(route)


@pytest.mark.parametrize("route", ROUTES)
def test_a_function_call_round_trip(client, surface, route):
    items = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.responses.create(model=route, input=items, tools=[WEATHER_TOOL])
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert tool_names_sent(route, surface.last(route)) == ["get_weather"]
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "sunny"})
    with client.responses.stream(model=route, input=items, tools=[WEATHER_TOOL]) as stream:
        second = stream.get_final_response()
    assert second.output_text == "the tool said: sunny"
    assert tool_result_sent(route, surface.last(route)) == "sunny"


class Forecast(BaseModel):
    city: str
    days: int


@pytest.mark.parametrize("route", ROUTES)
def test_structured_output_parsed_into_a_pydantic_model(client, surface, route):
    response = client.responses.parse(model=route, input="The forecast for Paris", text_format=Forecast)
    assert response.output_parsed == Forecast(city="x", days=1), "the simulated providers fill a schema so"
    schema = schema_sent(route, surface.last(route))
    assert sorted(schema["required"]) == ["city", "days"]


def test_previous_response_id_is_refused_by_name(client):
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="gpt", input="again", previous_response_id="resp_123")
    assert "previous_response_id" in str(raised.value)


def test_an_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="hi")
