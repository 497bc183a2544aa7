"""The embedded Redis: a ``redis-server`` the service starts, supervises and stops, in parts.

``binary`` finds the executable (and says why that one); ``directory`` owns the data
directory (its files, its one owner, what an earlier run left); ``server`` is the child
process (configuration, start, restart, stop); ``supervisor`` restarts it when it exits and
says what happened.
"""

from service.store.embedded.binary import RedisBinary, find_redis_server, locate_redis_server
from service.store.embedded.directory import PIDFILE
from service.store.embedded.server import EmbeddedRedis
from service.store.embedded.supervisor import (
    Incident,
    RedisSupervisor,
    SupervisedState,
    SupervisorTimings,
    describe_exit,
)

__all__ = [
    "PIDFILE",
    "EmbeddedRedis",
    "Incident",
    "RedisBinary",
    "RedisSupervisor",
    "SupervisedState",
    "SupervisorTimings",
    "describe_exit",
    "find_redis_server",
    "locate_redis_server",
]
