"""A running `baton serve` in front of one simulated provider of each kind
(`baton mock`), shared by the client tests: route "gpt" answers from an
OpenAI-kind provider, "claude" from an Anthropic one, "gemini" from a Gemini
one. Each provider serves what it received at `GET /__requests`."""

import json
import tempfile
import urllib.request
from pathlib import Path

import pytest

from processes import start_baton, start_mock
from shapes import KINDS



class Surface:
    """The gateway's base URL and what each simulated provider received."""

    def __init__(self, base_url, mocks):
        self.base_url = base_url
        self.mocks = mocks

    def received(self, route):
        """Every request body the provider behind `route` received, in order."""
        url = f"http://{self.mocks[route]}/__requests"
        with urllib.request.urlopen(url, timeout=10) as response:
            return [record["body"] for record in json.load(response)]

    def last(self, route, count=1):
        """The last `count` request bodies behind `route`."""
        bodies = self.received(route)
        assert len(bodies) >= count, f"{route}: {len(bodies)} requests, expected at least {count}"
        return bodies[-count:] if count > 1 else bodies[-1]


@pytest.fixture(scope="session")
def surface():
    procs = []
    try:
        mocks = {}
        for route, kind in KINDS.items():
            proc, addr = start_mock(kind, kind, "--tokens", "3", "--first-token-ms", "5", "--gap-ms", "2")
            procs.append(proc)
            mocks[route] = addr
        config = 'listen = "127.0.0.1:0"\n'
        for route, kind in KINDS.items():
            suffix = "/v1" if kind == "openai" else ""
            config += f'\n[[providers]]\nname = "{kind}"\nkind = "{kind}"\nbase_url = "http://{mocks[route]}{suffix}"\n'
        for route, kind in KINDS.items():
            config += f'\n[[routes]]\nmodel = "{route}"\ntargets = [{{ provider = "{kind}", model = "{route}-sim" }}]\n'
        path = Path(tempfile.mkdtemp()) / "baton.toml"
        path.write_text(config)
        proxy, proxy_addr = start_baton("serve", "--config", str(path))
        procs.append(proxy)
        yield Surface(f"http://{proxy_addr}/v1", mocks)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
