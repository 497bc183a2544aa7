"""Sources: Sift reading the buses producers already write (Redis Streams, NATS JetStream,
Kafka), exactly once from the bus to the ranking. ``service`` runs them and answers
``/v1/sources``; ``consumer`` consumes one; ``bus`` is the protocol an adapter
(``redis_stream``, ``nats``, ``kafka``, registered in ``adapters``) implements; ``entries``
turns entries into rows; ``spec`` is what a source is."""
