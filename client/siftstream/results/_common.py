"""What every answer's parsing shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Self, TypeVar

Json = dict[str, Any]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _seen(rows_seen: int | None, features_seen: int | None) -> int:
    return rows_seen if rows_seen is not None else (features_seen or 0)


Item = TypeVar("Item")


@dataclass(frozen=True)
class Page(Generic[Item]):
    """One page of a listing: its ``items``, and ``next``, the ``after`` of the following page
    (None on the last).

    A listing's page says which key of the answer holds its items (``items_key``: the answer
    names them, ``"selectors"``, ``"streams"``) and how one item reads (``read_item``).
    """

    items: list[Item]
    next: str | None

    #: The key of the answer that holds the items.
    items_key: ClassVar[str]

    @classmethod
    def read_item(cls, doc: Json) -> Item:
        raise NotImplementedError

    @classmethod
    def from_json(cls, doc: Json) -> Self:
        following = doc.get("next")
        return cls(
            [cls.read_item(item) for item in doc[cls.items_key]],
            None if following is None else str(following),
        )
