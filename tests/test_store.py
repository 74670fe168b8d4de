"""The store contract, on the in-memory store (loom_nb.sqlite has its own tests)."""

from __future__ import annotations

from datetime import timedelta

from loom_nb import Message, Store, Thread, memory_store


def make(store: Store, agent: str = "a", user: str | None = None, text: str = "hi") -> Thread:
    thread = Thread(
        id=f"t{len(store.list(user_id=user, limit=1000))}-{agent}-{user}", agent=agent, user_id=user
    )
    store.save_thread(thread)
    message = Message.user(text)
    thread.messages.append(message)
    store.append(thread, message)
    return thread


def test_memory_store_follows_the_contract():
    store = memory_store()
    assert isinstance(store, Store)
    t1 = make(store, text="about orders")
    t2 = make(store, agent="b", text="about tickets")
    t2.updated_at = t1.updated_at + timedelta(seconds=1)
    store.save_thread(t2)
    assert [t.id for t in store.list()] == [t2.id, t1.id]
    assert [t.id for t in store.list(agent="a")] == [t1.id]
    assert [t.id for t in store.list(limit=1, offset=1)] == [t1.id]
    assert [t.id for t in store.search("ORDERS")] == [t1.id]
    assert store.load(t1.id).messages[0].text == "about orders"
    assert store.list()[0].message_count == 1
    assert store.delete(t1.id) and store.load(t1.id) is None
    assert not store.delete(t1.id)


def test_users_never_see_each_others_threads():
    store = memory_store()
    ann = make(store, user="ann")
    assert store.load(ann.id, user_id="bob") is None
    assert store.load(ann.id) is None  # no auth: only threads without a user
    assert store.list(user_id="bob") == []
    assert store.search("hi", user_id="bob") == []
    assert not store.delete(ann.id, user_id="bob")
    assert store.load(ann.id, user_id="ann") is not None


def test_loaded_threads_are_copies():
    store = memory_store()
    thread = make(store)
    loaded = store.load(thread.id)
    loaded.messages.append(Message.user("not saved"))
    loaded.title = "changed"
    again = store.load(thread.id)
    assert len(again.messages) == 1 and again.title is None
