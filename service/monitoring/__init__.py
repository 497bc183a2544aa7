"""Watching rankings: how far they moved (``drift``), alerts when they move (``monitor``), and
the webhooks that carry them (``webhooks``)."""
