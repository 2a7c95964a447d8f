"""When held blocks are committed: the batching policy of the initial sync.

During the initial sync the follower asks the store to *hold* the transaction open across
blocks (`Store.apply_block(hold=True)`): several consecutive whole blocks then share one
transaction, committed after `blocks` blocks or `seconds` since the batch began. A kill loses
at most the uncommitted batch, which the restarted follower fetches again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# Enough to make COMMIT and checkpoints rare during a sync, short enough that a kill loses
# little.
DEFAULT_BATCH_BLOCKS = 1000
DEFAULT_BATCH_SECONDS = 0.2
# While the indexes are deferred (the bulk of an initial sync, far below the tip) batches are
# longer: a pool created and spent within one batch is then written once, already spent, instead
# of inserted and updated (`Decoder.flush`), and COMMITs and checkpoints are rarer. Not longer:
# the big tables are keyed in chain order (cauldron migration #5), so a COMMIT costs only its
# new pages, and longer batches only bunch the writer's work into bursts the event loop waits
# for at batch boundaries and at the tip (docs/benchmarks.md, "Figures the code relies on").
BULK_BATCH_BLOCKS = 20_000
BULK_BATCH_SECONDS = 1.0
# Held blocks' writes go to the writer every this many blocks (one pipe write, which wakes the
# writer, per block costs the loop a context switch each on a busy machine); a COMMIT, or any
# request the store awaits, sends them at once.
PACE_BLOCKS = 8


@dataclass(frozen=True, slots=True)
class BatchLimits:
    blocks: int
    seconds: float

    def __post_init__(self) -> None:
        if self.blocks < 1:
            raise ValueError("a batch holds at least one block")


class Batch:
    """The blocks applied in the open transaction and not yet committed."""

    __slots__ = ("bulk", "bulk_run", "held", "since", "usual")

    def __init__(self, usual: BatchLimits, bulk: BatchLimits) -> None:
        self.usual = usual
        self.bulk = bulk
        self.held = 0  # blocks in the open transaction
        self.since = 0.0  # monotonic time the open transaction began
        # Bulk-length batches, from a batch begun with the indexes deferred until the run of
        # held blocks ends (`Store.commit`): the blocks after an early rebuild batch as before.
        self.bulk_run = False

    def begin(self) -> None:
        self.since = time.monotonic()

    def full(self) -> bool:
        limits = self.bulk if self.bulk_run else self.usual
        return self.held >= limits.blocks or time.monotonic() - self.since >= limits.seconds

    def pace_due(self) -> bool:
        """Time to hand the held blocks' writes to the writer (`PACE_BLOCKS`)."""
        return self.held % PACE_BLOCKS == 0

    def reset(self) -> None:
        """The batch ended (committed, or rolled back)."""
        self.held = 0
