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
# # Evals from saved threads: which questions get other numbers with another model?
#
# Before you swap the model (a hosted one for a local one) or edit the instructions, you want
# to know which of last month's questions now get different answers. Your saved threads
# already hold those questions with the frames you accepted. Here you will save three
# threads, mark them as an **eval suite**, and replay them with a second model: the report
# says, call by call, which rows are missing, extra or different. Writes are off in an eval:
# every write is refused as in a dry run, so nothing is changed.
#
# > **Offline stand-in models.** The agent talks to `stand_in`, and the eval replays with
# > `careless`: two short scripted functions (loom_nb's `FunctionModel`), **not LLMs**, no
# > network, no API key. `careless` reads "above 100" as above 150. The DataFrames, the saved
# > threads and the comparison are real.

# %%
# %load_ext loom_nb

# %% [markdown]
# ## 1. An agent over orders, and two stand-in models

# %%
import pandas as pd
from loom_nb import FunctionModel, Reply, define_agent
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

orders = pd.DataFrame({
    "id": [1, 2, 3, 4, 5, 6],
    "region": ["north", "south", "north", "east", "south", "east"],
    "total": [50.0, 150.0, 250.0, 120.0, 99.5, 310.0],
    "status": ["open", "open", "closed", "open", "open", "closed"],
})


def select(*filters):
    arguments = {"table": "orders", "filters": [dict(zip(("column", "op", "value"), f, strict=True))
                                                 for f in filters]}
    return Reply("", [("frames_select", arguments)])


def scripted(above):  # OFFLINE STAND-IN MODEL: one call a question, then a sentence
    def answer(request):
        last = request.messages[-1]
        if last.role == "tool":
            return "Here they are: the DataFrame above holds the rows."
        question = last.text.lower()
        if "above 100" in question:
            return select(("total", "gt", above))
        if "open" in question:
            return select(("status", "eq", "open"))
        if "region" in question:
            sums = {"table": "orders", "group_by": ["region"],
                    "aggregates": [{"fn": "sum", "column": "total"}]}
            return Reply("", [("frames_aggregate", sums)])
        return "I am a scripted stand-in: I answer the three questions of this notebook."
    return answer


stand_in = FunctionModel(scripted(above=100), name="test:stand-in")
careless = FunctionModel(scripted(above=150), name="test:careless")

analyst = define_agent(
    name="analyst", model=stand_in,
    connectors=[frame_tools({"orders": {"frame": orders, "write": True}})],
    store=sqlite_store(),
)

# %% [markdown]
# ## 2. Three saved threads
#
# Each question in a thread of its own, as you would have asked them over a month.

# %% magic_args="analyst --new --result q1" language="loom"
# Which orders are above 100?

# %% magic_args="analyst --new --result q2" language="loom"
# Which orders are still open?

# %% magic_args="analyst --new --result q3" language="loom"
# What is the revenue by region?

# %% [markdown]
# ## 3. Mark them as an eval suite
#
# `%loom eval add ID ...` keeps the suite in the store (here `default`; `--suite NAME` names
# another), so another kernel, or next month, finds it again.

# %%
suite_ids = " ".join(r.thread_id for r in (q1, q2, q3))
# %loom eval add {suite_ids}

# %% [markdown]
# ## 4. Replay the suite with the second model
#
# `%loom eval --model careless` replays each thread's questions with `careless`, writes off,
# in threads that stay out of your thread list, and compares the frames with the ones kept.

# %%
# %loom eval --model careless

# %% [markdown]
# The same as a DataFrame, one row a thread (`agent.eval` takes thread ids too; numbers
# count as equal within `rel_tol=1e-9` unless you pass another):

# %%
report = analyst.eval(suite="default", model=careless)
report.to_frame()[["title", "equal", "calls_different", "missing_rows", "extra_rows",
                   "steps", "kept_steps"]]

# %% [markdown]
# Call by call: the thread that differs, the call, its arguments and the rows it missed.

# %%
wrong = next(t for t in report.threads if not t.equal)
call = wrong.calls[0]
print(wrong.title, "|", call.tool, call.args["filters"], "| kept:", call.kept_args["filters"])
call.missing_rows

# %% [markdown]
# And the agent's own model, replayed, gets every frame it kept:

# %%
print(analyst.eval(suite="default").equal)
