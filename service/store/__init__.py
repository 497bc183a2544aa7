"""Persistence: the state codec (arrays <-> bytes, no pickle), Redis store, embedded Redis."""

from service.store.codec import (
    decode_array,
    decode_matrix,
    decode_state,
    encode_array,
    encode_matrix,
    encode_state,
)
from service.store.embedded import EmbeddedRedis, find_redis_server
from service.store.keys import SelectorKeys, compare_stream_ids, next_stream_id
from service.store.records import AppendOutcome, Head, Lease, LogEntry, SelectorMeta
from service.store.redis_store import SelectorStore

__all__ = [
    "AppendOutcome",
    "EmbeddedRedis",
    "Head",
    "Lease",
    "LogEntry",
    "SelectorKeys",
    "SelectorMeta",
    "SelectorStore",
    "compare_stream_ids",
    "decode_array",
    "decode_matrix",
    "decode_state",
    "encode_array",
    "encode_matrix",
    "encode_state",
    "find_redis_server",
    "next_stream_id",
]
