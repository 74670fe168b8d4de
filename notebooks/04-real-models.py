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
# # Real models: OpenAI, Ollama, Anthropic
#
# A model is one argument of `define_agent`:
#
# | model | needs |
# |---|---|
# | `"openai:gpt-4.1-mini"` | `OPENAI_API_KEY` (any OpenAI-compatible server: `OPENAI_BASE_URL`, or `OpenAIModel(base_url=...)`) |
# | `"anthropic:claude-sonnet-4-5"` | `ANTHROPIC_API_KEY` |
# | `"ollama:llama3.2"` | a running Ollama (`OLLAMA_HOST`, default `localhost:11434`); no key |
# | a `Model` object | `ReplayModel`, `FunctionModel` (offline, for tests and these notebooks) |
#
# This notebook uses a real model when one of these is set before JupyterLab starts:
# `OPENAI_API_KEY` (model `LOOM_OPENAI_MODEL`, default `gpt-4.1-mini`), `ANTHROPIC_API_KEY`
# (`LOOM_ANTHROPIC_MODEL`, default `claude-sonnet-4-5`), or `LOOM_OLLAMA_MODEL` (e.g.
# `llama3.2`). Otherwise it uses a **replay model**: scripted replies, clearly labelled, no
# network.

# %%
# %load_ext loom_nb

# %%
import os
from loom_nb import FunctionModel, Reply

if os.environ.get("OPENAI_API_KEY"):
    MODEL = "openai:" + os.environ.get("LOOM_OPENAI_MODEL", "gpt-4.1-mini")
elif os.environ.get("ANTHROPIC_API_KEY"):
    MODEL = "anthropic:" + os.environ.get("LOOM_ANTHROPIC_MODEL", "claude-sonnet-4-5")
elif os.environ.get("LOOM_OLLAMA_MODEL"):
    MODEL = "ollama:" + os.environ["LOOM_OLLAMA_MODEL"]
else:
    # OFFLINE REPLAY MODEL: these scripted replies stand in for an LLM (no network, no key).
    def replay(request):
        if request.messages[-1].role == "tool":  # the aggregate came back: describe it
            return ("North leads with **1,150.00** over 3 sales, then South with 610.00 "
                    "(2 sales) and West with 95.00 (1 sale).")
        if "region" not in request.messages[-1].text.lower():
            return "(replay model) I only know this notebook's question; set a key above."
        return Reply("I'll total the sales by region.", [("frames_aggregate", {
            "table": "sales", "group_by": ["region"],
            "aggregates": [{"fn": "sum", "column": "amount"}, {"fn": "count"}],
            "order": [{"column": "sum_amount", "desc": True}]})])
    MODEL = FunctionModel(replay, name="test:replay")
if isinstance(MODEL, str):
    from loom_nb.models import resolve_model

    print("MODEL:", repr(resolve_model(MODEL)))  # and the server it talks to
else:
    print("MODEL: offline replay model (scripted, no LLM)")

# %%
import pandas as pd
from loom_nb import define_agent
from loom_nb.frames import frame_tools

sales = pd.DataFrame({
    "region": ["North", "South", "North", "West", "South", "North"],
    "amount": [400.0, 250.0, 500.0, 95.0, 360.0, 250.0],
})
analyst = define_agent(
    name="analyst", model=MODEL,
    instructions="You answer questions about the sales table. Use the tools; be brief.",
    connectors=[frame_tools({"sales": sales})],
    model_settings={"temperature": 0, "max_tokens": 800},
)
analyst

# %% magic_args="analyst -o by_region" language="loom"
# Which region sells the most? Total the amounts by region.

# %%
by_region

# %% [markdown]
# With a real model, the thread also shows the tokens used (input and output, per run and in
# total), and the text streams in as the model writes it.
#
# ## A budget that pauses, and what a run cost
#
# `budget={"tokens": N}` (or `{"usd": ...}` where the model's price is known) bounds a run:
# before each model turn the run estimates it, and when it would pass the budget the run
# pauses with a card, like an approval. **Continue** grants the same amount again; **Stop**
# ends the run. The card is saved in the thread's store: it survives a kernel restart, and
# `%loom approve CALL_ID` decides it from a terminal. Each run ends with its usage line (the
# thread's tokens in and out and the cost, "price unknown" where the model's price is not
# known, never $0).
#
# To pause at the same place every time, this agent uses a **scripted stand-in** that reports
# fixed token counts and is given prices (US dollars per million tokens); with your own model
# write `budget=` and, for a model the price table does not know, `prices=` the same way.

# %%
from loom_nb import Usage


def scripted(request):  # SCRIPTED STAND-IN: no LLM; reports tokens as a provider would
    if request.messages[-1].role == "tool":
        return Reply("North sells the most: 1,150.00 over 3 sales.", usage=Usage(2900, 60, 1))
    return Reply("I'll total the sales by region.", [("frames_aggregate", {
        "table": "sales", "group_by": ["region"], "aggregates": [{"fn": "sum", "column": "amount"}],
        "order": [{"column": "sum_amount", "desc": True}]})], usage=Usage(2600, 40, 1))


frugal = define_agent(
    name="frugal", model=FunctionModel(scripted, name="test:scripted"),
    connectors=[frame_tools({"sales": sales})],
    budget={"tokens": 4000}, prices={"input": 0.4, "output": 1.6},
)

# %% magic_args="frugal --new" language="loom"
# Which region sells the most?

# %% [markdown]
# The first turn used 2,640 tokens; the second would pass 4,000, so the run waits on the card
# above. **Click Continue.** Without a browser the next cell clicks it from code (if you
# clicked already, it only waits for that run):

# %%
from loom_nb.notebook import session

card = session().last_view.cards[0]      # the budget card shown by the cell above
if card.decision is None:
    card.approve_button.click()
result = card.wait(timeout=30)            # the resumed run
print(result.status, "|", result.output)
print("thread:", result.thread.usage.line())

# %% [markdown]
# `%loom threads` lists each thread with its tokens and cost:

# %%
# %loom threads

# %% [markdown]
# ## Any OpenAI-compatible server
#
# vLLM, llama.cpp's server, LM Studio, OpenRouter and the like speak the OpenAI API: give its
# URL. Making the model sends nothing; the first run does.

# %%
from loom_nb.models.openai import OpenAIModel, ollama

print(repr(OpenAIModel("Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1")))
print(repr(ollama("llama3.2")))   # the same as model="ollama:llama3.2"

# %% [markdown]
# ## When something is missing
#
# A missing key is a clear error at the start of the run, before anything is sent, and it
# names the variable to set. Set it in the environment JupyterLab starts from (or
# `os.environ[...] = ...` in a cell before defining the agent), then run again.

# %%
from loom_nb import LoomError

if not os.environ.get("OPENAI_API_KEY"):
    no_key = define_agent(name="no_key", model="openai:gpt-4.1-mini")
    try:
        no_key.run_sync("Hello?")
    except LoomError as exc:
        print(f"{type(exc).__name__}: {exc}")

# %% [markdown]
# Other failures (wrong model name, rate limits after a few bounded retries, a context that is
# too long, a server that cannot be reached) end the run with one clear error; what completed
# stays in the thread. In a `%%loom` cell the error shows in the thread and the cell fails, so
# "Run All" stops there.
