"""What every table connector shares (``loom_nb.supabase``, ``loom_nb.frames``, and any later
one): the same configuration, the same query grammar for the model, the same approval rule.

- ``options``: ``tables={...}``, ``name``, ``max_rows``, ``approve_writes``, checked at
  definition time.
- ``grammar``: the model's arguments (table, columns, filters, order, paging, rows, values,
  groups and aggregates) parsed into typed queries, or refused with a reason the model can act
  on; a backend's aggregate tool passes the rules of what it can compute.
- ``schemas``: the JSON schemas that tell the model what it may send.
- ``filter_text``: filters as a person reads them on the approval card.
- ``builder``: the one builder of a connector's tools; a backend supplies its operations.
"""
