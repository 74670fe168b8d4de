"""The Supabase test rig: throwaway PostgreSQL with Supabase's roles and RLS, behind a strict
PostgREST-subset shim, with JWTs for two users, anon and the service role.

    rig = Rig.start()            # a few seconds: initdb, server, schema, seed, shim
    create_client(rig.url, rig.anon_key,
                  options=ClientOptions(headers={"Authorization": f"Bearer {rig.jwt(USER_A)}"}))
    rig.reset()                  # back to the seed rows, shim log cleared
    rig.stop()

By hand (for notebooks and demos): ``python -m tests.supabase.rig``.
See ``tests/supabase/conftest.py`` for the pytest fixtures.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import psycopg

from tests.postgres_server import Postgres, find_bin_dir, missing_reason
from tests.supabase.rig.shim import Seen, Shim

__all__ = ["USER_A", "USER_B", "Rig", "RigUser", "Seen", "Shim", "missing_reason"]

HERE = Path(__file__).parent
#: The HS256 secret the shim checks tokens with (a test value, like a local Supabase's).
JWT_SECRET = "loom-nb-rig-jwt-secret-for-tests-only-0123456789"


@dataclass(frozen=True)
class RigUser:
    id: str
    email: str


USER_A = RigUser("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "ada@example.test")
USER_B = RigUser("bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb", "bob@example.test")


def mint_jwt(
    role: str,
    *,
    sub: str | None = None,
    email: str | None = None,
    ttl: int = 3600,
    secret: str = JWT_SECRET,
    **extra: Any,
) -> str:
    """A token shaped like Supabase's: the API keys carry only a role, a user's has sub/email."""
    now = int(time.time())
    claims: dict[str, Any] = {"iss": "loom-nb-rig", "role": role, "iat": now, "exp": now + ttl}
    if sub is not None:
        claims.update(sub=sub, aud="authenticated", email=email)
    claims.update(extra)
    return jwt.encode(claims, secret, algorithm="HS256")


class Rig:
    def __init__(self, db: Postgres, shim: Shim) -> None:
        self.db, self.shim = db, shim
        self.anon_key = mint_jwt("anon", ttl=10 * 365 * 86400)
        self.service_key = mint_jwt("service_role", ttl=10 * 365 * 86400)

    @property
    def url(self) -> str:
        """The project URL to give supabase-py (the REST API lives under /rest/v1)."""
        return self.shim.url

    @classmethod
    def start(cls, port: int = 0) -> Rig:
        reason = missing_reason()
        if reason:
            raise RuntimeError(reason)
        bin_dir = find_bin_dir()
        assert bin_dir is not None
        db = Postgres(bin_dir).start()
        try:
            password = secrets.token_urlsafe(16)
            with db.connect() as conn:
                conn.execute((HERE / "schema.sql").read_text())
                conn.execute(
                    psycopg.sql.SQL("ALTER ROLE authenticator PASSWORD {}").format(
                        psycopg.sql.Literal(password)
                    )
                )
            shim = Shim(db.dsn("authenticator", password), JWT_SECRET, port=port).start()
        except BaseException:
            db.stop()
            raise
        rig = cls(db, shim)
        rig.reset()
        return rig

    def stop(self) -> None:
        try:
            self.shim.stop()
        finally:
            self.db.stop()

    def reset(self) -> None:
        """Back to the seed rows; the shim's log is cleared."""
        with self.db.connect() as conn:
            conn.execute((HERE / "seed.sql").read_text())
        self.shim.clear()

    def jwt(self, user: RigUser, **claims: Any) -> str:
        """A signed-in user's access token (role ``authenticated``)."""
        return mint_jwt("authenticated", sub=user.id, email=user.email, **claims)

    def superuser(self) -> psycopg.Connection:
        """A superuser connection, to check what really landed (RLS does not apply to it)."""
        return self.db.connect()


__all__ += ["JWT_SECRET", "find_bin_dir", "mint_jwt"]
