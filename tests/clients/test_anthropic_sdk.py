"""The official Anthropic Python SDK, unmodified, pointed at a running
`baton serve` whose routes answer from a simulated provider of each kind:
`messages.create` and `messages.stream`, a tool round trip, `count_tokens`,
the SDK's own exceptions for a wrong key and for a stream that breaks after
it started, and what each provider received."""

import anthropic
import pytest

from processes import start_mock
from shapes import KINDS, expected, tool_names_sent, tool_result_sent
from test_openai_sdk import serve, stop

ROUTES = list(KINDS)

WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest.fixture(scope="module")
def client(surface):
    # The Anthropic SDK's base URL is the gateway's root: it adds /v1/messages itself.
    root = surface.base_url.removesuffix("/v1")
    return anthropic.Anthropic(base_url=root, api_key="unused", max_retries=0, timeout=20)


@pytest.mark.parametrize("route", ROUTES)
def test_create_answers_one_message(client, route):
    message = client.messages.create(model=route, max_tokens=64, system="be brief",
                                     messages=[{"role": "user", "content": "hello"}])
    assert message.type == "message" and message.role == "assistant"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == expected(route)
    assert message.model == f"{route}-sim", "the model that answered"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 3


@pytest.mark.parametrize("route", ROUTES)
def test_stream_assembles_the_same_message(client, route):
    with client.messages.stream(model=route, max_tokens=64,
                                messages=[{"role": "user", "content": "hello"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == expected(route)
    assert final.content[0].text == expected(route)
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 3


@pytest.mark.parametrize("route", ROUTES)
def test_a_tool_round_trip(client, surface, route):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.messages.create(model=route, max_tokens=64, messages=messages, tools=[WEATHER_TOOL])
    assert first.stop_reason == "tool_use"
    [call] = [block for block in first.content if block.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "Paris"}
    assert tool_names_sent(route, surface.last(route)) == ["get_weather"]
    messages.append({"role": "assistant", "content": [block.model_dump() for block in first.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": "sunny"}]}]})
    with client.messages.stream(model=route, max_tokens=64, messages=messages, tools=[WEATHER_TOOL]) as stream:
        second = stream.get_final_message()
    assert second.content[0].text == "the tool said: sunny"
    assert second.stop_reason == "end_turn"
    assert tool_result_sent(route, surface.last(route)) == "sunny"


def test_an_anthropic_target_gets_the_sdks_body_as_sent(client, surface):
    client.messages.create(model="claude", max_tokens=32, messages=[{"role": "user", "content": "hi"}],
                           metadata={"user_id": "u-42"}, extra_body={"x_new_field": {"a": 1}, "top_k": 5},
                           extra_headers={"anthropic-beta": "some-beta-2099-01-01"})
    sent = surface.last("claude")
    assert sent["x_new_field"] == {"a": 1}, "a field baton has never heard of arrives"
    assert sent["metadata"] == {"user_id": "u-42"} and sent["top_k"] == 5
    assert sent["model"] == "claude-sim" and sent["stream"] is True


def test_count_tokens_answers_an_estimate(client):
    counted = client.messages.count_tokens(model="gpt", messages=[{"role": "user", "content": "12345678"}])
    assert counted.input_tokens == 2


def test_count_tokens_is_asked_of_an_anthropic_target(client):
    # The simulated Anthropic counts a token a word; baton's estimate would say 4.
    raw = client.messages.with_raw_response.count_tokens(
        model="claude", messages=[{"role": "user", "content": "one two three"}])
    assert raw.parse().input_tokens == 3
    assert raw.headers["x-baton-provider"] == "anthropic"


def test_an_unknown_model_is_not_found(client):
    with pytest.raises(anthropic.NotFoundError) as raised:
        client.messages.create(model="nope", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert "claude" in str(raised.value), "the error lists the routes"


@pytest.fixture(scope="module")
def gateway():
    """A baton with a client key, a route that fails over and one that breaks mid-stream."""
    procs = []
    try:
        healthy, healthy_addr = start_mock("openai", "py", "--tokens", "4", "--first-token-ms", "5")
        flaky, flaky_addr = start_mock("anthropic", "leak", "--fault", "http_5xx")
        broken, broken_addr = start_mock("gemini", "cut", "--tokens", "10", "--fault", "midstream_close")
        procs += [healthy, flaky, broken]
        proxy, addr = serve(f"""
listen = "127.0.0.1:0"

[[keys]]
name = "agent"
key = "sk-agent-test-0123456789"

[[providers]]
name = "healthy"
kind = "openai"
base_url = "http://{healthy_addr}/v1"

[[providers]]
name = "flaky"
kind = "anthropic"
base_url = "http://{flaky_addr}"

[[providers]]
name = "broken"
kind = "gemini"
base_url = "http://{broken_addr}"

[[routes]]
model = "chat"
targets = [{{ provider = "flaky", model = "claude-sim" }}, {{ provider = "healthy", model = "gpt-sim" }}]

[[routes]]
model = "breaks"
targets = [{{ provider = "broken", model = "gemini-sim" }}]
""")
        procs.append(proxy)
        yield f"http://{addr}"
    finally:
        stop(procs)


def test_a_wrong_key_raises_authentication_error(gateway):
    client = anthropic.Anthropic(base_url=gateway, api_key="sk-not-this-one-0123", max_retries=0, timeout=20)
    with pytest.raises(anthropic.AuthenticationError) as raised:
        client.messages.create(model="chat", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert "sk-not-this-one" not in str(raised.value), "the key sent is never echoed"


def test_a_failover_is_invisible(gateway):
    client = anthropic.Anthropic(base_url=gateway, api_key="sk-agent-test-0123456789", max_retries=0, timeout=20)
    raw = client.messages.with_raw_response.create(model="chat", max_tokens=8,
                                                  messages=[{"role": "user", "content": "hi"}])
    assert raw.headers["x-baton-provider"] == "healthy"
    assert raw.headers["x-baton-attempts"] == "2"
    assert raw.parse().content[0].text == "py0 py1 py2 py3"
    with client.messages.stream(model="chat", max_tokens=8, messages=[{"role": "user", "content": "hi"}]) as stream:
        assert "".join(stream.text_stream) == "py0 py1 py2 py3"


def test_a_stream_that_breaks_midway_raises(gateway):
    client = anthropic.Anthropic(base_url=gateway, auth_token="sk-agent-test-0123456789", max_retries=0, timeout=20)
    received = ""
    with pytest.raises(anthropic.APIStatusError) as raised:
        with client.messages.stream(model="breaks", max_tokens=64,
                                    messages=[{"role": "user", "content": "hi"}]) as stream:
            for text in stream.text_stream:
                received += text
    assert received == "cut0 cut1 cut2", "the tokens before the failure arrived"
    assert "stream" in str(raised.value).lower()
