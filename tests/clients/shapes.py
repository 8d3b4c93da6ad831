"""Where each provider kind carries what the clients sent, so a test can
check what the simulated provider behind a route received."""

KINDS = {"gpt": "openai", "claude": "anthropic", "gemini": "gemini"}


def expected(route):
    """What the simulated provider behind `route` answers: its kind, three tokens."""
    return " ".join(f"{KINDS[route]}{i}" for i in range(3))


def tool_result_sent(route, body):
    """The text of the tool result a provider received, read from its own shape."""
    if KINDS[route] == "openai":
        message = body["messages"][-1]
        assert message["role"] == "tool"
        return message["content"]
    if KINDS[route] == "anthropic":
        blocks = [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]
        assert blocks, body["messages"][-1]
        return "".join(part["text"] for part in blocks[-1]["content"])
    parts = [p for p in body["contents"][-1]["parts"] if "functionResponse" in p]
    assert parts, body["contents"][-1]
    return parts[-1]["functionResponse"]["response"]["output"]


def schema_sent(route, body):
    """The JSON Schema a provider was asked to answer in, read from its own shape."""
    if KINDS[route] == "openai":
        return body["response_format"]["json_schema"]["schema"]
    if KINDS[route] == "anthropic":
        return body["output_config"]["format"]["schema"]
    return body["generationConfig"]["responseJsonSchema"]


def tool_names_sent(route, body):
    """The names of the tools a provider was offered, read from its own shape."""
    if KINDS[route] == "openai":
        return [tool["function"]["name"] for tool in body["tools"]]
    if KINDS[route] == "anthropic":
        return [tool["name"] for tool in body["tools"]]
    return [d["name"] for tool in body["tools"] for d in tool["functionDeclarations"]]
