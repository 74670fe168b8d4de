"""Threads in PostgreSQL, for teams: many kernels on many machines (JupyterHub), one database.
A Supabase project's own database works too. Needs ``pip install "loom-nb[postgres]"``.

.. code-block:: python

    from loom_nb.postgres import postgres_store

    store = postgres_store("postgresql://loom@db.internal/analytics")   # or connection=, pool=
    agent = define_agent(..., store=store, auth=lambda ctx: ctx["user"])

The same contract as ``sqlite_store()``: each message appended in one transaction, O(1) at
any length; threads scoped to users; DataFrames with their dtypes; tables in their own schema
(``loom``), created and migrated on open, a schema from a newer loom_nb refused untouched.
:func:`grants_sql` gives a role just the privileges a kernel needs, and
:func:`row_level_security_sql` keeps each user's threads to that user in the database itself.
"""

from __future__ import annotations

try:
    import psycopg  # noqa: F401
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    from loom_nb._errors import MissingExtra

    raise MissingExtra("psycopg", "postgres", "loom_nb.postgres") from None

from loom_nb import _public
from loom_nb.postgres._connections import PostgresStoreError
from loom_nb.postgres._sql import grants_sql, row_level_security_sql
from loom_nb.postgres._store import PostgresStore, postgres_store

__all__ = [
    "PostgresStore",
    "PostgresStoreError",
    "grants_sql",
    "postgres_store",
    "row_level_security_sql",
]

_public.publish(__name__, [PostgresStore, PostgresStoreError, postgres_store])
