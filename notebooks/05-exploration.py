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
# # Exploration: a question, a weekly aggregate, a chart, and the thread as a notebook
#
# You will ask "which orders above 100 are still open? Plot them by week", watch the agent
# total them by week and chart that result, then export the thread as a notebook that redoes
# it without the agent, run that notebook, and check that it gives the same frame.
#
# > **Offline stand-in model.** The agent here talks to `stand_in`, a short scripted function
# > (loom_nb's `FunctionModel`), **not an LLM**: no network, no API key. The data, the tool
# > calls, the chart, the saved thread and the export are real; only the assistant's wording
# > is scripted, and it describes the real tool results. `04-real-models.ipynb` swaps in
# > OpenAI, Anthropic or Ollama: change one argument, `model=`.

# %%
# %load_ext loom_nb

# %% [markdown]
# ## 1. Orders over a few months
#
# `created_at` is a datetime column, so the agent can group it by day, week, month, quarter or
# year.

# %%
import pandas as pd

orders = pd.DataFrame({
    "id": range(1, 13),
    "status": ["open", "shipped", "open", "open", "cancelled", "open",
               "open", "shipped", "open", "open", "open", "shipped"],
    "total": [120.5, 35.0, 310.0, 99.0, 150.0, 205.0, 180.25, 64.0, 410.0, 130.0, 88.0, 240.0],
    "created_at": pd.to_datetime(["2026-01-05 09:30", "2026-01-07 14:00", "2026-01-08 11:15",
                                  "2026-01-20 16:45", "2026-01-22 10:00", "2026-02-02 08:20",
                                  "2026-02-04 13:05", "2026-02-18 17:30", "2026-03-02 12:00",
                                  "2026-03-05 15:40", "2026-03-16 09:10", "2026-03-18 11:25"]),
})
orders

# %% [markdown]
# ## 2. The stand-in model
#
# Skip this cell when you use a real model. `stand_in(request)` gets what a model gets and
# answers with text and tool calls: for the question, a weekly `frames_aggregate` of the open
# orders above 100; after it, a `chart` of that result, named by the id of the call that
# fetched it; after the chart, a sentence built from the weekly rows it was given.

# %%
from loom_nb import FunctionModel, Reply

def stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "user":
        return Reply("I'll total the open orders above 100 by week.", [("frames_aggregate", {
            "table": "orders",
            "filters": [{"column": "status", "op": "eq", "value": "open"},
                        {"column": "total", "op": "gt", "value": 100}],
            "group_by": [{"column": "created_at", "bucket": "week"}],
            "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
            "order": [{"column": "week_created_at"}],
        })])
    weekly = next(r for m in request.messages for r in m.tool_results
                  if r.name == "frames_aggregate")
    if last.tool_results[-1].name == "frames_aggregate":
        return Reply("Now a bar chart of those weeks.", [("chart", {
            "result": weekly.call_id, "kind": "bar", "x": "week_created_at", "y": "sum_total",
            "title": "Open orders above 100, by week",
        })])
    df = weekly.data
    top = df.loc[df.sum_total.idxmax()]
    return (f"**{int(df['count'].sum())}** open orders above 100 in **{len(df)}** weeks; the "
            f"week of {top.week_created_at:%d %b} has the most ({top.sum_total:,.2f}).")


# %% [markdown]
# ## 3. The agent
#
# `frame_tools` gives the agent read-only table tools over `orders`; `chart_tools()` adds the
# `chart` tool, which draws an earlier result of the thread with matplotlib. `sqlite_store()`
# keeps every thread in `.loom/loom.db` next to this notebook.

# %%
from loom_nb import define_agent
from loom_nb.charts import chart_tools
from loom_nb.frames import frame_tools
from loom_nb.sqlite import sqlite_store

explorer = define_agent(
    name="explorer",
    model=FunctionModel(stand_in),   # OFFLINE STAND-IN; e.g. model="openai:gpt-4.1-mini"
    instructions="You explore our shop's orders. Chart what you find when asked.",
    connectors=[frame_tools({"orders": {"frame": orders}}), chart_tools()],
    store=sqlite_store(),
)
explorer

# %% [markdown]
# ## 4. Ask
#
# Folded, each call reads as its query in words; unfold it to see the pandas code that
# reproduces its result. The chart is drawn in the thread. `-o weekly` binds the weekly frame.

# %% magic_args="explorer -o weekly" language="loom"
# Which orders above 100 are still open? Plot them by week.

# %%
weekly

# %% [markdown]
# The chart is saved in the thread (a small spec with the rows it plots), so it is drawn again
# after a kernel restart. `thread.charts` gives it back; displaying one shows a PNG:

# %%
thread = explorer.thread(explorer.threads()[0].id)
thread.charts[0]

# %% [markdown]
# ## 5. The thread as a notebook
#
# `%loom export --to PATH` writes the current thread as a notebook that redoes it without the
# agent (`explorer.export(thread.id, path)` does the same in a script): the conversation as
# markdown, each tool call as its code, `result_N` for call N.

# %%
# %loom export --to exported/weekly-open-orders.ipynb

# %% [markdown]
# Its first cell lists the variables it expects: here `orders`, the DataFrame of the table
# the agent read. Put ours in front of it, run it in a fresh kernel, and keep its `result_1`
# (the weekly aggregate) to compare:

# %%
import nbformat
from nbclient import NotebookClient

orders.to_pickle("exported/orders.pkl")
exported = nbformat.read("exported/weekly-open-orders.ipynb", as_version=4)
print(exported.cells[0].source)
exported.cells.insert(1, nbformat.v4.new_code_cell(
    'import pandas as pd\norders = pd.read_pickle("orders.pkl")'))
exported.cells.append(nbformat.v4.new_code_cell('result_1.to_pickle("result_1.pkl")'))
NotebookClient(exported, kernel_name="python3", resources={"metadata": {"path": "exported"}},
               # the kernel's log: errors only (ipykernel 7 warns on every start that its
               # local TCP sockets are not encrypted)
               extra_arguments=["--IPKernelApp.log_level=ERROR"]).execute()
print(f"ran {len(exported.cells)} cells in a fresh kernel")

# %% [markdown]
# The code the export wrote for the aggregate, time bucket included:

# %%
print(next(c.source for c in exported.cells if "result_1 =" in c.source))

# %% [markdown]
# Same frame as the thread's, value for value and dtype for dtype:

# %%
redone = pd.read_pickle("exported/result_1.pkl")
pd.testing.assert_frame_equal(redone, thread.frames[0])
print(f"the exported notebook gives the thread's frame: {len(redone)} weeks, "
      f"{redone.sum_total.sum():,.2f} in total")

# %% [markdown]
# ## 6. Every row, and two tables
#
# The agent sees at most `max_rows` rows of a result (50 here); the DataFrame you get holds
# every matching row or group, up to `frame_rows` (10,000 by default), and every view says how
# many came back. Here: a year of 20,000 orders and their customers, with the relationship
# between them declared, so the agent may join them and nothing else.

# %%
import numpy as np

rng = np.random.default_rng(2026)
customers = pd.DataFrame({
    "id": np.arange(1, 501),
    "tier": rng.choice(["basic", "plus", "gold"], 500, p=[0.6, 0.3, 0.1]),
})
year = pd.DataFrame({
    "id": np.arange(1, 20_001),
    "customer_id": rng.integers(1, 501, 20_000),
    "total": rng.gamma(2.0, 40.0, 20_000).round(2),
    "created_at": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.uniform(0, 366, 20_000), "D"),
})
year.head()

# %% [markdown]
# The stand-in's script: revenue by customer tier with its 90th percentile (a join), the
# distribution of every order's total (bins computed over all 20,000 rows, then a histogram of
# them), and orders per week over the whole year (53 weeks, each bar one week wide).

# %%
QUESTIONS = {
    "Revenue by customer tier?": [("frames_aggregate", {
        "table": "orders", "join": ["customers"], "group_by": ["customers.tier"],
        "aggregates": [{"fn": "sum", "column": "total"},
                       {"fn": "percentile", "column": "total", "p": 0.9}],
        "order": [{"column": "sum_total", "desc": True}],
    })],
    "How are order totals distributed?": [("frames_aggregate", {
        "table": "orders", "group_by": [{"column": "total", "bins": 20}],
    })],
    "Orders per week this year?": [("frames_aggregate", {
        "table": "orders", "group_by": [{"column": "created_at", "bucket": "week"}],
    })],
}
CHARTS = {
    "How are order totals distributed?": {"kind": "histogram", "x": "bin_total", "y": "count",
                                          "title": "Order totals, every order"},
    "Orders per week this year?": {"kind": "bar", "x": "week_created_at", "y": "count",
                                   "title": "Orders per week, 2024"},
}

def stand_in_2(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    asked = next(m.text for m in reversed(request.messages) if m.role == "user")
    last = request.messages[-1]
    if last.role == "user" and asked not in QUESTIONS:  # a question of your own
        return ("(stand-in model) I only know this notebook's three questions. Use a real "
                "model to ask anything: see 04-real-models.ipynb.")
    if last.role == "user":
        return Reply("Let me compute that over every order.", QUESTIONS[asked])
    result = last.tool_results[-1]
    if result.name == "frames_aggregate" and asked in CHARTS:
        return Reply("And a chart of it.", [("chart", {"result": result.call_id,
                                                       **CHARTS[asked]})])
    start = max(i for i, m in enumerate(request.messages) if m.role == "user")
    frame = [r for m in request.messages[start:] for r in m.tool_results
             if r.name == "frames_aggregate"][-1].data
    if "customers.tier" in frame:
        top = frame.iloc[0]
        return (f"**{top['customers.tier']}** customers bring the most revenue "
                f"({top.sum_total:,.2f}); 90% of their orders are under {top.p90_total:,.2f}.")
    return f"Done: {len(frame)} {'bins' if 'bin_total' in frame else 'weeks'}, every order counted."


analyst = define_agent(
    name="analyst",
    model=FunctionModel(stand_in_2),   # OFFLINE STAND-IN
    connectors=[
        frame_tools({"orders": year, "customers": customers},
                    relationships={"orders.customer_id": "customers.id"}),
        chart_tools(),
    ],
    store=sqlite_store(".loom/analyst.db"),
)

# %% [markdown]
# The join reads as words (`join customers on orders.customer_id = customers.id`) and, unfolded,
# as the pandas `merge` that reproduces it:

# %% magic_args="analyst -o tiers" language="loom"
# Revenue by customer tier?

# %%
tiers

# %% [markdown]
# The hand-written pandas for the same answer:

# %%
by_hand = year.merge(customers, left_on="customer_id", right_on="id").groupby("tier")["total"]
print(by_hand.sum().round(2).to_dict())
print(by_hand.quantile(0.9).round(2).to_dict())

# %% [markdown]
# A histogram over every row: the bins are an aggregate of all 20,000 orders, not a picture of
# the 50 rows the model sees. `bin_total` holds each bin's left edge.

# %% magic_args="analyst -o bins" language="loom"
# How are order totals distributed?

# %%
print(f"{int(bins['count'].sum()):,} orders in {len(bins)} of 20 bins (empty bins are not rows)")

# %% [markdown]
# A weekly chart with all its weeks: 53 groups, more than `max_rows`, all in your frame and
# on the chart, each bar one week wide and labelled with its ISO week.

# %% magic_args="analyst -o weeks" language="loom"
# Orders per week this year?

# %%
print(weeks.shape, weeks.attrs["loom"]["matched"], "weeks matched")
analyst.thread(analyst.threads()[0].id).charts[-1]

# %% [markdown]
# ## Numbers you can check
#
# Every number an answer states is traced to the thread's tool results: shown in one, or
# derived from one by a stated rule (a sum, count, mean, difference, ratio, rounding). A
# number in no result is marked "in no result" in the view, the saved copy and the export;
# the fold under the answer says where each other number came from. This stand-in counts
# the open orders, then invents last quarter's figure: it is marked.
# (`define_agent(check_numbers="strict")` would send it back to the model once first.)

# %%
from loom_nb import ReplayModel, memory_store, trace_numbers

careless = define_agent(
    name="careless",
    model=ReplayModel([  # OFFLINE STAND-IN MODEL: two scripted turns, not an LLM
        Reply("Counting.", [("frames_aggregate", {
            "table": "orders",
            "filters": [{"column": "status", "op": "eq", "value": "open"}],
            "aggregates": [{"fn": "count"}, {"fn": "sum", "column": "total"}],
        })]),
        "There are **8** open orders, worth 1,542.75 in all; last quarter there were 11.",
    ] * 5),  # the same two turns each time the next cell is run
    connectors=[frame_tools({"orders": {"frame": orders}})],
    store=memory_store(),
)

# %% magic_args="careless" language="loom"
# How many orders are open?

# %%
[(n.text, n.rule, n.call_id) for n in trace_numbers(careless.thread(careless.threads()[0].id))]

# %% [markdown]
# Next: `01-quickstart.ipynb` (approvals, kernel restart), `02-supabase.ipynb` (your Supabase
# tables), `03-your-own-connector.ipynb` (your own tools, with `describe=` and `code=` so they
# read as words and export as code), `04-real-models.ipynb`.
