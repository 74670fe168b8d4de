"""A throwaway PostgreSQL server: initdb in a temp dir, listening on 127.0.0.1 only.

Used by the Supabase rig, the PostgreSQL store's tests and ``bench/bench_postgres.py``.
Run as root (CI containers), initdb refuses to work, so the data dir is handed to the
``postgres`` user and the server tools run through ``runuser -u postgres --``.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

SUPERUSER = "postgres"


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: from PATH, else Debian's postgresql lib folder."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        # Debian links /usr/bin/... to a wrapper or the versioned folder; use the real files.
        real = Path(os.path.realpath(found)).parent
        if (real / "pg_ctl").exists():
            return real
        return Path(found).parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(versions[-1]).parent if versions else None


def missing_reason() -> str | None:
    """Why this machine cannot run the rig database, or None when it can."""
    if find_bin_dir() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found; apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root and there is no 'postgres' user to run initdb as"
        if shutil.which("runuser") is None:
            return "running as root and 'runuser' is missing"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Postgres:
    """One server. ``start()`` returns once it accepts connections; ``stop()`` deletes it all."""

    bin_dir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="loom-pg-")))
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    #: Keep PostgreSQL's own durability (fsync): for benchmarks. Tests turn fsync off, as
    #: they crash processes, never the machine; a commit still reaches the OS before it
    #: returns (synchronous commit), so a server killed with ``-m immediate`` keeps it.
    durable: bool = False
    running: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", SUPERUSER, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root, check=False)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{tail}"
            )
        return done

    def start(self) -> Postgres:
        (self.root / "sock").mkdir()
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam(SUPERUSER)
            for path in (self.root, self.root / "sock", pwfile):
                os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(self.root, 0o700)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        pwfile.unlink()
        for attempt in range(3):
            self.port = free_port()
            try:
                self._start_server()
            except RuntimeError:
                if attempt == 2:  # the port was taken between free_port() and start: retry
                    raise
                continue
            return self
        raise AssertionError("unreachable")

    def _start_server(self) -> None:
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={self.port}",
            f"-c unix_socket_directories={self.root / 'sock'}",
            "-c max_connections=40 -c timezone=UTC",
            # Tests keep the server small; a benchmark gets PostgreSQL's default cache, as
            # the servers users run have at least.
            f"-c shared_buffers={'128MB' if self.durable else '16MB'}",
        ]
        if not self.durable:
            options.append("-c fsync=off -c full_page_writes=off")
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            " ".join(options),
            "-w",
            "-t",
            "60",
            "start",
        )
        self.running = True

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl -m mode``) and start it again on the same port, with its
        data: every open connection is cut, as when a database server is restarted."""
        self.halt(mode)
        self._start_server()

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (``start_again()`` brings it back)."""
        if self.running:
            self.running = False
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def start_again(self) -> None:
        self._start_server()

    def dsn(
        self, user: str = SUPERUSER, password: str | None = None, dbname: str = "postgres"
    ) -> str:
        return psycopg.conninfo.make_conninfo(
            host="127.0.0.1",
            port=self.port,
            user=user,
            dbname=dbname,
            password=self.password if password is None else password,
        )

    def connect(self, **kwargs: object) -> psycopg.Connection:
        """A superuser connection (for setup and for checking what really landed)."""
        return psycopg.connect(self.dsn(), autocommit=True, **kwargs)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.running:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            finally:
                self.running = False
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class LoomDatabase:
    """One database set up as the README tells a team to: an owner role that creates and
    migrates the store's schema, and an app role (what kernels connect as) holding only what
    ``grants_sql`` gives. Neither is a superuser."""

    server: Postgres
    dbname: str = "loom_tests"
    owner: str = "loom_owner"
    app: str = "loom_app"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))

    @classmethod
    def create(cls, server: Postgres) -> LoomDatabase:
        db = cls(server)
        with server.connect() as conn:
            for role in (db.owner, db.app):
                conn.execute(
                    psycopg.sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        psycopg.sql.Identifier(role), psycopg.sql.Literal(db.password)
                    )
                )
            conn.execute(
                psycopg.sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    psycopg.sql.Identifier(db.dbname), psycopg.sql.Identifier(db.owner)
                )
            )
        return db

    def dsn(self, role: str | None = None) -> str:
        """A ``postgresql://`` URL for ``role`` (the app role by default)."""
        user = role or self.app
        return f"postgresql://{user}:{self.password}@127.0.0.1:{self.server.port}/{self.dbname}"

    def connect(self, role: str | None = None) -> psycopg.Connection:
        return psycopg.connect(self.dsn(role or self.owner), autocommit=True)

    def new_schema(self, name: str | None = None) -> str:
        """A fresh schema made by the owner (opening a store creates it) and granted to the
        app role; its name."""
        from loom_nb.postgres import grants_sql, postgres_store

        name = name or "t_" + secrets.token_hex(6)
        postgres_store(self.dsn(self.owner), schema=name).close()
        with self.connect() as conn:
            conn.execute(grants_sql(self.app, schema=name))
        return name

    def drop_schema(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(name)
                )
            )
