"""A JupyterHub-style identity provider for the extension's tests: each user has a token, and
the server's authenticated user is that user (as JupyterHub's single-user servers have it).

A token arrives as ``Authorization: token T``, as ``?token=T`` (which also sets a cookie, as a
login does), or in that cookie."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.identity import IdentityProvider, User

TOKENS = {"alice-token-0123456789": "alice", "bob-token-0123456789": "bob"}
COOKIE = "loom-test-login"


class TwoUsers(IdentityProvider):  # type: ignore[misc]
    def get_user(self, handler: Any) -> User | None:
        header = handler.request.headers.get("Authorization", "")
        token = header[6:].strip() if header.lower().startswith("token ") else ""
        given = handler.get_query_argument("token", "")
        token = token or given or (handler.get_cookie(COOKIE) or "")
        name = TOKENS.get(token)
        if name is None:
            return None
        if given:
            handler.set_cookie(COOKIE, given, httponly=True)
        return User(username=name, name=name)

    @property
    def auth_enabled(self) -> bool:
        return True
