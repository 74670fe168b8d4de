"""A module defining agents at its top level, as ``python -m loom_nb.http`` serves them (on
the store ``LOOM_STORE`` names)."""

from tests.http import agents

notes, team = agents.make()
