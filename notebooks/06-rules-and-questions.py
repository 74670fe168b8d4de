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
# # Approvals that scale: a rule for thirty appends, and a question that waits
#
# Cleaning data is many similar writes. One card each is tiring, and turning approvals off
# guards nothing. Here you will allow **writes like these** with one rule bound to what they
# do (the tool, the table, at most 20 rows a call), watch thirty appends go through under it
# while one bigger append still waits for you, and then let the agent **ask you** a question
# instead of guessing, answered with a button after a kernel restart.
#
# > **Offline stand-in model.** The agent here talks to `stand_in`, a short scripted function
# > (loom_nb's `FunctionModel`), **not an LLM**: no network, no API key. The DataFrames, the
# > rule, the cards and the saved threads are real; only the assistant's choices are scripted.

# %%
# %load_ext loom_nb

# %% [markdown]
# ## 1. An inbox of thirty tickets to file
#
# `tickets` is the table the agent may write; `inbox` holds thirty rows to file one by one,
# and a batch of 25 that came in late.

# %%
import pandas as pd
from loom_nb import FunctionModel, Reply, define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

tickets = pd.DataFrame({"id": [1, 2, 3], "subject": ["login", "refund", "export"],
                        "status": ["open", "closed", "open"]})
inbox = [{"id": 100 + i, "subject": f"inbox message {i}", "status": "open"} for i in range(55)]


def stand_in(request):  # OFFLINE STAND-IN MODEL: files the inbox one row at a time, then asks
    last = request.messages[-1]
    if last.role == "user" and "quarter" in last.text:
        return Reply("", [("ask_user", {"question": "Last quarter: fiscal or calendar?",
                                        "choices": ["fiscal", "calendar"]})])
    if last.role == "user" and "inbox" not in last.text:
        return "I can file the inbox into tickets."
    filed = sum(r.name == "frames_append" for m in request.messages for r in m.tool_results)
    if last.role == "tool" and last.tool_results[-1].name == "ask_user":
        return f"Counting by the {last.tool_results[-1].content} quarter: 12 tickets."
    if last.role == "tool" and filed == 31:
        return "Filed 30 rows one by one; the batch of 25 was yours to decide."
    rows = inbox[filed : filed + 1] if filed < 30 else inbox[30:]
    return Reply("", [("frames_append", {"table": "tickets", "rows": rows})])


cleaner = define_agent(
    name="cleaner", model=FunctionModel(stand_in), max_steps=40,
    connectors=[frame_tools({"tickets": {"frame": tickets, "write": True}})],
    store=sqlite_store(),
)

# %% [markdown]
# ## 2. A rule bound to an effect
#
# Start a thread, then allow appends to `tickets` of at most 20 rows, in this thread only. A
# call is approved by the rule only when its effect (tool, table, columns written, the rows its
# card counts) is inside it; anything else waits for you as before.

# %% magic_args="cleaner --result start" language="loom"
# Hello, can you help with the tickets?

# %%
rule = cleaner.allow(tool="frames_append", table="tickets", max_rows=20,
                     scope="thread", thread_id=start.thread_id)
print(rule.describe())

# %% [markdown]
# `%loom rules` lists the rules in force (`%loom revoke RULE_ID` ends one in every kernel):

# %%
# %loom rules

# %% [markdown]
# ## 3. Thirty appends under the rule, one outside it waiting
#
# Each append of one row is inside the rule: the agent files thirty without a card, each
# recorded as if you had clicked Approve, with the rule's id beside it. Then it sends the late
# batch of 25 rows at once: more than 20, outside the rule, so its card waits for you.

# %% magic_args="cleaner --result filed" language="loom"
# File the inbox into tickets.

# %%
ran = [r for m in filed.new_messages for r in m.tool_results]
print(len(tickets), "tickets |", [r.approval for r in ran].count("rule"), "approved by the rule",
      "|", {r.rule for r in ran} == {rule.id})
waiting = filed.pending[0]
print(filed.status, "|", waiting.tool, len(waiting.arguments["rows"]), "rows |", waiting.state)

# %% [markdown]
# Reject the batch from a line (its card above has the same buttons, and "Allow writes like
# this", which would make a rule from this card's effect). Then end the rule:

# %%
if cleaner.thread(filed.thread_id).pending:  # not decided yet (on its card, or by this cell)
    call_id = waiting.call_id
    # %loom reject {call_id}
rule.revoke()

# %% [markdown]
# ## 4. A question instead of a guess
#
# "Last quarter" means two things. The agent asks with its built-in `ask_user` tool
# (`define_agent(ask_user=False)` turns it off). The run stops like a write's card does: the
# question is saved in the thread, with buttons for the choices.

# %% magic_args="cleaner --new --result asked" language="loom"
# How many tickets came in last quarter?

# %% [markdown] tags=["restart-kernel"]
# ## 5. Restart, and answer with a button
#
# **Restart the kernel now** (Kernel > Restart Kernel), then run the cells below. The question
# is in `.loom/loom.db`; any kernel on that file can answer it, once.

# %%
# %load_ext loom_nb
import pandas as pd
from loom_nb import FunctionModel, define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store


def stand_in(request):  # OFFLINE STAND-IN MODEL: reads the answer it was given
    last = request.messages[-1]
    if last.role == "tool":
        return f"Counting by the {last.tool_results[-1].content} quarter: 12 tickets."
    return "(stand-in model) This notebook's script ends here; a real model would go on."


tickets = pd.DataFrame({"id": [1], "subject": ["login"], "status": ["open"]})
cleaner = define_agent(
    name="cleaner", model=FunctionModel(stand_in),
    connectors=[frame_tools({"tickets": {"frame": tickets, "write": True}})],
    store=sqlite_store(),
)

# %% [markdown]
# `%loom approvals` shows every call that waits, questions included, with live buttons:

# %%
# %loom approvals

# %% [markdown]
# Click **fiscal** above; here a cell clicks it for you (the same `on_click` a browser click
# runs). `%loom answer CALL_ID TEXT` does the same from a line, and the HTTP API's
# `POST .../answers` from another program.

# %%
from loom_nb.notebook import session

card = session().last_view.cards[0]
if card.decision is None:  # not answered yet (on the card above, or by this cell)
    card.choice_buttons[0].click()
answered = session().last_view.wait(30)
print(answered.status, "|", answered.output)
