# ---
# jupyter:
#   jupytext:
#     custom_cell_magics: loom
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Your own tools and connectors
#
# An agent can call any Python function you describe as a tool. This notebook shows the three
# ways to write one, packaging tools as a connector, the error you get when two tools share a
# name, approvals on your own tools, and the run context your tools receive.
#
# > **Offline stand-in model.** The agent's words come from a short script (`FunctionModel`),
# > not an LLM; the tools really run. See `04-real-models.ipynb` for a real model.

# %%
# %load_ext loom_nb

# %% [markdown]
# ## 1. Tools
#
# - `@tool` reads the input schema from the type hints and the description from the docstring;
# - `tool(description=..., input=PydanticModel, run=function)` takes a pydantic model (or a
#   JSON schema dict) for the input;
# - `needs_approval=` is `True` or a function of the arguments; `preview=` builds what the
#   approval card shows;
# - a parameter annotated `RunContext` (or named `ctx`) receives the run context;
# - functions may be sync or async; an exception becomes an error result for the model, and
#   the run goes on.

# %%
import pandas as pd
from pydantic import BaseModel, Field
from loom_nb import RunContext, tool

invoices = pd.DataFrame({
    "id": ["INV-1", "INV-2", "INV-3", "INV-4"],
    "customer": ["acme", "acme", "globex", "acme"],
    "amount": [120.0, 75.5, 980.0, 42.0],
    "days_overdue": [0, 45, 12, 90],
})
refunds = []  # what the refund tool "sent"

@tool
def get_invoice(invoice_id: str) -> dict:
    """Fetch one invoice by its id, like INV-2."""
    match = invoices[invoices.id == invoice_id]
    if match.empty:
        raise LookupError(f"no invoice {invoice_id!r}")
    return match.iloc[0].to_dict()

@tool
async def overdue_invoices(ctx: RunContext, min_days: int = 30) -> pd.DataFrame:
    """The current customer's invoices overdue by at least min_days."""
    customer = ctx.get("customer", "acme")      # what the caller passed as context=
    mine = invoices[(invoices.customer == customer) & (invoices.days_overdue >= min_days)]
    return mine.reset_index(drop=True)

class RefundRequest(BaseModel):
    invoice_id: str = Field(description="The invoice to refund")
    amount: float = Field(gt=0, description="How much to refund")

def send_refund(req: RefundRequest) -> str:
    refunds.append((req.invoice_id, req.amount))
    return f"Refunded {req.amount:.2f} on {req.invoice_id}."

refund = tool(
    name="refund",
    description="Refund part of an invoice.",
    input=RefundRequest,
    run=send_refund,
    needs_approval=lambda args: args["amount"] > 50,   # small refunds go through
    preview=lambda args: {"refund": args["amount"], "invoice": args["invoice_id"]},
)
refund.parameters

# %% [markdown]
# ## 2. A connector, and a name clash
#
# `connector(name, tools)` packages tools under a name. Tool names must be unique across an
# agent's tools and all its connectors; `define_agent` refuses a clash at once and names both
# places:

# %%
from loom_nb import DuplicateToolError, connector, define_agent, memory_store

billing = connector("billing", {"get_invoice": get_invoice, "overdue_invoices": overdue_invoices,
                                "refund": refund})

@tool
def get_invoice_from_crm(invoice_id: str) -> dict:
    "The CRM's copy of an invoice."
    return {"id": invoice_id, "source": "crm"}

crm = connector("crm", {"get_invoice": get_invoice_from_crm})  # same name as billing's tool

try:
    define_agent(name="clash", model="openai:gpt-4.1-mini", connectors=[billing, crm])
except DuplicateToolError as exc:
    print("DuplicateToolError:", exc)

# %% [markdown]
# The fix is to rename one: the key in the dict is the tool's name.

# %%
from loom_nb import FunctionModel, Reply

crm = connector("crm", {"crm_get_invoice": get_invoice_from_crm})

SCRIPT = {  # OFFLINE STAND-IN MODEL: keyword -> (text, tool, arguments)
    "invoice inv-2": ("Let me fetch it.", "get_invoice", {"invoice_id": "INV-2"}),
    "inv-9": ("Let me fetch it.", "get_invoice", {"invoice_id": "INV-9"}),
    "refund 20": ("Refunding 20.00 on INV-2.", "refund", {"invoice_id": "INV-2", "amount": 20}),
    "refund 500": ("A refund of 500.00 on INV-3 needs your approval.", "refund",
                   {"invoice_id": "INV-3", "amount": 500}),
    "overdue": ("Checking overdue invoices.", "overdue_invoices", {"min_days": 30}),
}

def stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "tool":
        r = last.tool_results[-1]
        if r.approval == "rejected":
            return "Understood: you rejected the refund, so nothing was sent."
        if r.is_error:
            return f"That failed: {r.content}"
        if r.name == "refund":
            return f"Done. {r.content}"
        if isinstance(r.data, pd.DataFrame):
            return f"{len(r.data)} overdue: " + ", ".join(r.data.id) + "."
        return f"Here it is: {r.content}"
    for keyword, (text, name, args) in SCRIPT.items():
        if keyword in last.text.lower():
            return Reply(text, [(name, args)])
    return "(stand-in model) I only know this notebook's script."

billing_bot = define_agent(
    name="billing_bot", model=FunctionModel(stand_in),   # OFFLINE STAND-IN
    instructions="You help with billing questions.",
    connectors=[billing, crm], store=memory_store(),
)
sorted(billing_bot.tools)

# %% [markdown]
# ## 3. Talk to it

# %% magic_args="billing_bot" language="loom"
# What is invoice INV-2?

# %% [markdown]
# A tool that raises gives the model an error result; the run goes on:

# %% magic_args="billing_bot" language="loom"
# And INV-9?

# %% [markdown]
# ## 4. Approvals on your tools
#
# `needs_approval=lambda args: args["amount"] > 50`: a refund of 20 runs at once...

# %% magic_args="billing_bot" language="loom"
# Please refund 20 on INV-2.

# %% [markdown]
# ...a refund of 500 waits, with the preview you built. This time we **reject** it (click
# Reject; headless, the next cell clicks it): nothing runs, and the model is told.

# %% magic_args="billing_bot" language="loom"
# Now refund 500 on INV-3.

# %%
from loom_nb.notebook import session

card = session().last_view.cards[0]
if card.decision is None:
    card.reject_button.click()
print(card.wait(timeout=30).output)
print("refunds sent:", refunds)

# %% [markdown]
# ## 5. The run context, and runs from plain Python
#
# Outside the magics (scripts, tests, your own widgets) use `agent.run_sync(...)` or
# `await agent.run(...)`. `context=` reaches every tool that asks for a `RunContext` (and
# every connector's client factory), with the run's identity: `ctx.agent`, `ctx.thread_id`,
# `ctx.user_id` (with `define_agent(auth=...)`).

# %%
result = billing_bot.run_sync("Which invoices are overdue?", context={"customer": "acme"})
print(result.status, "|", result.output)
result.frames[-1]

# %% [markdown]
# A run that stops for approval returns `status == "awaiting_approval"` with the pending
# calls; `agent.resume_sync(thread_id, {call_id: True or False})` goes on:

# %%
waiting = billing_bot.run_sync("Refund 500 on INV-3, please.")
call = waiting.pending[0]
print(waiting.status, call.tool, call.arguments)
done = billing_bot.resume_sync(waiting.thread_id, {call.call_id: True})
print(done.status, "|", done.output, "| refunds sent:", refunds)

# %% [markdown]
# ## 6. MCP, both ways
#
# **An MCP server's tools as a connector.** `mcp_tools(command=[...])` starts a server over
# stdio (`mcp_tools(url=...)` connects to one over HTTP). Its tools are prefixed with the
# connector's `name`; the ones the server does not mark read-only wait for your approval
# (`approve="writes"`, the default); what they return reaches the model inside a data block,
# and tabular results become DataFrames. The server here is the small one loom_nb ships for
# this walkthrough (built on the MCP SDK alone, like any third-party server).

# %%
import sys
import loom_nb.mcp._example as example_server
from loom_nb.mcp import mcp_server, mcp_tools

weather = mcp_tools(command=[sys.executable, example_server.__file__], name="weather")
{name: tool.requires_approval({}) for name, tool in weather.tools.items()}

# %%
WEATHER_SCRIPT = {  # OFFLINE STAND-IN MODEL: keyword -> tool, arguments
    "stations": ("weather_stations", {}),
    "umbrella": ("weather_add_note", {"text": "Take an umbrella to Lisbon."}),
}

def weather_stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "tool":
        r = last.tool_results[-1]
        if isinstance(r.data, pd.DataFrame):
            wettest = r.data.sort_values("rain_mm").iloc[-1]
            return f"The wettest station today is {wettest.station} ({wettest.rain_mm} mm)."
        return f"The server says: {r.content.splitlines()[2]}"
    for keyword, (name, args) in WEATHER_SCRIPT.items():
        if keyword in last.text.lower():
            return Reply("Asking the weather server.", [(name, args)])
    return "(stand-in model) I only know this notebook's script."

forecaster = define_agent(name="forecaster", model=FunctionModel(weather_stand_in),
                          connectors=[weather], store=memory_store())

# %% magic_args="forecaster" language="loom"
# Which of the stations got the most rain today?

# %% [markdown]
# `add_note` is not marked read-only, so it waits for Approve, with its exact arguments:

# %% magic_args="forecaster" language="loom"
# Write a note: umbrella for Lisbon.

# %%
card = session().last_view.cards[0]
if card.decision is None:
    card.approve_button.click()
print(card.wait(timeout=30).output)
weather.close()  # stops the server process (so does the agent's end, or Python's exit)

# %% [markdown]
# **loom_nb as an MCP server.** `mcp_server(connectors=[...])` gives another agent (Claude
# Code, Claude Desktop, Cursor) your connectors with their rules: the same schemas,
# allowlists, bounds and data blocks. A write does not run: it waits as a card in the store,
# decided here with `%loom approvals`, and runs once; the client reads its outcome with the
# `loom_call_status` tool. In a terminal you would serve a module's server with
# `python -m loom_nb.mcp billing_mcp:server --http 8765`; here it is served from the kernel, on
# loopback.

# %%
import socket
import threading
import time
import uvicorn

server = mcp_server(connectors=[billing], store=memory_store(), name="billing_mcp")
billing_mcp = server.agent  # in the notebook's namespace, so %loom approvals finds its cards

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
http = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), host="127.0.0.1",
                                     port=port, log_level="warning"))
threading.Thread(target=http.run, daemon=True).start()
while not http.started:
    time.sleep(0.05)

# %% [markdown]
# The other agent is played by a loom_nb agent using the server through `mcp_tools(url=...)`,
# with its own approvals off (`approve="none"`): the server still holds the write.

# %%
remote = mcp_tools(url=f"http://127.0.0.1:{port}/mcp", name="remote", approve="none")

def other_stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "tool":
        lines = last.tool_results[-1].content.split("\n")
        return lines[2] if len(lines) > 2 else lines[0]  # the line inside the data block
    if "refund" in last.text:
        return Reply("", [("remote_refund", {"invoice_id": "INV-1", "amount": 100})])
    asked = next(r for m in reversed(request.messages) for r in m.tool_results
                 if r.name == "remote_refund")
    ids = {k: asked.data[k] for k in ("thread_id", "call_id")}
    return Reply("", [("remote_loom_call_status", ids)])

other_agent = define_agent(name="other_agent", model=FunctionModel(other_stand_in),
                           connectors=[remote], store=memory_store())
asked = other_agent.run_sync("Please refund 100 on INV-1.")
print(asked.output[:120], "...")
print("refunds sent:", refunds)

# %% [markdown]
# The card waits here, as any card does:

# %%
# %loom approvals

# %%
card = session().last_view.cards[0]
if card.decision is None:
    card.approve_button.click()
card.wait(timeout=30)
print("refunds sent:", refunds)
print(other_agent.run_sync("Did it go through?", thread_id=asked.thread_id).output)
remote.close()
http.should_exit = True
