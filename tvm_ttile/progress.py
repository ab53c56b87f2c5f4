"""A small progress bar on stderr (redraws in place on a terminal, prints every 10% otherwise)."""
import sys
import time


class Progress:
    def __init__(self, total: int, label: str, stream=None):
        self.total, self.label, self.done = max(total, 1), label, 0
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.start = time.time()
        self._last_decile = -1

    def update(self, n: int = 1) -> None:
        self.done += n
        frac = min(self.done / self.total, 1.0)
        elapsed = time.time() - self.start
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        bar = "#" * int(30 * frac)
        line = f"{self.label} [{bar:<30}] {self.done}/{self.total} {elapsed:5.0f}s eta {eta:4.0f}s"
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif int(frac * 10) != self._last_decile:
            self._last_decile = int(frac * 10)
            self.stream.write(line + "\n")

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        self.stream.flush()


class Silent:
    """A Progress that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass
