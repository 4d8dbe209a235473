"""Tests for transformer/train/interrupt.py: the first signal is a request, the second aborts,
and the handlers in place before are put back (checked with real signals to this process)."""

from __future__ import annotations

import os
import signal

import pytest

from transformer.train.interrupt import StopSignals


def test_the_first_ctrl_c_asks_the_second_aborts_and_the_old_handlers_come_back():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with StopSignals() as signals:
        assert not signals.requested
        os.kill(os.getpid(), signal.SIGINT)  # delivered before the next bytecode
        assert signals.received == signal.SIGINT and signals.exit_status == 130
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_sigterm_is_a_request_with_the_shells_status_and_repeats_change_nothing():
    """Slurm signals every process and torchrun passes its own SIGTERM on: one stop reaches a
    worker twice, and the second must not kill it while it saves."""
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == signal.SIGTERM and signals.exit_status == 143
        os.kill(os.getpid(), signal.SIGTERM)  # handled: still alive
        os.kill(os.getpid(), signal.SIGINT)  # the first was no Ctrl-C: still the same request
        assert signals.received == signal.SIGTERM


def test_torchruns_sigterm_after_a_ctrl_c_does_not_abort_the_clean_stop():
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)  # handled: still alive, still the first request
        assert signals.received == signal.SIGINT and signals.exit_status == 130


def test_a_process_that_received_nothing_exits_with_1():
    assert StopSignals().exit_status == 1


@pytest.mark.parametrize(
    "announce, expected", [(True, "SIGTERM: stopping after this update\n"), (False, "")]
)
def test_only_the_announcing_process_says_it_stops(capfd, announce, expected):
    """Every process of a torchrun job gets the signal: two processes printed the line twice."""
    with StopSignals(announce) as signals:
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.requested
    assert capfd.readouterr().err == expected
