"""The official OpenAI Python SDK, pointed at a running `baton serve`, against
simulated providers started with `baton mock`: a drop-in client must work
unchanged, and must raise when a stream fails after it started."""

import tempfile
from pathlib import Path

import openai
import pytest

from processes import start_baton, start_mock


def serve(config):
    """Writes `config` to a fresh file and starts `baton serve` on it."""
    path = Path(tempfile.mkdtemp()) / "baton.toml"
    path.write_text(config)
    return start_baton("serve", "--config", str(path))

def stop(procs):
    for proc in procs:
        proc.kill()
        proc.wait()

@pytest.fixture(scope="module")
def gateway():
    procs = []
    try:
        healthy, healthy_addr = start_mock("gemini", "py", "--tokens", "5", "--first-token-ms", "10", "--gap-ms", "5")
        flaky, flaky_addr = start_mock("anthropic", "leak", "--fault", "error_event")
        broken, broken_addr = start_mock("openai", "cut", "--tokens", "10", "--fault", "midstream_close")
        procs += [healthy, flaky, broken]
        config = f"""
listen = "127.0.0.1:0"

[[providers]]
name = "healthy"
kind = "gemini"
base_url = "http://{healthy_addr}"

[[providers]]
name = "flaky"
kind = "anthropic"
base_url = "http://{flaky_addr}"
breaker = {{ failure_threshold = 1000000, window = 1000000 }}

[[providers]]
name = "broken"
kind = "openai"
base_url = "http://{broken_addr}/v1"

[[routes]]
model = "chat"
first_token_timeout_ms = 2000
targets = [{{ provider = "flaky", model = "claude-sim" }}, {{ provider = "healthy", model = "gemini-sim" }}]

[[routes]]
model = "breaks"
targets = [{{ provider = "broken", model = "gpt-sim" }}]
"""
        proxy, proxy_addr = serve(config)
        procs.append(proxy)
        yield openai.OpenAI(base_url=f"http://{proxy_addr}/v1", api_key="unused", max_retries=0, timeout=20)
    finally:
        stop(procs)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
EXPECTED = "py0 py1 py2 py3 py4"

def test_streaming_through_a_failover(gateway):
    stream = gateway.chat.completions.create(
        model="chat", messages=MESSAGES, stream=True, stream_options={"include_usage": True})
    text, usage, models = "", None, set()
    for chunk in stream:
        models.add(chunk.model)
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage
    assert text == EXPECTED
    assert "leak" not in text
    assert models == {"gemini-sim"}
    assert usage is not None and usage.completion_tokens == 5 and usage.prompt_tokens == 10

def test_whole_answer_through_a_failover(gateway):
    raw = gateway.chat.completions.with_raw_response.create(model="chat", messages=MESSAGES)
    assert raw.headers["x-baton-provider"] == "healthy"
    assert raw.headers["x-baton-attempts"] == "2"
    completion = raw.parse()
    assert completion.choices[0].message.content == EXPECTED
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "gemini-sim"
    assert completion.usage.total_tokens == 15

def test_a_stream_that_breaks_midway_raises(gateway):
    stream = gateway.chat.completions.create(model="breaks", messages=MESSAGES, stream=True)
    received = ""
    with pytest.raises(openai.APIError) as raised:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received += chunk.choices[0].delta.content
    assert received == "cut0 cut1 cut2", "the tokens before the failure arrived"
    assert "stream" in str(raised.value).lower()

def test_unknown_model_is_not_found(gateway):
    with pytest.raises(openai.NotFoundError) as raised:
        gateway.chat.completions.create(model="gpt-nope", messages=MESSAGES)
    assert "chat" in str(raised.value)

def test_models_lists_the_routes(gateway):
    assert sorted(model.id for model in gateway.models.list()) == ["breaks", "chat"]

@pytest.fixture(scope="module")
def keyed():
    """A baton that needs a client key, in front of one simulated provider."""
    procs = []
    try:
        provider, provider_addr = start_mock("openai", "key", "--tokens", "3", "--first-token-ms", "5", "--gap-ms", "1")
        procs.append(provider)
        config = f"""
listen = "127.0.0.1:0"

[[keys]]
name = "sdk"
key = "sk-sdk-test-0123456789"

[[providers]]
name = "p"
kind = "openai"
base_url = "http://{provider_addr}/v1"

[[routes]]
model = "chat"
targets = [{{ provider = "p", model = "m" }}]
"""
        proxy, proxy_addr = serve(config)
        procs.append(proxy)
        yield f"http://{proxy_addr}/v1"
    finally:
        stop(procs)

def test_a_wrong_key_raises_authentication_error(keyed):
    client = openai.OpenAI(base_url=keyed, api_key="sk-not-this-one-0123", max_retries=0, timeout=20)
    with pytest.raises(openai.AuthenticationError) as raised:
        client.chat.completions.create(model="chat", messages=MESSAGES)
    assert "sk-not-this-one" not in str(raised.value), "the key sent is never echoed"

def test_the_right_key_streams(keyed):
    client = openai.OpenAI(base_url=keyed, api_key="sk-sdk-test-0123456789", max_retries=0, timeout=20)
    stream = client.chat.completions.create(model="chat", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "key0 key1 key2"
