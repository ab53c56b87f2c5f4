"""Progress bars: tqdm's, on stderr (redrawn in place on a terminal; elsewhere, a line at most every 30 s).
Nested bars (a network's tasks, then one task's trials) stack as tqdm stacks them."""
import sys

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, label: str, stream=None, unit: str = "it", leave: bool = True):
        stream = stream or sys.stderr
        tty = getattr(stream, "isatty", lambda: False)()
        self._bar = tqdm(total=max(total, 1), desc=label, file=stream, unit=unit, leave=leave, dynamic_ncols=True,
                         mininterval=0.5 if tty else 30.0, ascii=not tty)

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def add(self, n: int) -> None:
        """`n` more steps to go (a network's next round of measurement)."""
        if n:
            self._bar.total += n
            self._bar.refresh()

    def describe(self, label: str) -> None:
        """Say where the run is now, e.g. which task it tunes."""
        self._bar.set_description(label, refresh=True)

    def close(self) -> None:
        self._bar.close()


class Silent:
    """A Progress that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def add(self, n: int) -> None:
        pass

    def describe(self, label: str) -> None:
        pass

    def close(self) -> None:
        pass
