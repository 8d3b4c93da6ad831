"""Starting `baton` (serve or mock) as a process for the client tests, and
knowing when it serves."""

import os
import re
import subprocess
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BATON = os.environ.get("BATON_BIN", str(ROOT / "target" / "debug" / "baton"))
START_TIMEOUT_S = 30


def start_baton(*args):
    """Starts `baton args...` and returns (process, address) once it serves."""
    proc = subprocess.Popen(
        [BATON, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUST_LOG": "info"},
    )
    found = {}
    ready = threading.Event()

    def drain():
        for line in proc.stderr:
            match = re.search(r"is serving.*listen=(\S+)", line)
            if match and not ready.is_set():
                found["addr"] = match.group(1)
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(START_TIMEOUT_S) or "addr" not in found:
        proc.kill()
        raise RuntimeError(f"baton {' '.join(args)} did not start")
    return proc, found["addr"]


def start_mock(kind, marker, *args):
    """Starts `baton mock` of `kind` on a free port, its tokens made of
    `marker`, with `args`; returns (process, address) once it serves."""
    return start_baton("mock", "--kind", kind, "--listen", "127.0.0.1:0", "--marker", marker, *args)
