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
# # Your Supabase tables as DataFrames, with row level security and approvals
#
# `supabase_tools` gives an agent the tables you list, and nothing else. Each run builds a
# client with **the signed-in user's session**, so row level security (RLS) decides what the
# agent can see, exactly as it would for that user in your app. Query results come back as
# pandas DataFrames; inserts and updates wait for your approval.
#
# This notebook runs in one of three modes, printed below:
#
# | mode | when | what it talks to |
# |---|---|---|
# | **your Supabase project** | `SUPABASE_URL`, `SUPABASE_ANON_KEY` and `SUPABASE_USER_JWT` (a signed-in user's access token) are set | your project, with the example tables `orders`, `products`, `tickets` |
# | **local test rig** | the same variables point at `127.0.0.1` (start it with `python -m tests.supabase.rig` from the repository; it prints them, the user token as `USER_A_JWT`) | a throwaway PostgreSQL with Supabase's roles and RLS behind a PostgREST-compatible shim |
# | **offline** | none of them | DataFrames shaped like the same tables, through `frame_tools`, the same tools and rules |
#
# > **Offline stand-in model.** As in the quickstart, the agent's words come from a short
# > script (`FunctionModel`), not an LLM; the tool calls and the data are real.
# > Use `04-real-models.ipynb` to ask your own questions.

# %%
# %load_ext loom_nb

# %%
import os
from urllib.parse import urlsplit

URL = os.environ.get("SUPABASE_URL")
ANON_KEY = os.environ.get("SUPABASE_ANON_KEY")
USER_JWT = os.environ.get("SUPABASE_USER_JWT") or os.environ.get("USER_A_JWT")

if URL and ANON_KEY and USER_JWT:
    local = urlsplit(URL).hostname in ("127.0.0.1", "localhost", "::1")
    MODE = "local test rig" if local else "your Supabase project"
else:
    MODE = "offline"
print(f"MODE: {MODE}" + (f" ({URL})" if MODE != "offline" else
      " (no SUPABASE_URL / SUPABASE_ANON_KEY / SUPABASE_USER_JWT: DataFrames stand in)"))

# %% [markdown]
# ## 1. The connector
#
# `client=` is a function: loom_nb calls it once per run, with the run's context, and never
# creates a client or touches auth itself. Here it sends the user's access token, so every
# request runs as that user. A second agent, `visitor`, has only the anon key: no user.
#
# `tables=` is the allowlist: only these tables exist for the agent, only these columns
# (`*` is never sent when `columns` is given), and only `tickets` is writable. The `name=`
# prefix names the tools: `shop_list_tables`, `shop_select`, `shop_insert`, `shop_update`.

# %%
TABLES = {
    "orders": {"description": "The user's orders",
               "columns": ["id", "status", "total", "created_at"]},
    "products": {"description": "The catalogue", "columns": ["id", "name", "price", "in_stock"]},
    "tickets": {"description": "Support tickets", "columns": ["id", "subject", "body", "status"],
                "write": True},
}

if MODE != "offline":
    from supabase import ClientOptions, create_client
    from loom_nb.supabase import supabase_tools

    def signed_in(ctx):
        # In an app: the session of the user who is signed in. Here: a token from the env.
        return create_client(URL, ANON_KEY, options=ClientOptions(
            headers={"Authorization": f"Bearer {USER_JWT}"}))

    def anonymous(ctx):
        return create_client(URL, ANON_KEY)

    shop_as_user = supabase_tools(client=signed_in, tables=TABLES, name="shop")
    shop_as_visitor = supabase_tools(client=anonymous, tables=TABLES, name="shop")
    WRITE_TOOL, FILLED_BY_DB = "shop_insert", {}

# %% [markdown]
# **Offline**, the cell below builds the same tools over DataFrames with `frame_tools`:
# the rows a signed-in user (Ada) would see, and what RLS leaves an anonymous visitor (the
# catalogue, no orders). Nothing enforces RLS here; the frames simply hold what it would return.
# `frame_tools` appends rows where Supabase inserts them, so its write tool is `shop_append`.

# %%
if MODE == "offline":
    import pandas as pd
    from loom_nb.frames import frame_tools

    orders = pd.DataFrame({"id": [1, 2, 3], "status": ["paid", "shipped", "new"],
                           "total": [120.50, 35.00, 9.99],
                           "created_at": pd.to_datetime(["2026-01-05 10:00", "2026-01-09 12:30",
                                                         "2026-02-01 08:15"], utc=True)})
    products = pd.DataFrame({"id": [1, 2, 3, 4],
                             "name": ["Widget", "Gadget", "Gizmo", "Doohickey"],
                             "price": [9.99, 35.00, 120.50, 4.25],
                             "in_stock": [True, True, False, True]})
    tickets = pd.DataFrame({"id": [1], "subject": ["Where is my parcel?"],
                            "body": ["Order 2 has not arrived."], "status": ["open"]})
    shop_as_user = frame_tools({
        "orders": {"frame": orders, "description": "The user's orders"},
        "products": {"frame": products, "description": "The catalogue"},
        "tickets": {"frame": tickets, "description": "Support tickets", "write": True},
    }, name="shop")
    shop_as_visitor = frame_tools({
        "orders": {"frame": orders.iloc[0:0], "description": "The user's orders"},
        "products": {"frame": products, "description": "The catalogue"},
    }, name="shop")
    WRITE_TOOL = "shop_append"
    FILLED_BY_DB = {"id": 2, "status": "open"}  # a database fills these in; a DataFrame can't
print(MODE, "|", sorted(shop_as_user.tools))

# %% [markdown]
# ## 2. The stand-in model and the agents

# %%
from loom_nb import FunctionModel, Reply, define_agent
from loom_nb.sqlite import sqlite_store

SCRIPT = {  # OFFLINE STAND-IN MODEL: keyword -> the tool call a model would make
    "my orders": ("Let me fetch your orders.", "shop_select",
                  {"table": "orders", "order": [{"column": "created_at"}]}),
    "in stock": ("Checking the catalogue.", "shop_select",
                 {"table": "products",
                  "filters": [{"column": "in_stock", "op": "eq", "value": True}]}),
    "secrets": ("Let me try the secrets table.", "shop_select", {"table": "secrets"}),
    "ticket": ("I will open a ticket; it waits for your approval.", WRITE_TOOL,
               {"table": "tickets", "rows": [{**FILLED_BY_DB, "subject": "Order 3 is late",
                                               "body": "Order 3 has not shipped yet."}]}),
    "close": ("I will close your open tickets; it waits for your approval.", "shop_update",
              {"table": "tickets", "values": {"status": "closed"},
               "filters": [{"column": "status", "op": "eq", "value": "open"}]}),
}

def stand_in(request):
    """OFFLINE STAND-IN MODEL: a script, not an LLM."""
    last = request.messages[-1]
    if last.role == "tool":
        return describe(last.tool_results[-1])
    for keyword, (text, tool_name, args) in SCRIPT.items():
        if keyword in last.text.lower():
            return Reply(text, [(tool_name, args)])
    return "(stand-in model) I only know this notebook's script; see 04-real-models.ipynb."

def describe(result):
    if result.approval == "rejected":
        return "Understood: you rejected it, so nothing was written."
    if result.is_error:
        return f"That did not work; the tool said: {result.content}"
    df = result.data
    if result.name == "shop_update":
        return f"Done: {len(df)} ticket(s) closed."
    if result.name == WRITE_TOOL:
        return f"Done: ticket {df.id.iloc[0]} ({df.subject.iloc[0]!r}) is {df.status.iloc[0]}."
    if df.empty:
        return "No rows came back: there is nothing here that you may see."
    rows = "".join("\n- " + ", ".join(f"{k} {v}" for k, v in row.items())
                   for row in df.head(5).to_dict("records"))
    return f"**{len(df)}** row(s):{rows}"

store = sqlite_store()
ada = define_agent(name="ada", model=FunctionModel(stand_in), connectors=[shop_as_user],
                   instructions="You help a signed-in customer with their shop data.", store=store)
visitor = define_agent(name="visitor", model=FunctionModel(stand_in),
                       connectors=[shop_as_visitor], store=store,
                       instructions="You help a visitor who is not signed in.")

# %% [markdown]
# ## 3. Queries come back as DataFrames, through RLS
#
# Signed in, Ada's agent sees her orders, and only hers (RLS filters the rows; the agent
# cannot ask for more):

# %% magic_args="ada -o my_orders" language="loom"
# Show me my orders.

# %%
my_orders.dtypes

# %% [markdown]
# The same question without a user session: RLS lets the anon role read no orders at all.

# %% magic_args="visitor -o visitor_orders" language="loom"
# Show me my orders.

# %%
print(len(visitor_orders), 'orders for the visitor')

# %% [markdown]
# ## 4. Only the allowlist exists
#
# The database also has a `secrets` table (and, in the test rig, without RLS: anyone with the
# anon key could read it through the REST API). It is not in `tables=`, so for the agent it
# does not exist: the call is refused before any request is made, and the model gets an error
# it can explain.

# %% magic_args="ada" language="loom"
# What is in the secrets table?

# %% [markdown]
# ## 5. Writes wait for approval
#
# Inserting a ticket stops the run with an approval card showing the exact rows. Click
# **Approve** (headless runs click it from the next cell; see the quickstart). The inserted
# row comes back as a DataFrame, limited to the allowed columns, and `-o` binds it too.

# %% magic_args="ada -o new_ticket" language="loom"
# Open a ticket about order 3: it has not shipped yet.

# %%
from loom_nb.notebook import session

card = session().last_view.cards[0]
if card.decision is None:
    card.approve_button.click()
print(card.wait(timeout=30).status)
new_ticket

# %% [markdown]
# ## 6. An update shows what it will change, and cannot change more
#
# Before the card for an update is shown, the connector counts the rows its filters match,
# through the same user's client (so RLS counts only the rows this user may change), and
# fetches the first few. The card says how many match and shows those rows with each changed
# column as it is and as it will be (`status (now)`, `status (new)`). The approved update is
# sent with supabase-py's `max_affected(n)`: if more rows match by the time you click (a new
# ticket came in), PostgREST changes nothing and the agent and the card say so. Offline,
# `frame_tools` holds its updates to their card the same way.

# %% magic_args="ada" language="loom"
# Please close everything I have open.

# %%
card = session().last_view.cards[0]
print(card.pending.preview["effect"])
card.pending.preview["rows that change"]

# %%
card.approve_button.click()
print(card.wait(timeout=30).status, "|", card.outcome)

# %% [markdown]
# What you can rely on (each rule is enforced before a request is sent):
#
# - filters come from a fixed set of operators (`eq`, `neq`, `gt`, `gte`, `lt`, `lte`,
#   `like`, `ilike`, `in`, `is_null`, each negatable), on allowed columns only;
# - `limit` is at most `max_rows` (50 by default) and the rows are cut again after the
#   response; embeds, casts, JSON paths, raw `or=` filters are refused;
# - an update without a filter is refused; an approved one changes at most the rows its card
#   counted; a rejected write writes nothing;
# - what the card says is what PostgREST runs: a `*` in a `like` pattern (PostgREST reads it
#   as `%`) or a NUL character is refused with advice, `in [""]` is sent as `= ''`;
# - PostgREST and RLS errors, and network errors, reach the model as `{"error": ...}` and
#   the run goes on.
#
# Your own tools next to these: `03-your-own-connector.ipynb`.
