"""Write the walkthrough notebooks from the cell sources below (no outputs stored).

    python notebooks/_build.py          # rewrite notebooks/*.ipynb
    python notebooks/_build.py --check  # exit 1 when a notebook differs from this file

Edit the cells here, not in the .ipynb files, so that reviews read plain Python. A markdown
cell starts with ``md:``. A cell tagged ``restart-kernel`` is where ``notebooks/run.py``
(``make demo``, the tests) restarts the kernel, as a person would with Kernel > Restart.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
RESTART = "restart-kernel"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def build(cells: list[str | tuple[str, list[str]]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, item in enumerate(cells):
        source, tags = (item, []) if isinstance(item, str) else item
        source = textwrap.dedent(source).strip("\n")
        if source.startswith("md:"):
            cell = nbformat.v4.new_markdown_cell(textwrap.dedent(source[3:]).strip("\n"))
        else:
            cell = nbformat.v4.new_code_cell(source)
        cell["id"] = f"cell-{i:02d}"  # stable ids: rebuilding changes nothing
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    return nb


# ------------------------------------------------------------------------------------------------
QUICKSTART = [
    """md:
    # Quickstart: an agent in your notebook

    You will define an agent over a DataFrame, ask it questions with `%%loom`, keep working with
    the DataFrame it found, approve a change it wants to make, and find the conversation again
    after a kernel restart.

    > **Offline stand-in model.** The agent here talks to `stand_in`, a short scripted function
    > (loom_nb's `FunctionModel`), **not an LLM**: no network, no API key. The data, the tool
    > calls, the approvals and the saved threads are real; only the assistant's wording is
    > scripted, and it describes the real tool results. `04-real-models.ipynb` swaps in OpenAI,
    > Anthropic or Ollama: change one argument, `model=`.
    """,
    "%load_ext loom_nb",
    """md:
    ## 1. Data you already have

    Any DataFrame works. This one is small so that you can check the agent's answers by eye.
    """,
    """
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
    """,
    """md:
    ## 2. The stand-in model

    Skip this cell when you use a real model. `stand_in(request)` gets what a model gets (the
    instructions, the messages, the tool definitions) and answers with text and tool calls. It
    picks a tool call from keywords in your message, and after a tool ran it describes the
    result it was given.
    """,
    '''
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
    ''',
    """md:
    ## 3. The agent

    `frame_tools` gives the agent safe, bounded table tools over the DataFrames you name:
    `frames_list_tables`, `frames_select`, `frames_aggregate`, and, because `orders` is
    writable here, `frames_append` and `frames_update`. Writes wait for your approval.
    `sqlite_store()` keeps every thread in `.loom/loom.db` next to this notebook.
    """,
    """
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
    """,
    """md:
    ## 4. Ask

    `%%loom AGENT` sends the cell to the agent and shows the thread as it streams: your message,
    the assistant's text, each tool call (click to expand), and each result as a table.
    `-o open_big` binds the last DataFrame the agent fetched to a variable.
    """,
    """
    %%loom analyst -o open_big
    Which orders above 100 are still open?
    """,
    """md:
    The DataFrame is yours to keep working with:
    """,
    """
    print(f"{len(open_big)} orders, {open_big.total.sum():,.2f} in total")
    open_big
    """,
    """md:
    ## 5. A write waits for your approval

    The agent wants to change `orders`. The run stops, the cell ends, and a card shows exactly
    what will change, with **Approve** and **Reject**. Nothing is written before you click.
    A click never needs a busy kernel: the run resumes in the background and the card shows
    the outcome.
    """,
    """
    %%loom analyst
    Flag them as priority.
    """,
    """md:
    **Click Approve on the card above.** When this notebook runs without a browser (`make demo`,
    CI, "Run All" before you had time to click), the next cell clicks it from code: `.click()`
    runs the same handler as your mouse. If you clicked already, it does nothing more (a card
    decides once). In a terminal or a script, `%loom approve CALL_ID` does the same.
    """,
    """
    from loom_nb.notebook import session

    card = session().last_view.cards[0]      # the card shown by the cell above
    if card.decision is None:
        card.approve_button.click()
    result = card.wait(timeout=30)            # the resumed run
    print(result.status, "|", result.output)
    """,
    """md:
    Approved, so your DataFrame changed in place:
    """,
    "orders[orders.priority]",
    """md:
    One more change, and this time leave it waiting:
    """,
    """
    %%loom analyst
    Please cancel order 7.
    """,
    (
        """md:
        ## 6. Restart the kernel and resume

        **Restart the kernel now** (Kernel > Restart Kernel), then run the cells below. Your
        variables are gone, as after any restart; the threads are in `.loom/loom.db`, including the
        change still waiting for approval. The next cell sets the agent up again (a real model
        needs no script; the stand-in here only describes the tool result it is given).
        """,
        [RESTART],
    ),
    """
    %load_ext loom_nb
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
        result = request.messages[-1].tool_results[-1]
        if result.approval == "rejected":
            return "Understood: you rejected it, so nothing was changed."
        return f"Done. {result.content.splitlines()[0]}"

    analyst = define_agent(
        name="analyst", model=FunctionModel(stand_in),
        instructions="You help explore our shop's orders.",
        connectors=[frame_tools({"orders": {"frame": orders, "write": True}})],
        store=sqlite_store(),
    )
    """,
    """md:
    Every saved thread, newest first, with the number of calls waiting for approval:
    """,
    "%loom threads analyst",
    """md:
    `%loom resume ID` makes a thread current again and shows it whole, its pending card
    included (you can click it). Here we take the newest thread's id from Python:
    """,
    """
    waiting = analyst.threads()[0]
    print(waiting.title, "|", waiting.pending_count, "pending")
    %loom resume {waiting.id}
    """,
    """md:
    Approve from a line magic (what you would type in terminal IPython); the card above would
    do the same. The agent goes on from where it stopped:
    """,
    """
    call_id = analyst.thread(waiting.id).pending[0].call_id
    %loom approve {call_id}
    """,
    """
    orders.loc[orders.id == 7, ["id", "customer", "status"]]
    """,
    """md:
    The thread goes on where it was: the next `%%loom analyst` continues it (`--new` starts a
    fresh one, `--thread ID` picks one). Next: `02-supabase.ipynb` (your Supabase tables, row
    level security), `03-your-own-connector.ipynb` (your own tools), `04-real-models.ipynb`.
    """,
]


SUPABASE = [
    """md:
    # Your Supabase tables as DataFrames, with row level security and approvals

    `supabase_tools` gives an agent the tables you list, and nothing else. Each run builds a
    client with **the signed-in user's session**, so row level security (RLS) decides what the
    agent can see, exactly as it would for that user in your app. Query results come back as
    pandas DataFrames; inserts and updates wait for your approval.

    This notebook runs in one of three modes, printed below:

    | mode | when | what it talks to |
    |---|---|---|
    | **your Supabase project** | `SUPABASE_URL`, `SUPABASE_ANON_KEY` and `SUPABASE_USER_JWT` (a signed-in user's access token) are set | your project, with the example tables `orders`, `products`, `tickets` |
    | **local test rig** | the same variables point at `127.0.0.1` (start it with `python -m tests.supabase.rig` from the repository; it prints them, the user token as `USER_A_JWT`) | a throwaway PostgreSQL with Supabase's roles and RLS behind a PostgREST-compatible shim |
    | **offline** | none of them | DataFrames shaped like the same tables, through `frame_tools`, the same tools and rules |

    > **Offline stand-in model.** As in the quickstart, the agent's words come from a short
    > script (`FunctionModel`), not an LLM; the tool calls and the data are real.
    > Use `04-real-models.ipynb` to ask your own questions.
    """,
    "%load_ext loom_nb",
    """
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
    """,
    """md:
    ## 1. The connector

    `client=` is a function: loom_nb calls it once per run, with the run's context, and never
    creates a client or touches auth itself. Here it sends the user's access token, so every
    request runs as that user. A second agent, `visitor`, has only the anon key: no user.

    `tables=` is the allowlist: only these tables exist for the agent, only these columns
    (`*` is never sent when `columns` is given), and only `tickets` is writable. The `name=`
    prefix names the tools: `shop_list_tables`, `shop_select`, `shop_insert`, `shop_update`.
    """,
    """
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
    """,
    """md:
    **Offline**, the cell below builds the same tools over DataFrames with `frame_tools`:
    the rows a signed-in user (Ada) would see, and what RLS leaves an anonymous visitor (the
    catalogue, no orders). Nothing enforces RLS here; the frames simply hold what it would return.
    `frame_tools` appends rows where Supabase inserts them, so its write tool is `shop_append`.
    """,
    """
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
    """,
    """md:
    ## 2. The stand-in model and the agents
    """,
    r'''
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
    ''',
    """md:
    ## 3. Queries come back as DataFrames, through RLS

    Signed in, Ada's agent sees her orders, and only hers (RLS filters the rows; the agent
    cannot ask for more):
    """,
    """
    %%loom ada -o my_orders
    Show me my orders.
    """,
    "my_orders.dtypes",
    """md:
    The same question without a user session: RLS lets the anon role read no orders at all.
    """,
    """
    %%loom visitor -o visitor_orders
    Show me my orders.
    """,
    "print(len(visitor_orders), 'orders for the visitor')",
    """md:
    ## 4. Only the allowlist exists

    The database also has a `secrets` table (and, in the test rig, without RLS: anyone with the
    anon key could read it through the REST API). It is not in `tables=`, so for the agent it
    does not exist: the call is refused before any request is made, and the model gets an error
    it can explain.
    """,
    """
    %%loom ada
    What is in the secrets table?
    """,
    """md:
    ## 5. Writes wait for approval

    Inserting a ticket stops the run with an approval card showing the exact rows. Click
    **Approve** (headless runs click it from the next cell; see the quickstart). The inserted
    row comes back as a DataFrame, limited to the allowed columns, and `-o` binds it too.
    """,
    """
    %%loom ada -o new_ticket
    Open a ticket about order 3: it has not shipped yet.
    """,
    """
    from loom_nb.notebook import session

    card = session().last_view.cards[0]
    if card.decision is None:
        card.approve_button.click()
    print(card.wait(timeout=30).status)
    new_ticket
    """,
    """md:
    What you can rely on (each rule is enforced before a request is sent):

    - filters come from a fixed set of operators (`eq`, `neq`, `gt`, `gte`, `lt`, `lte`,
      `like`, `ilike`, `in`, `is_null`, each negatable), on allowed columns only;
    - `limit` is at most `max_rows` (50 by default) and the rows are cut again after the
      response; embeds, casts, JSON paths, raw `or=` filters are refused;
    - an update without a filter is refused; a rejected write writes nothing;
    - PostgREST and RLS errors, and network errors, reach the model as `{"error": ...}` and
      the run goes on.

    Your own tools next to these: `03-your-own-connector.ipynb`.
    """,
]

CONNECTOR = [
    """md:
    # Your own tools and connectors

    An agent can call any Python function you describe as a tool. This notebook shows the three
    ways to write one, packaging tools as a connector, the error you get when two tools share a
    name, approvals on your own tools, and the run context your tools receive.

    > **Offline stand-in model.** The agent's words come from a short script (`FunctionModel`),
    > not an LLM; the tools really run. See `04-real-models.ipynb` for a real model.
    """,
    "%load_ext loom_nb",
    """md:
    ## 1. Tools

    - `@tool` reads the input schema from the type hints and the description from the docstring;
    - `tool(description=..., input=PydanticModel, run=function)` takes a pydantic model (or a
      JSON schema dict) for the input;
    - `needs_approval=` is `True` or a function of the arguments; `preview=` builds what the
      approval card shows;
    - a parameter annotated `RunContext` (or named `ctx`) receives the run context;
    - functions may be sync or async; an exception becomes an error result for the model, and
      the run goes on.
    """,
    r'''
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
    ''',
    """md:
    ## 2. A connector, and a name clash

    `connector(name, tools)` packages tools under a name. Tool names must be unique across an
    agent's tools and all its connectors; `define_agent` refuses a clash at once and names both
    places:
    """,
    """
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
    """,
    """md:
    The fix is to rename one: the key in the dict is the tool's name.
    """,
    r'''
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
    ''',
    """md:
    ## 3. Talk to it
    """,
    """
    %%loom billing_bot
    What is invoice INV-2?
    """,
    """md:
    A tool that raises gives the model an error result; the run goes on:
    """,
    """
    %%loom billing_bot
    And INV-9?
    """,
    """md:
    ## 4. Approvals on your tools

    `needs_approval=lambda args: args["amount"] > 50`: a refund of 20 runs at once...
    """,
    """
    %%loom billing_bot
    Please refund 20 on INV-2.
    """,
    """md:
    ...a refund of 500 waits, with the preview you built. This time we **reject** it (click
    Reject; headless, the next cell clicks it): nothing runs, and the model is told.
    """,
    """
    %%loom billing_bot
    Now refund 500 on INV-3.
    """,
    """
    from loom_nb.notebook import session

    card = session().last_view.cards[0]
    if card.decision is None:
        card.reject_button.click()
    print(card.wait(timeout=30).output)
    print("refunds sent:", refunds)
    """,
    """md:
    ## 5. The run context, and runs from plain Python

    Outside the magics (scripts, tests, your own widgets) use `agent.run_sync(...)` or
    `await agent.run(...)`. `context=` reaches every tool that asks for a `RunContext` (and
    every connector's client factory), with the run's identity: `ctx.agent`, `ctx.thread_id`,
    `ctx.user_id` (with `define_agent(auth=...)`).
    """,
    """
    result = billing_bot.run_sync("Which invoices are overdue?", context={"customer": "acme"})
    print(result.status, "|", result.output)
    result.frames[-1]
    """,
    """md:
    A run that stops for approval returns `status == "awaiting_approval"` with the pending
    calls; `agent.resume_sync(thread_id, {call_id: True or False})` goes on:
    """,
    """
    waiting = billing_bot.run_sync("Refund 500 on INV-3, please.")
    call = waiting.pending[0]
    print(waiting.status, call.tool, call.arguments)
    done = billing_bot.resume_sync(waiting.thread_id, {call.call_id: True})
    print(done.status, "|", done.output, "| refunds sent:", refunds)
    """,
]

MODELS = [
    """md:
    # Real models: OpenAI, Ollama, Anthropic

    A model is one argument of `define_agent`:

    | model | needs |
    |---|---|
    | `"openai:gpt-4.1-mini"` | `OPENAI_API_KEY` (any OpenAI-compatible server: `OPENAI_BASE_URL`, or `OpenAIModel(base_url=...)`) |
    | `"anthropic:claude-sonnet-4-5"` | `ANTHROPIC_API_KEY` |
    | `"ollama:llama3.2"` | a running Ollama (`OLLAMA_HOST`, default `localhost:11434`); no key |
    | a `Model` object | `ReplayModel`, `FunctionModel` (offline, for tests and these notebooks) |

    This notebook uses a real model when one of these is set before JupyterLab starts:
    `OPENAI_API_KEY` (model `LOOM_OPENAI_MODEL`, default `gpt-4.1-mini`), `ANTHROPIC_API_KEY`
    (`LOOM_ANTHROPIC_MODEL`, default `claude-sonnet-4-5`), or `LOOM_OLLAMA_MODEL` (e.g.
    `llama3.2`). Otherwise it uses a **replay model**: scripted replies, clearly labelled, no
    network.
    """,
    "%load_ext loom_nb",
    """
    import os
    from loom_nb import ReplayModel, Reply

    if os.environ.get("OPENAI_API_KEY"):
        MODEL = "openai:" + os.environ.get("LOOM_OPENAI_MODEL", "gpt-4.1-mini")
    elif os.environ.get("ANTHROPIC_API_KEY"):
        MODEL = "anthropic:" + os.environ.get("LOOM_ANTHROPIC_MODEL", "claude-sonnet-4-5")
    elif os.environ.get("LOOM_OLLAMA_MODEL"):
        MODEL = "ollama:" + os.environ["LOOM_OLLAMA_MODEL"]
    else:
        # OFFLINE REPLAY MODEL: these scripted replies stand in for an LLM (no network, no key).
        MODEL = ReplayModel([
            Reply("I'll total the sales by region.", [("frames_aggregate", {
                "table": "sales", "group_by": ["region"],
                "aggregates": [{"fn": "sum", "column": "amount"}, {"fn": "count"}],
                "order": [{"column": "sum_amount", "desc": True}]})]),
            "North leads with **1,150.00** over 3 sales, then South with 610.00 (2 sales) "
            "and West with 95.00 (1 sale).",
        ], name="replay")
    if isinstance(MODEL, str):
        from loom_nb.models import resolve_model

        print("MODEL:", repr(resolve_model(MODEL)))  # and the server it talks to
    else:
        print("MODEL: offline replay model (scripted, no LLM)")
    """,
    """
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
    """,
    """
    %%loom analyst -o by_region
    Which region sells the most? Total the amounts by region.
    """,
    "by_region",
    """md:
    With a real model, the thread also shows the tokens used (input and output, per run and in
    total), and the text streams in as the model writes it.

    ## Any OpenAI-compatible server

    vLLM, llama.cpp's server, LM Studio, OpenRouter and the like speak the OpenAI API: give its
    URL. Making the model sends nothing; the first run does.
    """,
    """
    from loom_nb.models.openai import OpenAIModel, ollama

    print(repr(OpenAIModel("Qwen2.5-7B-Instruct", base_url="http://localhost:8000/v1")))
    print(repr(ollama("llama3.2")))   # the same as model="ollama:llama3.2"
    """,
    """md:
    ## When something is missing

    A missing key is a clear error at the start of the run, before anything is sent, and it
    names the variable to set. Set it in the environment JupyterLab starts from (or
    `os.environ[...] = ...` in a cell before defining the agent), then run again.
    """,
    """
    from loom_nb import LoomError

    if not os.environ.get("OPENAI_API_KEY"):
        no_key = define_agent(name="no_key", model="openai:gpt-4.1-mini")
        try:
            no_key.run_sync("Hello?")
        except LoomError as exc:
            print(f"{type(exc).__name__}: {exc}")
    """,
    """md:
    Other failures (wrong model name, rate limits after a few bounded retries, a context that is
    too long, a server that cannot be reached) end the run with one clear error; what completed
    stays in the thread. In a `%%loom` cell the error shows in the thread and the cell fails, so
    "Run All" stops there.
    """,
]


NOTEBOOKS: dict[str, list[str | tuple[str, list[str]]]] = {
    "01-quickstart.ipynb": QUICKSTART,
    "02-supabase.ipynb": SUPABASE,
    "03-your-own-connector.ipynb": CONNECTOR,
    "04-real-models.ipynb": MODELS,
}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, cells in NOTEBOOKS.items():
        text = nbformat.writes(build(cells)) + "\n"
        path = HERE / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text)
    if check and stale:
        print("out of date (run python notebooks/_build.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
