"""The package's promises: a light import and a typed public surface."""

from __future__ import annotations

import json
import subprocess
import sys

import loom_nb

HEAVY = [
    "pandas",
    "IPython",
    "ipywidgets",
    "supabase",
    "openai",
    "anthropic",
    "numpy",
    "psycopg",
    "psycopg_pool",
]


def test_import_loom_nb_imports_no_heavy_package():
    code = (
        f"import sys, json, loom_nb; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_public_api_is_exported():
    for name in loom_nb.__all__:
        assert hasattr(loom_nb, name), name
    for name in [
        "define_agent",
        "tool",
        "connector",
        "memory_store",
        "ReplayModel",
        "FunctionModel",
    ]:
        assert name in loom_nb.__all__


def test_the_package_ships_type_information():
    from importlib.resources import files

    assert files("loom_nb").joinpath("py.typed").is_file()
