"""The machinery behind :mod:`loom_nb.frames`, whose docstring is the reference for the semantics.

- ``values``: what a JSON value means for a column of a given dtype.
- ``filters``: SQL LIKE as a regex, filter masks, filters as text.
- ``aggregate``: the aggregate tool's schema, parsing and computation.
- ``tables``: the frames the agent may use, their allowed columns and locks.
- ``reads``: the list, select and aggregate tools.
- ``writes``: append and update, checked before approval and done in place.
- ``connector``: the tool definitions.
"""
