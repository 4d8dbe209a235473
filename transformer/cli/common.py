"""What every console script shares: the exit status, devices, files, output limits.

The decoding options of translate and evaluate are in `transformer.cli.decode_options`.

Exit status of every command (`run`, which every `main` calls):

- 0 on success;
- 2 when the command line itself is wrong: argparse's own errors, an option value out of range
  or at odds with another option or with the model it names (`--beam-size 0`, `--nbest 5` with
  a beam of 4, `--layer 9` of a 6-layer model), an empty file name (`--output ""`), two
  outputs naming one file, a missing or invalid config file (`--config` is part of the
  command line), key or override, an unknown or absent `--device`. Printed as argparse
  prints its errors: the usage line, then one line `PROG: error: ...`. The commands raise
  `UsageError` for these (under torchrun every process finds the same mistake; rank 0 alone
  prints it, as it alone prints "interrupted");
- 1 when the command could not do its work: a missing or unreadable input file, an output that
  cannot be written (its directory does not exist, say) or would overwrite an input, a bad
  checkpoint (or a `--checkpoint` directory without one), a failed download, a
  non-finite training loss, data problems found while preparing. Printed as one line
  `PROG: error: ...` (a `ValueError`, `OSError` or `FloatingPointError` of the command);
- 1 when stdout cannot be written (`> /dev/full`: `PROG: error: stdout: ...`) or memory runs
  out (`--beam-size 100000`, a model too large: `PROG: error: out of memory: ...`);
- 141 without a word when the reader of stdout goes away (`| head -1`), as for a tool that
  SIGPIPE stops;
- 130 after Ctrl-C, 143 after SIGTERM: one line `PROG: interrupted`, no traceback (files being
  written are left as they were, see `transformer.atomic`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import torch

from transformer.atomic import writes_in_place
from transformer.data.corpus import decode_lines
from transformer.device import resolve_device
from transformer.train.distributed import launched_rank


class UsageError(ValueError):
    """The command line is wrong (exit status 2; see the module docstring)."""


def run(
    parser: argparse.ArgumentParser,
    work: Callable[[argparse.Namespace], None],
    argv: list[str] | None = None,
) -> int:
    """Parse `argv` with `parser` and call `work(args)`, under the exit-status rule above.

    Args:
        parser: The command's parser; its `prog` starts every message.
        work: Does the command's job (may return its own exit status, e.g. 130 after a clean
            stop on Ctrl-C); raises `UsageError` or `ValueError`, `OSError`, `FloatingPointError`.
        argv: The arguments (None: `sys.argv[1:]`).

    Returns:
        The exit status: 0, 1, 2 or 130 (argparse's own status after `--help` or a syntax
        error). Never raises SystemExit, so tests and callers get the status back.
    """
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse has printed its message (or the help)
        return exit_.code if isinstance(exit_.code, int) else 2
    # SIGTERM (a scheduler's or supervisor's stop) as Ctrl-C: files being written are removed,
    # one line, and the status is 128 + SIGTERM (143), as the shell reports it. A command with
    # its own handler (transformer-train saves first) installs it inside `work`. A SIGTERM the
    # caller ignores (`trap '' TERM`) stays ignored.
    received = []

    def on_sigterm(signum: int, frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    handled = threading.current_thread() is threading.main_thread()  # where handlers can be
    handled = handled and signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
    previous = signal.signal(signal.SIGTERM, on_sigterm) if handled else None
    stdout, sys.stdout = sys.stdout, _NamedStdout(sys.stdout)
    try:
        status = work(args)
        sys.stdout.flush()  # what is still buffered: a full disk is reported here, not at exit
    except UsageError as error:
        if launched_rank():  # under torchrun every process finds the same mistake: rank 0 says it
            return 2
        parser.print_usage(sys.stderr)  # as parser.error() does, but returning the status
        print(f"{parser.prog}: error: {one_line(str(error))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`| head -1`): stop as SIGPIPE stops a tool
        _silence_stdout()
        return 128 + signal.SIGPIPE
    except (ValueError, OSError, FloatingPointError) as error:
        print(f"{parser.prog}: error: {one_line(error_message(error))}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise  # a defect of ours: the traceback is what a bug report needs
        text = one_line(str(error))  # a command's own message already says so
        text = text if text.startswith("out of memory") else f"out of memory: {text}"
        print(f"{parser.prog}: error: {text}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        if not launched_rank():  # one line for a torchrun job too (its rank 0's)
            print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 128 + signal.SIGTERM if received else 130
    finally:
        sys.stdout = stdout
        if handled:
            signal.signal(signal.SIGTERM, previous)
    return status if isinstance(status, int) else 0


class _NamedStdout:
    """sys.stdout while a command runs: a write that fails (`> /dev/full`, a full disk) is an
    OSError naming "stdout", so the one-line error says what could not be written."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def write(self, text: str) -> int:
        return self._named(self._stream.write, text)

    def flush(self) -> None:
        self._named(self._stream.flush)

    def _named(self, method, *args):
        try:
            return method(*args)
        except BrokenPipeError:  # the reader went away: `run` ends quietly with 141
            raise
        except OSError as error:
            _silence_stdout()  # the interpreter's last flush at exit would fail once more
            raise OSError(error.errno, error.strerror, "stdout") from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe adds
    no error of its own (the Python documentation's advice on SIGPIPE)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def is_out_of_memory(error: RuntimeError) -> bool:
    """Whether `error` says an allocation failed: torch's `OutOfMemoryError` (a GPU) or the
    CPU allocator's "can't allocate memory" / "out of memory" (too large a beam, batch or
    model for the machine: a user's setting, not a defect), or a size too large to count."""
    if isinstance(error, torch.OutOfMemoryError):
        return True
    text = str(error).lower()
    # The last: a size whose byte count overflows 64 bits (`model.d_model=2**62`).
    allocation = ("can't allocate memory", "out of memory", "storage size calculation overflowed")
    return any(words in text for words in allocation)


def device_option(value: str) -> torch.device:
    """`--device` as a torch device (`transformer.device.resolve_device`).

    Raises:
        UsageError: for a name torch does not know or a device this machine lacks.
    """
    try:
        return resolve_device(value, what="--device")
    except ValueError as error:
        raise UsageError(str(error)) from None


RUN_CHECKPOINTS = ("checkpoint_best.pt", "checkpoint_last.pt")  # in the order tried


def checkpoint_file(value: str | Path, prog: str) -> Path:
    """`--checkpoint` as a file: a run directory gives its `checkpoint_best.pt` (the best
    validation score), else its `checkpoint_last.pt`, named on stderr after `prog`; any other
    path is returned as it is (a missing file is reported when it is read).

    Raises:
        ValueError: for a directory holding neither, naming what it holds (exit 1).
    """
    path = Path(value)
    if not path.is_dir():
        return path
    for name in RUN_CHECKPOINTS:
        if (path / name).is_file():
            print(f"{prog}: --checkpoint {path} is a run directory: using {name}", file=sys.stderr)
            return path / name
    held = sorted(entry.name + "/" * entry.is_dir() for entry in path.iterdir())
    shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
    raise ValueError(
        f"--checkpoint {path} is a directory without {' or '.join(RUN_CHECKPOINTS)}; "
        f"it holds {shown or 'nothing'}"
    )


def check_output_path(
    path: str | Path, inputs: list, flag: str, creates_directory: bool = False
) -> Path:
    """Refuse an output file that would overwrite an input or cannot be written as a file.

    Called before any work, so that a bad path fails in seconds, never after a long job, and
    no input is lost. The file's directory must exist: a typo in it is an error, never a
    silent `mkdir -p`; only an option that names a directory (`--output-dir`) creates it.

    Args:
        path: The output file; returned as a Path.
        inputs: Input files of the same command (None entries are skipped).
        flag: The command-line option that named `path`, for the message.
        creates_directory: `path` lies in a directory that the command creates if missing.

    Raises:
        ValueError: when `path` is an existing directory, lies in a missing directory
            (unless `creates_directory`) or one the user may not write in, under a file or a
            link to nothing, is a link into a missing directory, or is one of `inputs`.
    """
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{flag} {out} is a directory; give a file name")
    for parent in out.parents:  # the nearest first
        if parent.is_symlink() and not parent.exists():
            raise ValueError(
                f"{flag} {out}: {parent} is a symbolic link to {os.readlink(parent)}, "
                "which does not exist"
            )
        if parent.exists() and not parent.is_dir():
            raise ValueError(f"{flag} {out}: {parent} is a file, not a directory")
    if not creates_directory and not out.parent.is_dir():
        raise ValueError(
            f"{flag} {out}: the directory {out.parent} does not exist (create it first)"
        )
    if out.is_symlink() and not out.exists():  # written through: the target's directory
        target = Path(os.path.realpath(out))
        if not target.parent.is_dir():
            raise ValueError(
                f"{flag} {out} is a symbolic link to {target}, whose directory "
                f"{target.parent} does not exist"
            )
    if not writes_in_place(out):  # a file replaced by a new one: its directory must allow it
        written = Path(os.path.realpath(out)) if out.is_symlink() else out  # a link: its target
        home = next(d for d in written.parents if d.is_dir())  # gets the file or its directory
        if not os.access(home, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {out}: cannot write in {home} (permission denied)")
    for given in inputs:
        if given is not None and out.exists() and Path(given).exists():
            if os.path.samefile(out, given):  # also catches symbolic and hard links
                raise ValueError(
                    f"{flag} {out} is also an input of this command ({given}); "
                    "it would be overwritten"
                )
    return out


def check_distinct_outputs(outputs: list[tuple[Path | None, str]]) -> None:
    """Refuse two outputs of one command that are the same file (also through `./`, a
    symbolic or a hard link): one would overwrite the other. `outputs` holds (path, option)
    pairs; a None path is not written. Raises UsageError, naming both options and the file."""
    given = [(Path(path), flag) for path, flag in outputs if path is not None]
    for index, (first, first_flag) in enumerate(given):
        for second, second_flag in given[index + 1 :]:
            same = os.path.realpath(first) == os.path.realpath(second) or (
                first.exists() and second.exists() and os.path.samefile(first, second)
            )
            if same and not writes_in_place(first):  # /dev/null may take both
                raise UsageError(f"{first_flag} and {second_flag} name the same file ({first})")


def read_stdin_lines() -> list[str]:
    """Lines of stdin as UTF-8; only "\\n" separates lines (as `corpus.read_lines`).

    Raises:
        ValueError: `<stdin>: line N is not valid UTF-8 (...)`.
    """
    return decode_lines(sys.stdin.buffer.read(), "<stdin>")


def error_message(error: BaseException) -> str:
    """The message of an error as a user reads it: an operating-system error of a file as
    `FILE: reason` (the way `cat` says it: "nope.en: No such file or directory", not
    "[Errno 2] No such file or directory: 'nope.en'"); any other error as its text."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        if str(error).startswith("[Errno"):  # the default text, not a message of ours
            return f"{error.filename}: {error.strerror}"
    return str(error)


def one_line(text: str) -> str:
    """`text` with its line breaks turned into spaces: a translation or an error message never
    spans lines, so output line i always belongs to input line i."""
    return " ".join(text.splitlines())
