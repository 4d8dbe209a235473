"""`python -m transformer <command> [arguments]`: the console script `transformer-<command>`
(`python -m transformer evaluate --help` is `transformer-evaluate --help`), through the same entry
point (transformer/cli/launch.py): the OpenMP wait policy is set before torch loads, and a Ctrl-C
while it loads ends in one line. For an interpreter whose scripts folder is not on PATH."""

import os
import sys

from transformer.cli.launch import COMMANDS, start


def main(argv: list[str] | None = None) -> int:
    """Run `transformer-<argv[0]>` with the rest of `argv` (None: `sys.argv[1:]`).

    Returns:
        The command's exit status; 0 after `--help`, 2 for a missing or unknown command.
    """
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m transformer {{{','.join(COMMANDS)}}} [arguments]"
    if argv and argv[0] in ("-h", "--help"):
        try:
            print(
                usage,
                "",
                "runs transformer-<command> with the arguments (its -h: the options)",
                sep="\n",
            )
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`| head -0`): quiet, as SIGPIPE ends a tool
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # for the exit flush
            return 141
        return 0
    if not argv or argv[0] not in COMMANDS:
        given = f"unknown command {argv[0]!r}" if argv else "a command is needed"
        print(f"{usage}\npython -m transformer: error: {given}", file=sys.stderr)
        return 2
    return start(argv[0], argv[1:])


if __name__ == "__main__":
    sys.exit(main())
