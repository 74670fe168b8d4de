"""Start the rig by hand and serve until Ctrl-C: ``python -m tests.supabase.rig [--port N]``.

Prints the project URL, the anon and service keys, and a token for each seeded user, e.g. for
the Supabase walkthrough notebook:

    create_client(URL, ANON_KEY, options=ClientOptions(headers={"Authorization": "Bearer " + A}))
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import threading

from tests.supabase.rig import USER_A, USER_B, Rig


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.supabase.rig",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=0, help="port for the REST shim (default: any)")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead")
    args = parser.parse_args()
    rig = Rig.start(port=args.port)
    info = {
        "SUPABASE_URL": rig.url,
        "SUPABASE_ANON_KEY": rig.anon_key,
        "SUPABASE_SERVICE_KEY": rig.service_key,
        "USER_A_JWT": rig.jwt(USER_A, ttl=7 * 86400),
        "USER_B_JWT": rig.jwt(USER_B, ttl=7 * 86400),
        "DATABASE_URL": rig.db.dsn(),
    }
    try:
        if args.json:
            print(json.dumps(info), flush=True)
        else:
            for name, value in info.items():
                print(f"{name}={value}")
            print(
                "Tables: orders, products, tickets (writable), profiles, secrets. "
                "Serving until Ctrl-C.",
                flush=True,
            )
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    finally:
        rig.stop()


if __name__ == "__main__":
    main()
