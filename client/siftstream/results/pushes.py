"""What a resumable ``sift push`` reports at its end."""

from __future__ import annotations

from dataclasses import dataclass

from siftstream.results.selectors import ChunkReceipt, FeaturesReceipt, Receipt
from siftstream.results.streams import StreamReceipt


@dataclass(frozen=True)
class PushSummary:
    """What pushing an input in chunks did: one receipt per chunk, in order."""

    receipts: list[ChunkReceipt | FeaturesReceipt | StreamReceipt]
    #: Rows (or feature columns) sent.
    items: int

    @property
    def last(self) -> Receipt:
        return self.receipts[-1]

    @property
    def version(self) -> int | None:
        """The version that contains the last chunk (None if it is still pending)."""
        return self.last.version

    @property
    def seen(self) -> int | None:
        """Rows (or features) seen by the selector once the last chunk was applied."""
        return self.last.seen

    @property
    def duplicates(self) -> int:
        """Chunks the service had already applied (answered from their Idempotency-Key)."""
        return sum(r.duplicate for r in self.receipts)
