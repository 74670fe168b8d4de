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
# # Quickstart: an agent in your notebook
#
# You will define an agent over a DataFrame, ask it questions with `%%loom`, keep working with
# the DataFrame it found, approve a change it wants to make, and find the conversation again
# after a kernel restart.
#
# > **Offline stand-in model.** The agent here talks to `stand_in`, a short scripted function
# > (loom_nb's `FunctionModel`), **not an LLM**: no network, no API key. The data, the tool
# > calls, the approvals and the saved threads are real; only the assistant's wording is
# > scripted, and it describes the real tool results. `04-real-models.ipynb` swaps in OpenAI,
# > Anthropic or Ollama: change one argument, `model=`.

# %%
# %load_ext loom_nb

# %% [markdown]
# ## 1. Data you already have
#
# Any DataFrame works. This one is small so that you can check the agent's answers by eye.

# %%
import pandas as pd

orders = pd.DataFrame({
    "id": [1, 2, 3, 4, 5, 6, 7, 8],
    "customer": ["Ada", "Bob", "Cleo", "Ada", "Dev", "Bob", "Eve", "Cleo"],
    "status": ["open", "shipped", "open", "open", "cancelled", "shipped", "open", "open"],
    "total": [120.5, 35.0, 310.0, 99.0, 150.0, 42.0, 180.25, 12.0],
    "created_at": pd.to_datetime(["2026-01-05", "2026-01-09", "2026-01-12", "2026-01-20",
                                  "2026-01-22", "2026-02-01", "2026-02-03", "2026-02-10"]),
    "priority": False,
})
orders

# %% [markdown]
# ## 2. The stand-in model
#
# Skip this cell when you use a real model. `stand_in(request)` gets what a model gets (the
# instructions, the messages, the tool definitions) and answers with text and tool calls. It
# picks a tool call from keywords in your message, and after a tool ran it describes the
# result it was given.

# %%
from loom_nb import FunctionModel, Reply

def stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "tool":                          # a tool answered: describe it
        return describe(last.tool_results[-1])
    ask = last.text.lower()
    if "still open" in ask:
        return Reply("Let me look up the open orders above 100.", [("frames_select", {
            "table": "orders",
            "filters": [{"column": "status", "op": "eq", "value": "open"},
                        {"column": "total", "op": "gt", "value": 100}],
            "order": [{"column": "total", "desc": True}],
        })])
    if "priority" in ask:
        ids = [int(i) for i in found(request).id]     # the orders it found before
        return Reply(f"I will flag orders {ids} as priority. That changes your DataFrame, "
                     "so it waits for your approval.", [("frames_update", {
            "table": "orders", "values": {"priority": True},
            "filters": [{"column": "id", "op": "in", "value": ids}],
        })])
    if "cancel order 7" in ask:
        return Reply("I will cancel order 7; it waits for your approval.", [("frames_update", {
            "table": "orders", "values": {"status": "cancelled"},
            "filters": [{"column": "id", "op": "eq", "value": 7}],
        })])
    return ("(stand-in model) I only know this notebook's script. Use a real model to ask "
            "anything: see 04-real-models.ipynb.")

def found(request):
    """The last DataFrame a tool returned in this thread."""
    results = [r for m in request.messages for r in m.tool_results if r.name == "frames_select"]
    return results[-1].data

def describe(result):
    if result.approval == "rejected":
        return "Understood: you rejected it, so nothing was changed."
    if result.is_error:
        return f"The tool answered with an error: {result.content}"
    if result.name == "frames_update":
        return f"Done. {result.content.splitlines()[0]}"
    df = result.data
    rows = ", ".join(f"#{r.id} {r.customer} ({r.total:,.2f})" for r in df.itertuples())
    return f"**{len(df)}** orders are open and above 100: {rows}."


# %% [markdown]
# ## 3. The agent
#
# `frame_tools` gives the agent safe, bounded table tools over the DataFrames you name:
# `frames_list_tables`, `frames_select`, `frames_aggregate`, and, because `orders` is
# writable here, `frames_append` and `frames_update`. Writes wait for your approval.
# `sqlite_store()` keeps every thread in `.loom/loom.db` next to this notebook.

# %%
from loom_nb import define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

analyst = define_agent(
    name="analyst",
    model=FunctionModel(stand_in),   # OFFLINE STAND-IN; e.g. model="openai:gpt-4.1-mini"
    instructions="You help explore our shop's orders.",
    connectors=[frame_tools({"orders": {"frame": orders, "write": True}})],
    store=sqlite_store(),
)
analyst

# %% [markdown]
# ## 4. Ask
#
# `%%loom AGENT` sends the cell to the agent and shows the thread as it streams: your message,
# the assistant's text, each tool call (click to expand), and each result as a table.
# `-o open_big` binds the last DataFrame the agent fetched to a variable.

# %% magic_args="analyst -o open_big" language="loom"
# Which orders above 100 are still open?

# %% [markdown]
# The DataFrame is yours to keep working with:

# %%
print(f"{len(open_big)} orders, {open_big.total.sum():,.2f} in total")
open_big

# %% [markdown]
# ## 5. A write waits for your approval
#
# The agent wants to change `orders`. The run stops, the cell ends, and a card shows exactly
# what will change, with **Approve** and **Reject**. Nothing is written before you click.
# A click never needs a busy kernel: the run resumes in the background and the card shows
# the outcome.

# %% magic_args="analyst" language="loom"
# Flag them as priority.

# %% [markdown]
# **Click Approve on the card above.** When this notebook runs without a browser (`make demo`,
# CI, "Run All" before you had time to click), the next cell clicks it from code: `.click()`
# runs the same handler as your mouse. If you clicked already, it does nothing more (a card
# decides once). In a terminal or a script, `%loom approve CALL_ID` does the same.

# %%
from loom_nb.notebook import session

card = session().last_view.cards[0]      # the card shown by the cell above
if card.decision is None:
    card.approve_button.click()
result = card.wait(timeout=30)            # the resumed run
print(result.status, "|", result.output)

# %% [markdown]
# Approved, so your DataFrame changed in place:

# %%
orders[orders.priority]

# %% [markdown]
# One more change, and this time leave it waiting:

# %% magic_args="analyst" language="loom"
# Please cancel order 7.

# %% [markdown] tags=["restart-kernel"]
# ## 6. Restart the kernel and resume
#
# **Restart the kernel now** (Kernel > Restart Kernel), then run the cells below. Your
# variables are gone, as after any restart; the threads are in `.loom/loom.db`, including the
# change still waiting for approval. The next cell sets the agent up again (a real model
# needs no script; the stand-in here only describes the tool result it is given).

# %%
# %load_ext loom_nb
import pandas as pd
from loom_nb import FunctionModel, define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

orders = pd.DataFrame({  # your data comes back from where it lives; here, the same rows again
    "id": [1, 2, 3, 4, 5, 6, 7, 8],
    "customer": ["Ada", "Bob", "Cleo", "Ada", "Dev", "Bob", "Eve", "Cleo"],
    "status": ["open", "shipped", "open", "open", "cancelled", "shipped", "open", "open"],
    "total": [120.5, 35.0, 310.0, 99.0, 150.0, 42.0, 180.25, 12.0],
    "created_at": pd.to_datetime(["2026-01-05", "2026-01-09", "2026-01-12", "2026-01-20",
                                  "2026-01-22", "2026-02-01", "2026-02-03", "2026-02-10"]),
    "priority": False,
})

def stand_in(request):  # OFFLINE STAND-IN MODEL: describes the tool result it is given
    last = request.messages[-1]
    if last.role == "user":  # a new message: only a real model can answer it
        return ("(stand-in model) After the restart I only describe tool results. Use a real "
                "model to ask anything: see 04-real-models.ipynb.")
    result = last.tool_results[-1]
    if result.approval == "rejected":
        return "Understood: you rejected it, so nothing was changed."
    return f"Done. {result.content.splitlines()[0]}"

analyst = define_agent(
    name="analyst", model=FunctionModel(stand_in),
    instructions="You help explore our shop's orders.",
    connectors=[frame_tools({"orders": {"frame": orders, "write": True}})],
    store=sqlite_store(),
)

# %% [markdown]
# Every saved thread, newest first, with the number of calls waiting for approval:

# %%
# %loom threads analyst

# %% [markdown]
# `%loom resume ID` makes a thread current again and shows it whole, its pending card
# included (you can click it). Here we take the newest thread's id from Python:

# %%
waiting = analyst.threads()[0]
print(waiting.title, "|", waiting.pending_count, "pending")
# %loom resume {waiting.id}

# %% [markdown]
# Approve from a line magic (what you would type in terminal IPython); the card above does
# the same, and if you clicked it already, this cell waits for that run instead. The agent
# goes on from where it stopped:

# %%
from loom_nb.notebook import session

session().wait(timeout=30)   # if you clicked the card, its run ends first
pending = analyst.thread(waiting.id).pending
if pending:                  # not decided yet
    call_id = pending[0].call_id
    # %loom approve {call_id}
else:
    print("Decided on the card above.")

# %%
orders.loc[orders.id == 7, ["id", "customer", "status"]]

# %% [markdown]
# The thread goes on where it was: the next `%%loom analyst` continues it (`--new` starts a
# fresh one, `--thread ID` picks one). Next: `02-supabase.ipynb` (your Supabase tables, row
# level security), `03-your-own-connector.ipynb` (your own tools), `04-real-models.ipynb`.
