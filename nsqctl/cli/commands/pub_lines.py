"""Which input lines ``nsqctl pub`` published, by line number, for its reports.

A publish that stops part-way must say exactly what was stored: counts alone mislead once
batches are pipelined (a batch after a failed one may be stored) and the library numbers
messages within a batch. ``pub`` launches its batches in input order and stops launching
at the first failure, so three facts describe any outcome: the last input line launched,
the lines of the batches that were launched but not confirmed, and, for bad input, the
line refused. Everything launched and not unconfirmed was published; nothing after the
last launched line was sent. A launched line can also be known unsent: the library refused
its batch before writing it (bad input, such as a partition the topic cannot have); saying
those were "sent but not confirmed" would have the operator fear duplicates that cannot
exist. For the same reason a line nsqd refused (its answer says it stored none of the
command) is said refused, not unconfirmed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nsqctl.cli.commands.pub_input import Batch

Span = tuple[int, int]  # first and last input line, inclusive

#: spans a message names before it says "and N more" (one line, not the whole input)
SHOWN_SPANS = 6


def spans_of(batch: Batch) -> list[Span]:
    """The input lines of ``batch`` as spans (a span per run without a blank line)."""
    if not batch.bodies:
        return []
    if batch.numbers is None:
        return [(batch.first, batch.first + len(batch) - 1)]
    return merge((n, n) for n in batch.numbers)


def merge(spans: Iterable[Span]) -> list[Span]:
    """Sorted, overlapping and adjacent spans joined."""
    out: list[Span] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def text_of(spans: list[Span]) -> str:
    """``1-200, 301-305`` (the first :data:`SHOWN_SPANS`, then how many more)."""
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in spans[:SHOWN_SPANS]]
    if len(spans) > SHOWN_SPANS:
        parts.append(f"and {len(spans) - SHOWN_SPANS} more span(s) (--json lists them all)")
    return ", ".join(parts)


@dataclass
class LineLedger:
    """What ``pub`` launched and what of it was not confirmed, by input line."""

    last_launched: int = 0
    unconfirmed: list[Span] = field(default_factory=list)
    unsent: list[Span] = field(default_factory=list)  # launched, known never written
    refused: list[Span] = field(default_factory=list)  # written, refused whole by nsqd
    too_large: list[int] = field(default_factory=list)  # skipped as asked, not published

    def launched(self, spans: list[Span]) -> None:
        if spans:
            self.last_launched = max(self.last_launched, spans[-1][1])

    def not_confirmed(self, spans: list[Span]) -> None:
        self.unconfirmed.extend(spans)

    def refused_by_nsqd(self, spans: list[Span]) -> None:
        """Lines written that nsqd answered with a refusal of the whole command."""
        self.refused.extend(spans)

    def not_sent(self, spans: list[Span]) -> None:
        """Lines launched but never written to an nsqd (see the module doc)."""
        self.unsent.extend(spans)

    def _last_sent(self) -> int:
        """The last launched line that was not known unsent (0: none)."""
        last = self.last_launched
        for first, end in reversed(merge(self.unsent)):
            if first <= last <= end:
                last = first - 1
        return last

    def skipped(self, number: int) -> None:
        """Line ``number`` was skipped as too large (perhaps after nsqd refused it)."""
        for said in (self.unconfirmed, self.refused):
            if (number, number) in said:
                said.remove((number, number))
        self.too_large.append(number)

    def published(self) -> list[Span]:
        """The lines up to the last launched one, less those not confirmed (a blank line
        inside a published span was skipped, not published)."""
        out: list[Span] = []
        start = 1
        lost = [
            *self.unconfirmed,
            *self.unsent,
            *self.refused,
            *((n, n) for n in self.too_large),
        ]
        for first, last in merge(lost):
            if first > start:
                out.append((start, first - 1))
            start = max(start, last + 1)
        if start <= self.last_launched:
            out.append((start, self.last_launched))
        return out

    def to_json(self) -> dict[str, Any]:
        """Every line by what became of it, as ``[first, last]`` spans, whole (the error
        line shows the first few of each): what a script needs to publish again exactly
        what was not, which after a keyed or failed-over publish is no prefix of the
        input. ``sent_up_to``: no line after it went out (0: none did)."""
        return {
            "published": [list(span) for span in self.published()],
            "refused": [list(span) for span in merge(self.refused)],
            "unconfirmed": [list(span) for span in merge(self.unconfirmed)],
            "unsent": [list(span) for span in merge(self.unsent)],
            "sent_up_to": self._last_sent(),
        }

    def describe(self, stopped: bool) -> str:
        """``input lines 1-300 were published; ...`` for an error message; ``stopped``:
        input after the last launched line was left unread or unsent."""
        published = self.published()
        said = (
            f"input line(s) {text_of(published)} were published"
            if published
            else "no input line was published"
        )
        if self.too_large:
            said += f"; line(s) {text_of(merge((n, n) for n in self.too_large))} were skipped"
        refused = merge(self.refused)
        if refused:
            said += f"; line(s) {text_of(refused)} were refused by nsqd (not stored)"
        unconfirmed = merge(self.unconfirmed)
        if unconfirmed:
            said += f"; line(s) {text_of(unconfirmed)} were sent but not confirmed"
        last_sent = self._last_sent()
        # unsent lines after the last one sent are told by "nothing after ... was sent"
        unsent = [span for span in merge(self.unsent) if span[0] <= last_sent]
        if unsent:
            said += f"; line(s) {text_of(unsent)} were not sent (no nsqd got them)"
        if stopped:
            if last_sent:
                said += f"; nothing after line {last_sent} was sent"
            else:
                said += "; nothing was sent"
        return said
