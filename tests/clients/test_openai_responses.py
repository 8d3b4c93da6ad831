"""The official OpenAI Python SDK's `client.responses`, unmodified, pointed at
a running `baton serve` whose routes answer from a simulated provider of each
kind: streamed and not, a function-call round trip, structured output,
conversations chained with `previous_response_id` across a failover to
another kind, and what each provider received."""

import json
import tempfile
import urllib.request
from pathlib import Path

import openai
import pytest
from pydantic import BaseModel

from processes import start_baton, start_mock
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


def test_an_unknown_previous_response_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.responses.create(model="gpt", input="again", previous_response_id="resp_123")
    assert raised.value.code == "previous_response_not_found"
    assert "resp_123" in str(raised.value)


@pytest.fixture(scope="module")
def relay():
    """A baton keeping conversations in SQLite, with route "relay": an OpenAI
    Responses provider that fails every request after its first (HTTP 503),
    then an Anthropic one. Yields (client, what each provider received)."""
    procs = []
    try:
        gpt, gpt_addr = start_mock("openai-responses", "gpt", "--tokens", "3", "--fault", "http_5xx", "--after", "1")
        claude, claude_addr = start_mock("anthropic", "claude", "--tokens", "3")
        procs += [gpt, claude]
        home = Path(tempfile.mkdtemp())
        config = f"""listen = "127.0.0.1:0"

[store]
path = "{home / 'baton.db'}"

[[providers]]
name = "gpt"
kind = "openai"
api = "responses"
base_url = "http://{gpt_addr}/v1"

[[providers]]
name = "claude"
kind = "anthropic"
base_url = "http://{claude_addr}"

[[routes]]
model = "relay"
targets = [{{ provider = "gpt", model = "gpt-sim" }}, {{ provider = "claude", model = "claude-sim" }}]
"""
        (home / "baton.toml").write_text(config)
        proxy, addr = start_baton("serve", "--config", str(home / "baton.toml"))
        procs.append(proxy)
        client = openai.OpenAI(base_url=f"http://{addr}/v1", api_key="unused", max_retries=0, timeout=20)

        def received(mock_addr):
            with urllib.request.urlopen(f"http://{mock_addr}/__requests", timeout=10) as response:
                return json.load(response)

        yield client, lambda name: received(gpt_addr if name == "gpt" else claude_addr)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def anthropic_texts(body):
    """Each message an Anthropic provider was sent, as `role: text`."""
    def text(content):
        return content if isinstance(content, str) else "".join(block.get("text", "") for block in content)

    return [f"{message['role']}: {text(message['content'])}" for message in body["messages"]]


def test_a_chained_conversation_survives_its_provider_failing(relay):
    client, received = relay
    first = client.responses.create(model="relay", input="first question")
    assert first.store is True, "kept, as OpenAI keeps a turn unless told not to"
    assert first.output_text == "gpt0 gpt1 gpt2", "the first turn answered by the Responses provider"

    with client.responses.stream(model="relay", input="second question", previous_response_id=first.id) as stream:
        second = stream.get_final_response()
    assert second.output_text == "claude0 claude1 claude2", "the Responses provider has failed: another kind answers"
    assert second.previous_response_id == first.id

    third = client.responses.create(
        model="relay", input=[{"role": "user", "content": "third question"}], previous_response_id=second.id
    )
    assert third.output_text == "claude0 claude1 claude2", third.model_dump_json()

    gpt = received("gpt")
    assert [record["fault"] for record in gpt] == [None, "http_5xx", "http_5xx"], "tried first every turn"
    assert gpt[0]["body"]["store"] is False, "the upstream keeps nothing: baton holds the conversation"
    claude = [record["body"] for record in received("claude")]
    assert anthropic_texts(claude[0]) == [
        "user: first question", "assistant: gpt0 gpt1 gpt2", "user: second question",
    ]
    assert anthropic_texts(claude[1]) == [
        "user: first question", "assistant: gpt0 gpt1 gpt2", "user: second question",
        "assistant: claude0 claude1 claude2", "user: third question",
    ]

    kept = client.responses.retrieve(second.id)
    assert kept.id == second.id and kept.output_text == second.output_text
    deleted = client.responses.delete(third.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(third.id)


def test_an_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="hi")
