"""``%loom revoke RULE_ID``: end a rule in every kernel (``rule.revoke()``); the next call it
would have decided waits for a person."""

from __future__ import annotations

from IPython.core.error import UsageError

from loom_nb.notebook.session import Session, usage_errors


def run(session: Session, rule_id: str) -> None:
    """Revoke ``rule_id``, a rule of one of the agents here."""
    with usage_errors():
        for agent in session.unique_agents():
            for rule in agent.rules(context=session.context()):
                if rule.id == rule_id:
                    rule.revoke()
                    print(f"revoked {rule.id}: {rule.describe()}")
                    return
    raise UsageError(
        f"no rule {rule_id!r} in force for the agents here; list them with %loom rules"
    )
