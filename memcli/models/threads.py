"""How many threads llama.cpp decodes a bulk of passages with: measured, not guessed.

On 2 idle cores, two threads embed e5 passages 1.7x as fast as one (48.6 against 28.5 items/s,
bench/RESULTS.md); with one core busy elsewhere, two threads run at half the speed of one
(16.3 against 29.5), because llama.cpp's threads wait for each other at every layer and spin
while they wait. No setting is right for both, and the load changes while a long import runs.
So a bulk embed (retain, reembed) times its own decodes: it tries each thread count in turn
for a few decodes, keeps the fastest per token for the next PROBE_EVERY decodes, then tries
again. A query is one short decode beside the keyword arm's work and keeps one thread.

MEM_THREADS (or the config's `threads`) set by the user fixes the count for every decode.
"""

from __future__ import annotations

import os

# Decodes each count gets per round of probing, and decodes between rounds.
PROBES = 2
PROBE_EVERY = 48
# More threads than this gave a small model nothing in our measurements, and each more
# thread is one more to wait for at every layer.
MOST_THREADS = 4


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, where the system has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def fixed_threads() -> int | None:
    """The thread count the user set (MEM_THREADS; the CLI and the llm plugin put the
    config's value there), or None to choose."""
    raw = os.environ.get("MEM_THREADS", "").strip()
    return max(1, int(raw)) if raw else None


class ThreadChooser:
    """The thread count for the next bulk decode, from the seconds per token the counts
    measured lately. `next()` says which count to use; `record()` gets what it took."""

    def __init__(self, counts: tuple[int, ...]):
        self.counts = tuple(sorted(set(counts))) or (1,)
        self._probe: list[int] = []  # counts still to try in this round, in order
        self._seen: dict[int, list[float]] = {}
        self._best = self.counts[0]
        self._left = 0  # decodes until the next round of probing

    @classmethod
    def for_machine(cls) -> ThreadChooser:
        fixed = fixed_threads()
        if fixed is not None:
            return cls((fixed,))
        cores = min(usable_cores(), MOST_THREADS)
        return cls(tuple({1, min(cores, 2), cores}))

    @property
    def measured(self) -> dict[int, float]:
        """Mean seconds per token of each count in the latest round of probing."""
        return {n: sum(t) / len(t) for n, t in self._seen.items()}

    @property
    def best(self) -> int:
        return self._best

    @property
    def chooses(self) -> bool:
        return len(self.counts) > 1

    def next(self) -> int:
        if not self.chooses:
            return self.counts[0]
        if not self._probe and self._left <= 0:
            # Interleaved (1, 2, 1, 2), so a change of load lands on every count alike.
            self._probe = list(self.counts) * PROBES
            self._seen = {}
        if self._probe:
            return self._probe[0]
        self._left -= 1
        return self._best

    def record(self, threads: int, seconds: float, tokens: int) -> None:
        if not self.chooses or tokens <= 0:
            return
        if self._probe and self._probe[0] == threads:
            self._probe.pop(0)
            self._seen.setdefault(threads, []).append(seconds / tokens)
            if not self._probe:
                measured = self.measured
                self._best = min(measured, key=measured.__getitem__)
                self._left = PROBE_EVERY
