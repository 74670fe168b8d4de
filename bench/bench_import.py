"""``import loom_nb`` and the first ``define_agent``, in fresh processes, next to bare Python and
pydantic-ai (what a user would pick instead), in the same run.

Each case is a whole ``python -c ...`` process, timed from outside, cases taken in turns so the
shared machine's noise falls on all alike; medians. The figures that matter are the differences
from ``python -c pass``. Bytecode is cached in a temporary folder first (one warm-up run of each
case), as an installed package has it, whatever ``PYTHONDONTWRITEBYTECODE`` says. ``--detail``
also prints what ``python -X importtime`` finds slowest in ``import loom_nb``. Beside the wall
clock, each case's CPU time (user + system, from the child's resource usage): on a shared
machine whose CPU quota throttles processes, the wall clock moves in steps of the quota's
period while the CPU time still shows the work.

Run: ``python -m bench.bench_import [--runs 15] [--detail]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LOOKUP = '''
def lookup(city: str, days: int = 1) -> dict:
    """The weather in a city."""
    return {"city": city}
'''

#: The first agent with a plain tool, with the default store (a SQLite file in the folder).
FIRST_LOOM = f"""
from loom_nb import FunctionModel, Reply, define_agent
{LOOKUP}
agent = define_agent(name="a", model=FunctionModel(lambda request: Reply("hi")), tools=[lookup])
"""

FIRST_PYDANTIC_AI = f"""
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
{LOOKUP}
agent = Agent(FunctionModel(lambda messages, info: None))
agent.tool_plain(lookup)
"""

CASES = {
    "python -c pass": "pass",
    "import loom_nb": "import loom_nb",
    "import pydantic_ai": "import pydantic_ai",
    "loom_nb: first define_agent": FIRST_LOOM,
    "pydantic-ai: first Agent": FIRST_PYDANTIC_AI,
}


def environment(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def seconds(code: str, env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def slowest_imports(env: dict[str, str], cwd: str, n: int = 15) -> list[tuple[int, int, str]]:
    """``(self µs, cumulative µs, module)`` of ``import loom_nb``, by cumulative time."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import loom_nb"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self [us]" in line:
            continue
        own, total, name = line.removeprefix("import time:").split("|")
        rows.append((int(own), int(total), name.rstrip()))
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="fresh processes per case")
    parser.add_argument("--detail", action="store_true", help="python -X importtime's slowest")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cwd:
        env = environment(cache)
        for code in CASES.values():  # writes the bytecode
            seconds(code, env, cwd)
        times: dict[str, list[float]] = {name: [] for name in CASES}
        cpu: dict[str, list[float]] = {name: [] for name in CASES}
        for _ in range(args.runs):
            for name, code in CASES.items():
                wall, used = seconds(code, env, cwd)
                times[name].append(wall)
                cpu[name].append(used)
        if args.detail:
            print("python -X importtime -c 'import loom_nb', slowest (cumulative):")
            for own, total, module in slowest_imports(env, cwd):
                print(f"  {total / 1000:7.1f} ms ({own / 1000:5.1f} ms own) {module}")
    ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
    cpu_ms = {name: statistics.median(t) * 1000 for name, t in cpu.items()}
    base, cpu_base = ms["python -c pass"], cpu_ms["python -c pass"]
    print(f"fresh processes, median of {args.runs} each (ms)")
    print(f"{'case':<30} {'wall':>8} {'over pass':>10} {'CPU':>8} {'CPU over pass':>14}")
    for name, value in ms.items():
        used = cpu_ms[name]
        print(
            f"{name:<30} {value:>8.1f} {value - base:>10.1f} {used:>8.1f} {used - cpu_base:>14.1f}"
        )
    for label, table, zero in (("wall", ms, base), ("CPU", cpu_ms, cpu_base)):
        ours, theirs = table["import loom_nb"] - zero, table["import pydantic_ai"] - zero
        first = table["loom_nb: first define_agent"] - zero
        other = table["pydantic-ai: first Agent"] - zero
        print(f"import loom_nb over python -c pass ({label}): {ours:.1f} ms (goal: at most 50 ms)")
        print(
            f"ratio import loom_nb / import pydantic_ai ({label}, over pass): {ours / theirs:.2f}"
        )
        print(f"ratio first define_agent / first pydantic-ai Agent ({label}): {first / other:.2f}")


if __name__ == "__main__":
    main()
