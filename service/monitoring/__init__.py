"""Watching rankings after every commit: the baseline and the alerts (``monitor``, judged by the
rules of ``service.algorithms.drift``), and the webhooks that carry the alerts (``webhooks``)."""
