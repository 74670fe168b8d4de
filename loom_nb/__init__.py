"""loom_nb: LLM agents inside Jupyter notebooks.

``import loom_nb`` stays light: pandas, IPython, ipywidgets, supabase and the model SDKs are
imported only by the parts that need them, and the agent loop (asyncio, its threads) with the
first use of a name that needs it (``define_agent``, ``Agent``, the test models). The names
defined in private modules carry ``loom_nb`` as their ``__module__``: the path to import them
from.
"""

import types as _types
import typing as _typing

from loom_nb import _public
from loom_nb._chart import Chart
from loom_nb._code import CodeContext
from loom_nb._compose import load_ipython_extension
from loom_nb._context import RunContext
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
from loom_nb._eval import EvalReport
from loom_nb._events import ApprovalRequested, MessageAdded, RunEvent
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
from loom_nb._numbers import TracedNumber, trace_numbers
from loom_nb._rules import Rule
from loom_nb._store import MemoryStore, Store, memory_store
from loom_nb._tools import Connector, Tool, ToolInputError, ToolOutput, connector, tool
from loom_nb.models import Model, ModelRequest, TextDelta

if _typing.TYPE_CHECKING:
    from loom_nb._agent import Agent, Decision, RunResult, define_agent
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
_AGENT = ("Agent", "Decision", "RunResult", "define_agent")
_TEST_MODELS = ("FunctionModel", "ReplayModel", "Reply")


def __getattr__(name: str) -> object:
    module: _types.ModuleType
    if name in _AGENT:
        from loom_nb import _agent as module
    elif name in _TEST_MODELS:
        from loom_nb.models import testing as module
    else:
        raise AttributeError(f"module 'loom_nb' has no attribute {name!r}")
    names = _AGENT if name in _AGENT else _TEST_MODELS
    found = [getattr(module, each) for each in names]
    _public.publish(__name__, found)
    globals().update(zip(names, found, strict=True))
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


_public.publish(__name__, [globals()[name] for name in __all__ if name in globals()])
