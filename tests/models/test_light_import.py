"""`import loom_nb` stays light: a provider's SDK is imported only when a model string asks."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
import sys
def sdks():
    return sorted(m for m in ("openai", "anthropic", "httpx2") if m in sys.modules)

import loom_nb
from loom_nb import define_agent
print(sdks())
define_agent(name="a", model="anthropic:claude-sonnet-4-5")
print(sdks())
define_agent(name="b", model="ollama:llama3.2")
print(sdks())
"""


def test_sdks_are_imported_only_when_asked_for() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.splitlines() == [
        "[]",
        "['anthropic', 'httpx2']",
        "['anthropic', 'httpx2', 'openai']",
    ]
