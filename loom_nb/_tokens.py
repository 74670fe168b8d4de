"""Tokens counted before a request is sent: the provider's tokenizer where a well-kept library
has it, a stated estimate elsewhere.

- OpenAI models (``openai:...``) are counted with tiktoken's encoding for the model, when
  tiktoken is installed (the ``tokens`` extra) and the encoding's file is in tiktoken's cache.
  tiktoken downloads that file on first use; a run never does (a notebook may be offline, and
  a first turn should not wait for a download), so fetch it once with
  ``python -c "import tiktoken; tiktoken.get_encoding('o200k_base')"``.
- Everything else, and OpenAI models without the cached encoding, is the estimate:
  one token per :data:`CHARS_PER_TOKEN` characters, rounded up. Anthropic has no local
  tokenizer (its count is an API call); Ollama's models each have their own.

Each message costs :data:`MESSAGE_TOKENS` more (its role and separators), as OpenAI's guide to
counting chat tokens has it. A count is checked against what the provider reports after the
turn (``Usage.input_tokens``); the budget check scales its next estimate by that ratio.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loom_nb._messages import Message, NewerPart, TextPart, ToolCall, ToolResult

__all__ = ["CHARS_PER_TOKEN", "MESSAGE_TOKENS", "TokenCounter", "counter_for"]

#: The estimate: characters per token. Data blocks (CSV of numbers, ids) run near 2.5 in
#: OpenAI's o200k_base, English prose near 4.2: 3 counts 0.75 to 1.5 times the real number
#: (tested against tiktoken), erring on the side of more for text.
CHARS_PER_TOKEN = 3
#: What each message costs beyond its text.
MESSAGE_TOKENS = 4

#: Where tiktoken fetches each encoding it may use here (its cache is keyed by this address).
_ENCODING_FILES = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


@dataclass(frozen=True)
class TokenCounter:
    """Counts text in one model's tokens. ``method`` says how (for a thread's usage line)."""

    method: str
    _encoding: Any = None

    @property
    def exact(self) -> bool:
        """Whether this is the provider's own tokenizer (else the estimate)."""
        return self._encoding is not None

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        if not text:
            return 0
        if self._encoding is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return _encoded_length(self._encoding, text)

    def part(self, part: Any) -> int:
        """Tokens of one message part as a provider is sent it."""
        if isinstance(part, TextPart):
            return self.count(part.text)
        if isinstance(part, ToolCall):
            arguments = part.arguments if part.arguments is not None else {}
            return self.count(part.id + part.name + _JSON.encode(arguments))
        if isinstance(part, ToolResult):
            return self.count(part.call_id) + self.count(part.content)
        if isinstance(part, NewerPart):
            return 0  # never sent
        return 0

    def message(self, message: Message) -> int:
        """Tokens of ``message`` with its overhead."""
        return MESSAGE_TOKENS + sum(self.part(p) for p in message.parts)

    def request(
        self, instructions: str | None, tools: Sequence[Any], messages: Sequence[Message]
    ) -> int:
        """Tokens of a whole request: instructions, tool definitions, messages."""
        total = self.count(instructions or "") + sum(self.message(m) for m in messages)
        for t in tools:
            total += self.count(t.name + t.description + json.dumps(t.parameters, sort_keys=True))
        return total


#: ``json.dumps(..., ensure_ascii=False)``, made once (``dumps`` makes one for each call
#: given an argument of its own).
_JSON = json.JSONEncoder(ensure_ascii=False)

ESTIMATE = TokenCounter(f"estimate: characters / {CHARS_PER_TOKEN}")


@functools.lru_cache(maxsize=8192)
def _encoded_length(encoding: Any, text: str) -> int:
    # A thread's results are counted again at each turn: the same strings, counted once.
    return len(encoding.encode(text, disallowed_special=()))


def counter_for(model_name: str) -> TokenCounter:
    """The counter for ``"provider:model"``: tiktoken for OpenAI models when it can work
    offline, else the estimate."""
    provider, _, model = model_name.partition(":")
    if provider != "openai":
        return ESTIMATE
    return _tiktoken_counter(model)


@functools.lru_cache(maxsize=64)
def _tiktoken_counter(model: str) -> TokenCounter:
    try:
        import tiktoken
    except ImportError:
        return ESTIMATE
    try:
        name = tiktoken.encoding_name_for_model(model)
    except KeyError:
        name = "o200k_base"  # the encoding of every current OpenAI chat model
    if not _cached(name):
        return ESTIMATE
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception:  # a damaged cache file: tiktoken would fetch it again
        return ESTIMATE
    return TokenCounter(f"tiktoken {name}", encoding)


def _cached(encoding: str) -> bool:
    """Whether tiktoken has ``encoding``'s file without fetching it (its own cache rule)."""
    address = _ENCODING_FILES.get(encoding)
    if address is None:
        return False
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        folder = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        folder = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        import tempfile  # here: it imports shutil and the compression modules

        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if not folder:  # tiktoken keeps no cache then: it would fetch the file
        return False
    import hashlib

    return os.path.exists(os.path.join(folder, hashlib.sha1(address.encode()).hexdigest()))
