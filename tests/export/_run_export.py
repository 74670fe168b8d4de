"""Runs exported code cells in IPython, one export after another, each in its own folder and
namespace: ``python -m tests.export._run_export`` reads one JSON request a line (``folder``,
``cells``, ``frames``: a pickle of the variables to define first) and answers one JSON line
(how many cells raised). Cells run through ``InteractiveShell.run_cell``, so magics and shell
escapes would run as a notebook runs them; their output is swallowed."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import sys
from typing import Any, ClassVar

from IPython.core.interactiveshell import InteractiveShell


class Recorder:
    """A supabase client that sends nothing: every method returns it, ``execute`` a response
    without rows."""

    data: ClassVar[list[Any]] = []
    count = 0

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


def main() -> None:
    shell = InteractiveShell.instance()
    out, home = sys.stdout, os.getcwd()
    for line in sys.stdin:
        request = json.loads(line)
        os.chdir(request["folder"])
        shell.reset(new_session=False)
        with open(request["frames"], "rb") as f:
            shell.user_ns.update(pickle.load(f))
        shell.user_ns["make_client"] = lambda ctx: Recorder()
        failed = 0
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for cell in request["cells"]:
                result = shell.run_cell(cell, store_history=False)
                failed += not result.success
        os.chdir(home)  # the folder goes when its test ends
        out.write(json.dumps({"failed": failed}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
