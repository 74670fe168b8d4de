"""What the two SQL stores (``loom_nb.sqlite``, ``loom_nb.postgres``) share: the row forms of a
thread and its messages (``rows``), and the writes that must happen as one step, each written
once over the dialect a store supplies (``steps``)."""
