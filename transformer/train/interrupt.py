"""Ctrl-C (SIGINT) and SIGTERM (what Slurm and other schedulers send) stop training cleanly.

The first signal only asks: the current update finishes, the request travels with the update's
stop/save flags (OR-ed over processes, so every rank of a torchrun job stops after the same
update), `checkpoint_last.pt` is written (atomically), one line says how to resume, and the
command exits with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM). A second
Ctrl-C aborts at once (KeyboardInterrupt; the last complete checkpoint stays as it was); a
repeated SIGTERM does not, since schedulers and torchrun send it more than once for one stop.
"""

from __future__ import annotations

import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """Context manager that turns the first SIGINT / SIGTERM into a stop request.

    Handlers can only be installed from the main thread; elsewhere (a training job run from a
    worker thread) the context does nothing and the signals keep their usual effect.

    Args:
        announce: Whether the first signal prints "SIGINT: stopping after this update": the
            main process of a torchrun job says it once for all of them (each gets the signal).

    Attributes:
        received: The signal received first (None until one arrives).
    """

    def __init__(self, announce: bool = True) -> None:
        self.received: signal.Signals | None = None
        self.announce = announce
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._request_stop)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}

    def _request_stop(self, number: int, frame) -> None:
        """A signal: the first is remembered; then a second Ctrl-C aborts, and further
        SIGTERMs change nothing (a scheduler signals every process and torchrun passes its
        own on, so one stop reaches a worker more than once; SIGKILL remains the hard stop)."""
        if self.received is None:
            self.received = signal.Signals(number)
            if number == signal.SIGINT:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                again = " (Ctrl-C again to abort)"
            else:
                again = ""
            if self.announce:  # os.write, not print: the signal may have interrupted a print
                os.write(2, f"{self.received.name}: stopping after this update{again}\n".encode())

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for in this process."""
        return self.received is not None

    @property
    def exit_status(self) -> int:
        """128 + the signal's number (the shell's convention), or 1 when this process received
        none (it stopped because another process of the job did)."""
        return 128 + int(self.received) if self.received is not None else 1
