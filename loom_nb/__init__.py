"""loom_nb: LLM agents inside Jupyter notebooks.

``import loom_nb`` stays light: pandas, IPython, ipywidgets, supabase and the model SDKs are
imported only by the parts that need them. It imports the errors, the messages and threads,
and ``%load_ext``'s entry point; every other name's module is imported with the first use of
the name (``define_agent`` brings the agent loop: asyncio, its threads; ``tool`` the tools).
The names defined in private modules carry ``loom_nb`` as their ``__module__``: the path to
import them from.
"""

import sys as _sys
import types as _types
import typing as _typing

from loom_nb import _public
from loom_nb._chart import Chart
from loom_nb._compose import load_ipython_extension
from loom_nb._errors import (
    AuthenticationFailed,
    CallAlreadyDecided,
    ContextTooLong,
    DuplicateToolError,
    HistoryTooLong,
    LoomError,
    MissingAPIKey,
    MissingExtra,
    ModelError,
    ModelNotFound,
    ProviderError,
    ProviderUnreachable,
    RateLimited,
    RunError,
    StepLimitExceeded,
    StoreError,
    StoreTimeout,
    StoreUnreachable,
    ThreadBusy,
    ThreadNotFound,
    ThreadWaiting,
    UserError,
)
from loom_nb._messages import (
    CallState,
    Lease,
    Message,
    PendingApproval,
    Resolution,
    TextPart,
    Thread,
    ThreadInfo,
    ToolCall,
    ToolResult,
    Usage,
)

if _typing.TYPE_CHECKING:
    from loom_nb._agent import Agent, Decision, RunResult, define_agent
    from loom_nb._code import CodeContext
    from loom_nb._context import RunContext
    from loom_nb._eval import EvalReport
    from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
    from loom_nb._numbers import TracedNumber, trace_numbers
    from loom_nb._rules import Rule
    from loom_nb._store import MemoryStore, Store, memory_store
    from loom_nb._tools import Connector, Tool, ToolInputError, ToolOutput, connector, tool
    from loom_nb.models import Model, ModelRequest, TextDelta
    from loom_nb.models.testing import FunctionModel, ReplayModel, Reply

#: The one place the version is written; pyproject.toml reads it from here (hatch).
__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ApprovalRequested",
    "AuthenticationFailed",
    "CallAlreadyDecided",
    "CallState",
    "Chart",
    "CodeContext",
    "Connector",
    "ContextTooLong",
    "Decision",
    "DuplicateToolError",
    "EvalReport",
    "FunctionModel",
    "HistoryTooLong",
    "Lease",
    "LoomError",
    "MemoryStore",
    "Message",
    "MessageAdded",
    "MissingAPIKey",
    "MissingExtra",
    "Model",
    "ModelError",
    "ModelNotFound",
    "ModelRequest",
    "PendingApproval",
    "ProviderError",
    "ProviderUnreachable",
    "RateLimited",
    "ReplayModel",
    "Reply",
    "Resolution",
    "Rule",
    "RunContext",
    "RunError",
    "RunEvent",
    "RunResult",
    "StepLimitExceeded",
    "Store",
    "StoreError",
    "StoreTimeout",
    "StoreUnreachable",
    "TextDelta",
    "TextPart",
    "Thread",
    "ThreadBusy",
    "ThreadInfo",
    "ThreadNotFound",
    "ThreadWaiting",
    "Tool",
    "ToolCall",
    "ToolInputError",
    "ToolOutput",
    "ToolResult",
    "TracedNumber",
    "Usage",
    "UserError",
    "connector",
    "define_agent",
    "load_ipython_extension",
    "memory_store",
    "tool",
    "trace_numbers",
]


#: The names imported on first use, by the module that defines them.
_LAZY = {
    "loom_nb._agent": ("Agent", "Decision", "RunResult", "define_agent"),
    "loom_nb._code": ("CodeContext",),
    "loom_nb._context": ("RunContext",),
    "loom_nb._eval": ("EvalReport",),
    "loom_nb._events": ("ApprovalRequested", "MessageAdded", "RunEvent"),
    "loom_nb._numbers": ("TracedNumber", "trace_numbers"),
    "loom_nb._rules": ("Rule",),
    "loom_nb._store": ("MemoryStore", "Store", "memory_store"),
    "loom_nb._tools": ("Connector", "Tool", "ToolInputError", "ToolOutput", "connector", "tool"),
    "loom_nb.models": ("Model", "ModelRequest", "TextDelta"),
    "loom_nb.models.testing": ("FunctionModel", "ReplayModel", "Reply"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'loom_nb' has no attribute {name!r}")
    # One import statement per module: the import graph (tests/test_imports.py) reads them.
    module: _types.ModuleType
    if home == "loom_nb._agent":
        from loom_nb import _agent as module
    elif home == "loom_nb._code":
        from loom_nb import _code as module
    elif home == "loom_nb._context":
        from loom_nb import _context as module
    elif home == "loom_nb._eval":
        from loom_nb import _eval as module
    elif home == "loom_nb._events":
        from loom_nb import _events as module
    elif home == "loom_nb._numbers":
        from loom_nb import _numbers as module
    elif home == "loom_nb._rules":
        from loom_nb import _rules as module
    elif home == "loom_nb._store":
        from loom_nb import _store as module
    elif home == "loom_nb._tools":
        from loom_nb import _tools as module
    elif home == "loom_nb.models":
        from loom_nb import models as module
    else:
        from loom_nb.models import testing as module
    _publish_loaded()
    return getattr(module, name)


def _publish_loaded() -> None:
    """Name, and publish, the lazy names of every module imported so far: loom_nb's own
    modules import each other (``define_agent`` brings the events and the tools), so their
    values reach users who never named their classes (``agent.tools["x"]`` is a ``Tool``)."""
    for module, names in _LAZY.items():
        loaded = _sys.modules.get(module)
        # a module still being imported (its names not all defined yet) waits for the next time
        if loaded and names[0] not in globals() and all(hasattr(loaded, n) for n in names):
            found = [getattr(loaded, each) for each in names]
            _public.publish(__name__, found)
            globals().update(zip(names, found, strict=True))


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


_public.publish(__name__, [globals()[name] for name in __all__ if name in globals()])
