"""``KnownHeads``: heads kept for readers only while no notice moved them (pure, no Redis)."""

from __future__ import annotations

import time

from service.applier import KnownHeads
from service.store.records import Head


def head(version: int, incarnation: str = "i1") -> Head:
    return Head(version, f"{version}-0", version, f"state:{version}", 0.0, incarnation=incarnation)


def listening() -> KnownHeads:
    heads = KnownHeads(trusted_seconds=60)
    heads.listening(True)
    return heads


def test_nothing_is_kept_while_not_listening() -> None:
    heads = KnownHeads()
    heads.read("s", head(1), heads.mark())
    heads.committed("s", head(2))
    assert heads.get("s") is None


def test_a_head_read_is_kept_until_a_notice_moves_it() -> None:
    heads = listening()
    heads.read("s", head(3), heads.mark())
    assert heads.get("s") == head(3)
    heads.heard("s", "i1", 3)  # our own commit announced back: no news
    assert heads.get("s") == head(3)
    heads.heard("s", "i1", 4)
    assert heads.get("s") is None


def test_a_head_read_before_a_notice_and_kept_after_it_is_not_kept() -> None:
    """The read raced with a commit: Redis answered version 3, the notice of 4 came while the
    answer travelled. Keeping 3 would serve it until the next commit."""
    heads = listening()
    mark = heads.mark()
    heads.heard("s", "i1", 4)
    heads.read("s", head(3), mark)
    assert heads.get("s") is None
    # A notice of another selector does not matter.
    mark = heads.mark()
    heads.heard("other", "i1", 9)
    heads.read("s", head(4), mark)
    assert heads.get("s") == head(4)


def test_own_commits_replace_the_head_and_older_reads_do_not_come_back() -> None:
    heads = listening()
    mark = heads.mark()
    heads.committed("s", head(5))
    assert heads.get("s") == head(5)
    heads.read("s", head(4), mark)  # read before the commit, answered after it
    assert heads.get("s") == head(5)
    heads.committed("s", head(4))  # never backwards within an incarnation
    assert heads.get("s") == head(5)
    heads.committed("s", head(1, "i2"))  # a new incarnation replaces it
    assert heads.get("s") == head(1, "i2")


def test_a_deletion_or_a_new_incarnation_drops_the_head() -> None:
    heads = listening()
    heads.read("s", head(2), heads.mark())
    heads.heard("s", "i2", 1)
    assert heads.get("s") is None
    heads.read("s", head(2), heads.mark())
    heads.heard("s", "i1", None)
    assert heads.get("s") is None
    heads.read("s", head(2), heads.mark())
    heads.forget("s")
    assert heads.get("s") is None


def test_a_break_of_the_listener_drops_everything_and_reads_in_flight() -> None:
    heads = listening()
    heads.read("s", head(2), heads.mark())
    mark = heads.mark()
    heads.listening(False)
    assert heads.get("s") is None
    heads.listening(True)
    heads.read("s", head(2), mark)  # read before the break: notices may have been missed
    assert heads.get("s") is None
    heads.read("s", head(2), heads.mark())
    assert heads.get("s") == head(2)


def test_a_head_is_read_again_after_the_trusted_time() -> None:
    heads = KnownHeads(trusted_seconds=0.05)
    heads.listening(True)
    heads.read("s", head(2), heads.mark())
    assert heads.get("s") == head(2)
    time.sleep(0.06)
    assert heads.get("s") is None
