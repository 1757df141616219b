"""The progress bar of the demo's training and of rank 0 in `pycumsum-op train`."""


class ProgressBar:
    """A one-line progress bar: redrawn in place on a terminal, a line per quarter otherwise.

    >>> import io
    >>> out = io.StringIO()
    >>> bar = ProgressBar(4, out, width=8)
    >>> for done in range(1, 5):
    ...     bar.update(done, "loss 0.1")
    >>> print(out.getvalue().splitlines()[-1])
      [########] 4/4 loss 0.1
    """

    def __init__(self, total: int, out, width: int = 30):
        self.total, self.out, self.width = total, out, width
        self.live = hasattr(out, "isatty") and out.isatty()
        self._quarters_shown = 0

    def update(self, done: int, note: str = "") -> None:
        filled = self.width * done // self.total
        line = "  [{}{}] {}/{} {}".format("#" * filled, "." * (self.width - filled), done, self.total, note)
        if self.live:
            self.out.write("\r" + line + ("\n" if done == self.total else ""))
            self.out.flush()
        elif 4 * done // self.total > self._quarters_shown:
            self._quarters_shown = 4 * done // self.total
            self.out.write(line + "\n")
