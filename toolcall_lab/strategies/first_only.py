"""``first_only``: the legacy bug of reading ``tool_calls[0]``.

Only the first call runs; the others are recorded as skipped and never answered (the protocol
validator flags the transcript). Kept to measure what the bug costs and hides.
"""

from __future__ import annotations

from toolcall_lab.strategies.base import Strategy, unchanged
from toolcall_lab.strategies.batch import Batch


class FirstOnly(Strategy):
    """Runs the first call of each batch; the rest are skipped, never answered."""

    name = "first_only"
    skips_calls = True

    def runs_as(self) -> str | None:
        return unchanged(self, FirstOnly, "first_only")

    async def run(self, batch: Batch) -> None:
        try:
            await batch._screen(1)  # the others are never looked at: no approval asked, no checks
            at = batch.now()
            batch._started[0] = at
            batch._act(0, at)
            await batch._execute(0, at)
            batch._observe(0)
        finally:  # also when cut off: the rest were never going to run
            for pos in range(1, len(batch._calls)):
                batch._skip(pos)
