"""Google's `google-genai` Python SDK, unmodified, pointed at a running
`baton serve` whose routes answer from a simulated provider of each kind,
under both API versions it speaks (`v1`, its default, and `v1beta`):
`generate_content`, `generate_content_stream`, a function-call round
trip, `count_tokens`, the model list, the SDK's own exceptions for a wrong
key and for a stream that breaks after it started, and a failover."""

import pytest
from google import genai
from google.genai import errors, types

from shapes import KINDS, expected, tool_names_sent, tool_result_sent
# The Anthropic SDK's gateway: a client key, a route "chat" that fails over
# from a failing Anthropic target to an OpenAI one ("py0 py1 py2 py3"), and a
# route "breaks" whose Gemini target cuts its answer after three tokens.
from test_anthropic_sdk import gateway  # noqa: F401 (a fixture)

ROUTES = list(KINDS)
VERSIONS = ["v1", "v1beta"]

WEATHER = types.Tool(function_declarations=[types.FunctionDeclaration(
    name="get_weather",
    description="The weather in a city",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)])


def gemini_client(root, version, key="unused"):
    """The SDK as a user points it at a gateway: the root, and an API version."""
    return genai.Client(api_key=key, http_options=types.HttpOptions(base_url=root, api_version=version, timeout=20_000))


@pytest.fixture(scope="module", params=VERSIONS)
def client(surface, request):
    return gemini_client(surface.base_url.removesuffix("/v1"), request.param)


@pytest.mark.parametrize("route", ROUTES)
def test_generate_content_answers_once(client, route):
    response = client.models.generate_content(
        model=route, contents="hello", config=types.GenerateContentConfig(system_instruction="be brief"))
    assert response.text == expected(route)
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.usage_metadata.candidates_token_count == 3
    assert response.model_version == f"{route}-sim", "the model that answered"


@pytest.mark.parametrize("route", ROUTES)
def test_generate_content_stream_assembles_the_same_text(client, route):
    chunks = list(client.models.generate_content_stream(model=route, contents="hello"))
    assert "".join(chunk.text or "" for chunk in chunks) == expected(route)
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 3


@pytest.mark.parametrize("route", ROUTES)
def test_a_function_call_round_trip(client, surface, route):
    config = types.GenerateContentConfig(tools=[WEATHER])
    asked = types.Content(role="user", parts=[types.Part.from_text(text="What is the weather in Paris?")])
    first = client.models.generate_content(model=route, contents=[asked], config=config)
    [call] = first.function_calls
    assert call.name == "get_weather" and call.args == {"city": "Paris"}
    assert tool_names_sent(route, surface.last(route)) == ["get_weather"]
    result = types.Part.from_function_response(name="get_weather", response={"output": "sunny"})
    contents = [asked, first.candidates[0].content, types.Content(role="user", parts=[result])]
    second = "".join(chunk.text or "" for chunk in
                     client.models.generate_content_stream(model=route, contents=contents, config=config))
    assert second == "the tool said: sunny"
    assert tool_result_sent(route, surface.last(route)) == "sunny"


def test_count_tokens_answers_an_estimate(client):
    assert client.models.count_tokens(model="gpt", contents="12345678").total_tokens == 2


def test_the_routes_are_the_models(client):
    names = [model.name for model in client.models.list()]
    assert sorted(names) == sorted(f"models/{route}" for route in ROUTES)
    assert client.models.get(model="claude").name == "models/claude"


def test_an_unknown_model_is_not_found(client):
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model="nope", contents="hi")
    assert raised.value.code == 404 and raised.value.status == "NOT_FOUND"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_wrong_key_raises_client_error(gateway, version):
    client = gemini_client(gateway, version, key="sk-not-this-one-0123")
    with pytest.raises(errors.ClientError) as raised:
        client.models.generate_content(model="chat", contents="hi")
    assert raised.value.code == 401 and raised.value.status == "UNAUTHENTICATED"
    assert "sk-not-this-one" not in str(raised.value), "the key sent is never echoed"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failover_is_invisible(gateway, version):
    client = gemini_client(gateway, version, key="sk-agent-test-0123456789")
    assert client.models.generate_content(model="chat", contents="hi").text == "py0 py1 py2 py3"
    chunks = client.models.generate_content_stream(model="chat", contents="hi")
    assert "".join(chunk.text or "" for chunk in chunks) == "py0 py1 py2 py3"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stream_that_breaks_midway_raises(gateway, version):
    client = gemini_client(gateway, version, key="sk-agent-test-0123456789")
    received = ""
    with pytest.raises(errors.ServerError) as raised:
        for chunk in client.models.generate_content_stream(model="breaks", contents="hi"):
            received += chunk.text or ""
    assert received == "cut0 cut1 cut2", "the tokens before the failure arrived"
    assert raised.value.code == 502
