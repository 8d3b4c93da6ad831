"""The clouds' own SDKs, unmodified, against baton's simulated clouds, and
clients through a running baton to them: the `openai` SDK's AzureOpenAI
client reads the simulated Azure (its deployment path, `api-version`,
`api-key`); the `anthropic` SDK's AnthropicBedrock client, signing with
botocore and reading the answer with botocore's event-stream parser, reads
the simulated Bedrock; and through baton, an Azure target that fails gives
way to Claude on Bedrock, its requests signed with SigV4 and its body the
Messages body as Bedrock takes it."""

import json
import tempfile
import urllib.request
from pathlib import Path

import anthropic
import openai
import pytest

from processes import start_baton, start_mock

AZURE_KEY = "azure-test-key"
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def received(addr):
    """Every request the simulated provider at `addr` recorded."""
    with urllib.request.urlopen(f"http://{addr}/__requests", timeout=10) as response:
        return json.load(response)


@pytest.fixture()
def procs():
    started = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def mock(procs, kind, *args):
    proc, addr = start_mock(kind, kind, "--tokens", "3", *args)
    procs.append(proc)
    return addr


def test_the_azure_sdk_reads_the_simulated_azure(procs):
    addr = mock(procs, "azure", "--api-key", AZURE_KEY)
    client = openai.AzureOpenAI(azure_endpoint=f"http://{addr}", api_key=AZURE_KEY, api_version="2024-10-21",
                                max_retries=0, timeout=20)
    stream = client.chat.completions.create(model="gpt-4o-prod", stream=True,
                                            messages=[{"role": "user", "content": "hello"}])
    chunks = list(stream)
    assert chunks[0].choices == [] and chunks[0].prompt_filter_results, "the prompt's filter verdict comes first"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "azure0 azure1 azure2"
    [record] = received(addr)
    assert record["path"] == "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    assert record["headers"]["api-key"] == AZURE_KEY
    wrong = openai.AzureOpenAI(azure_endpoint=f"http://{addr}", api_key="wrong", api_version="2024-10-21",
                               max_retries=0, timeout=20)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="gpt-4o-prod", messages=[{"role": "user", "content": "hello"}])


def test_the_bedrock_sdk_reads_the_simulated_bedrock_event_stream(procs):
    addr = mock(procs, "bedrock")
    client = anthropic.AnthropicBedrock(aws_access_key="AKIDTEST", aws_secret_key="test-secret",
                                        aws_region="us-east-1", base_url=f"http://{addr}", max_retries=0, timeout=20)
    with client.messages.stream(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hello"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "bedrock0 bedrock1 bedrock2"
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 3
    [record] = received(addr)
    assert record["path"].startswith("/model/anthropic.claude-sonnet-4-5-20250929-v1") and record["path"].endswith(
        "/invoke-with-response-stream")
    assert record["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")


def serve(procs, config):
    path = Path(tempfile.mkdtemp()) / "baton.toml"
    path.write_text('listen = "127.0.0.1:0"\n\n[store]\nbackend = "none"\n\n' + config)
    proc, addr = start_baton("serve", "--config", str(path))
    procs.append(proc)
    return addr


def clouds(procs, azure_args=()):
    """baton over a simulated Azure (with `azure_args`) then a simulated
    Bedrock signed with AWS keys from the config: route "cloud"."""
    azure = mock(procs, "azure", "--api-key", AZURE_KEY, *azure_args)
    bedrock = mock(procs, "bedrock")
    config = f'''
[[providers]]
name = "azure"
kind = "azure"
base_url = "http://{azure}"
api_key = "{AZURE_KEY}"

[[providers]]
name = "bedrock"
kind = "bedrock"
region = "us-west-2"
base_url = "http://{bedrock}"
aws_access_key_id = "AKIDCONFIG"
aws_secret_access_key = "config-secret"

[[routes]]
model = "cloud"
targets = [{{ provider = "azure", model = "gpt-4o-prod" }}, {{ provider = "bedrock", model = "{MODEL}" }}]
'''
    return serve(procs, config), azure, bedrock


def test_a_failing_azure_target_gives_way_to_claude_on_bedrock_signed(procs):
    proxy, azure, bedrock = clouds(procs, ("--fault", "http_5xx"))
    client = openai.OpenAI(base_url=f"http://{proxy}/v1", api_key="unused", max_retries=0, timeout=20)
    response = client.chat.completions.with_raw_response.create(
        model="cloud", stream=True, messages=[{"role": "user", "content": "hello"}])
    assert response.headers["x-baton-provider"] == "bedrock"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in response.parse() if chunk.choices)
    assert text == "bedrock0 bedrock1 bedrock2"
    assert len(received(azure)) == 1, "the Azure target was tried first"
    [record] = received(bedrock)
    assert record["path"] == "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
    authorization = record["headers"]["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDCONFIG/"), authorization
    assert "/us-west-2/bedrock/aws4_request" in authorization and "config-secret" not in authorization
    assert record["body"]["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in record["body"] and "stream" not in record["body"]


def test_a_messages_client_reaches_claude_on_bedrock_with_its_body_unchanged(procs):
    proxy, _, bedrock = clouds(procs, ("--fault", "http_5xx"))
    client = anthropic.Anthropic(base_url=f"http://{proxy}", api_key="unused", max_retries=0, timeout=20)
    system = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    with client.messages.stream(model="cloud", max_tokens=64, system=system,
                                messages=[{"role": "user", "content": "hello"}],
                                extra_headers={"anthropic-beta": "context-1m-2025-08-07"}) as stream:
        text = "".join(stream.text_stream)
    assert text == "bedrock0 bedrock1 bedrock2"
    body = received(bedrock)[-1]["body"]
    assert body["system"] == system, "cache_control arrives as the client wrote it"
    assert body["anthropic_beta"] == ["context-1m-2025-08-07"]
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert body["messages"] == [{"role": "user", "content": "hello"}]


def vertex_key(addr, tmp_path):
    """The test-only service account's key file, its token_uri the simulated Vertex's own."""
    key = json.loads((Path(__file__).resolve().parents[2] / "fixtures/vertex/test-only-service-account.json").read_text())
    key["token_uri"] = f"http://{addr}/token"
    path = tmp_path / "sa.json"
    path.write_text(json.dumps(key))
    return path


def test_google_auth_exchanges_a_service_account_s_jwt_at_the_simulated_vertex(procs, tmp_path):
    from google.auth.transport.requests import Request
    from google.oauth2 import service_account

    addr = mock(procs, "vertex", "--api-key", "ya29.issued")
    credentials = service_account.Credentials.from_service_account_file(
        str(vertex_key(addr, tmp_path)), scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials.refresh(Request())
    assert credentials.token == "ya29.issued", "google-auth's own grant is the one the simulated Vertex takes"


def test_the_anthropic_vertex_sdk_reads_the_simulated_vertex(procs):
    addr = mock(procs, "vertex")
    client = anthropic.AnthropicVertex(region="us-east5", project_id="p", access_token="ya29.any",
                                       base_url=f"http://{addr}/v1", max_retries=0, timeout=20)
    with client.messages.stream(model="claude-sonnet-4-5@20250929", max_tokens=64,
                                messages=[{"role": "user", "content": "hello"}]) as stream:
        text = "".join(stream.text_stream)
    assert text == "vertex0 vertex1 vertex2"
    [record] = received(addr)
    assert record["path"] == ("/v1/projects/p/locations/us-east5/publishers/anthropic/models/"
                              "claude-sonnet-4-5@20250929:streamRawPredict")


def test_claude_and_gemini_on_vertex_through_baton_with_one_token_exchange(procs, tmp_path):
    addr = mock(procs, "vertex", "--api-key", "ya29.issued")
    key = vertex_key(addr, tmp_path)
    config = f'''
[[providers]]
name = "vertex"
kind = "vertex"
project = "my-project"
region = "us-east5"
base_url = "http://{addr}"
credentials_file = "{key}"

[[routes]]
model = "claude"
targets = [{{ provider = "vertex", model = "claude-sonnet-4-5@20250929" }}]

[[routes]]
model = "gemini"
targets = [{{ provider = "vertex", model = "gemini-2.5-flash" }}]
'''
    proxy = serve(procs, config)
    client = openai.OpenAI(base_url=f"http://{proxy}/v1", api_key="unused", max_retries=0, timeout=20)
    for route in ["claude", "gemini", "claude"]:
        stream = client.chat.completions.create(model=route, stream=True, messages=[{"role": "user", "content": "hi"}])
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        assert text == "vertex0 vertex1 vertex2", route
    records = received(addr)
    paths = [record["path"] for record in records]
    assert paths.count("/token") == 1, f"one exchange serves every request: {paths}"
    chats = [record for record in records if record["path"] != "/token"]
    assert [record["path"].rsplit(":", 1)[-1] for record in chats] == [
        "streamRawPredict", "streamGenerateContent?alt=sse", "streamRawPredict"]
    assert all(record["headers"]["authorization"] == "Bearer ya29.issued" for record in chats)


def bedrock_runtime(addr):
    """boto3's bedrock-runtime client pointed at the simulated Bedrock at `addr`."""
    import boto3
    from botocore.config import Config

    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=f"http://{addr}",
                        aws_access_key_id="AKIDTEST", aws_secret_access_key="test-secret",
                        config=Config(retries={"max_attempts": 1}, read_timeout=20))


def test_boto3_streams_claude_from_the_simulated_bedrock(procs):
    addr = mock(procs, "bedrock")
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
            "messages": [{"role": "user", "content": "hello"}]}
    answer = bedrock_runtime(addr).invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body))
    events = [json.loads(event["chunk"]["bytes"]) for event in answer["body"]]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "bedrock0 bedrock1 bedrock2"
    assert events[-1]["type"] == "message_stop"


def test_boto3_converse_streams_another_model_from_the_simulated_bedrock(procs):
    addr = mock(procs, "bedrock")
    answer = bedrock_runtime(addr).converse_stream(
        modelId="amazon.nova-pro-v1:0", messages=[{"role": "user", "content": [{"text": "hello"}]}],
        inferenceConfig={"maxTokens": 64})
    events = list(answer["stream"])
    names = [next(iter(event)) for event in events]
    assert names[0] == "messageStart" and names[-2:] == ["messageStop", "metadata"], names
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == "bedrock0 bedrock1 bedrock2"
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 3
    [record] = received(addr)
    assert record["path"] == "/model/amazon.nova-pro-v1%3A0/converse-stream"
    assert record["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDTEST/")


def test_claude_fails_over_from_anthropic_to_bedrock_to_vertex_with_its_body_unchanged(procs, tmp_path):
    anthropic_addr = mock(procs, "anthropic", "--fault", "http_429")
    bedrock_addr = mock(procs, "bedrock", "--fault", "http_429")
    vertex_addr = mock(procs, "vertex", "--api-key", "ya29.issued")
    key = vertex_key(vertex_addr, tmp_path)
    config = f'''
[[providers]]
name = "anthropic"
kind = "anthropic"
base_url = "http://{anthropic_addr}"

[[providers]]
name = "bedrock"
kind = "bedrock"
region = "us-east-1"
base_url = "http://{bedrock_addr}"
aws_access_key_id = "AKIDCONFIG"
aws_secret_access_key = "config-secret"

[[providers]]
name = "vertex"
kind = "vertex"
project = "p"
region = "us-east5"
base_url = "http://{vertex_addr}"
credentials_file = "{key}"

[[routes]]
model = "claude"
max_retry_wait_ms = 0
targets = [
  {{ provider = "anthropic", model = "claude-sonnet-4-5" }},
  {{ provider = "bedrock", model = "{MODEL}" }},
  {{ provider = "vertex", model = "claude-sonnet-4-5@20250929" }},
]
'''
    proxy = serve(procs, config)
    client = anthropic.Anthropic(base_url=f"http://{proxy}", api_key="unused", max_retries=0, timeout=20)
    system = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    response = client.messages.with_raw_response.create(
        model="claude", max_tokens=2048, system=system, thinking=thinking,
        messages=[{"role": "user", "content": "hello"}], extra_headers={"anthropic-beta": "context-1m-2025-08-07"})
    assert response.headers["x-baton-provider"] == "vertex"
    assert response.headers["x-baton-attempts"] == "3"
    message = response.parse()
    assert "".join(block.text for block in message.content if block.type == "text") == "vertex0 vertex1 vertex2"
    for addr in (bedrock_addr, vertex_addr):
        body = [r for r in received(addr) if r["path"] != "/token"][-1]["body"]
        assert body["system"] == system and body["thinking"] == thinking, body
        assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert received(bedrock_addr)[-1]["body"]["anthropic_beta"] == ["context-1m-2025-08-07"]
    vertex_chat = [r for r in received(vertex_addr) if r["path"] != "/token"][-1]
    assert vertex_chat["headers"]["anthropic-beta"] == "context-1m-2025-08-07"
