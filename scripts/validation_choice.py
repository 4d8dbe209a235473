"""The quickstart's decoding, chosen on the validation set: how many checkpoints to average, and
the beam size.

The paper chose its beam size and length penalty "after experimentation on the development
set" (section 6.1) and averaged the last 5 checkpoints (base) or 20 (big). On Multi30k, in
60 minutes, neither count wins on every run: a run cut early on a slow machine still improves
fast, and its older checkpoints pull the average down. So the quickstart averages the last N
of each count it is given, decodes the validation set with each beam size, and decodes the
test set once, with the pair that scored the highest validation BLEU (sacreBLEU). The test set
plays no part in the choice. A count of 1 is the last checkpoint itself, not averaged: a run
whose rate cools down to 0 at its end (`train.cooldown_fraction`) often ends on weights better
than any average over the cooldown. A run that kept a moving average of its weights
(`train.ema_decay`) adds its `checkpoint_ema.pt` to the averages, when it is of the step of the
newest numbered checkpoint.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from transformer.train.run_directory import NUMBERED, RunDirectory

# The defaults of `make demo` (results/recipe-2026-12-04/README.md): the paper's last 5 and
# beam 4, and the last 10 (every checkpoint `train.keep_last` keeps) and beam 6; and the last
# checkpoint alone (results/recipe-2026-12-06b/README.md).
AVERAGE_LAST = (5, 10, 1)
BEAM_SIZES = (4, 6)


@dataclass(frozen=True)
class Choice:
    """One way to decode: the average of the last `average_last` checkpoints (1: the last
    checkpoint itself; None: the moving average of the weights, checkpoint_ema.pt),
    `beam_size` beams."""

    average_last: int | None
    beam_size: int

    @property
    def weights(self) -> str:
        """The checkpoint decoded, in words."""
        if self.average_last is None:
            return "the moving average of the weights (checkpoint_ema.pt)"
        if self.average_last == 1:
            return "the last checkpoint"
        return f"the average of the last {self.average_last}"

    @property
    def stem(self) -> str:
        """The file-name stem of its validation outputs: avg<N>.beam<K>, last.beam<K> (N = 1)
        or ema.beam<K>."""
        weights = {None: "ema", 1: "last"}.get(self.average_last, f"avg{self.average_last}")
        return f"{weights}.beam{self.beam_size}"


def counts(text: str, option: str, example: str) -> list[int]:
    """Parse a command-line list of counts: "5,10" -> [5, 10] (order kept, repeats dropped).

    Raises:
        ValueError: an entry that is not a whole number >= 1, naming `option` (and giving
            `example` of a valid value).
    """
    values = []
    for entry in text.split(","):
        if not re.fullmatch(r"[0-9]+", entry.strip()) or int(entry) < 1:  # ASCII digits only
            raise ValueError(
                f"{option} ({text}): {entry.strip()!r} is not a whole number >= 1 (e.g. {example})"
            )
        if int(entry) not in values:
            values.append(int(entry))
    return values


def plan_averages(wanted: Sequence[int], available: int) -> list[int]:
    """The distinct counts to average: each of `wanted` capped at the `available` checkpoints
    (a short run may hold fewer), in the order given.

    Raises:
        ValueError: `available` < 1 (the run wrote no numbered checkpoint).
    """
    if available < 1:
        raise ValueError(
            "no numbered checkpoint (checkpoint_<step>.pt) to average; train.keep_last must be >= 1"
        )
    planned = []
    for count in wanted:
        if min(count, available) not in planned:
            planned.append(min(count, available))
    return planned


def ema_checkpoint(run_dir: Path) -> Path | None:
    """The run's checkpoint_ema.pt (`train.ema_decay`) when it is of the step of the newest
    numbered checkpoint, else None. One of another step (older: a resume turned the setting
    off; newer: an interrupted run's last save is not numbered) or one that cannot be read is
    left out of the choice, and a line says so."""
    path = RunDirectory(run_dir).ema_path
    numbered = RunDirectory(run_dir).numbered_checkpoints()
    if not path.is_file() or not numbered:
        return None
    from transformer.checkpoint import read_checkpoint  # torch: only where there is one

    newest = int(NUMBERED.match(numbered[-1].name).group(1))
    try:
        step = read_checkpoint(path).get("step")
    except ValueError as error:  # names the file and what is wrong with it
        problem = str(error)
    else:
        problem = f"{path} is of step {step}, the newest numbered checkpoint of step {newest}"
        if step == newest:
            return path
    print(f"quickstart: {problem}: left out of the choice", flush=True)
    return None


def best(scores: dict[Choice, float]) -> Choice:
    """The choice with the highest validation BLEU; a tie goes to the one listed first (the
    paper's last 5 and beam 4 come first by default)."""
    return max(scores, key=lambda choice: (scores[choice], -list(scores).index(choice)))


def score_on_validation(
    choices: Sequence[Choice],
    checkpoints: dict[int | None, Path],
    valid: tuple[Path, Path],
    target_lang: str,
    length_penalty: float,
    out_dir: Path,
    run: Callable[[list[str]], None],
    python: str,
) -> dict[Choice, float]:
    """Decode the validation set with each choice (`transformer-evaluate`) and read its BLEU.

    Args:
        choices: The pairs to try.
        checkpoints: The checkpoint of each `average_last` count (None: checkpoint_ema.pt).
        valid: The validation source and reference files.
        target_lang: The target language (the hypothesis files' suffix).
        length_penalty: Alpha of the length penalty, the same for every choice.
        out_dir: Where each choice's hypotheses and JSON report go
            (`<stem>.hyp.<lang>`, `<stem>.json`; `Choice.stem`).
        run: Runs one command and exits on failure (`quickstart.run`).
        python: The interpreter that runs `python -m transformer evaluate`.

    Returns:
        Each choice's sacreBLEU BLEU on the validation set, in the order of `choices`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    scores = {}
    for choice in choices:
        stem = f"{out_dir}/{choice.stem}"
        report = Path(f"{stem}.json")  # not with_suffix: it would replace ".beam<K>"
        evaluate = [
            "--checkpoint", str(checkpoints[choice.average_last]), "--src", str(valid[0]),
            "--ref", str(valid[1]), "--target-lang", target_lang,
            "--beam-size", str(choice.beam_size), "--length-penalty", str(length_penalty),
            "--hyp-out", f"{stem}.hyp.{target_lang}", "--json", str(report),
        ]  # fmt: skip
        run([python, "-m", "transformer", "evaluate", *evaluate])
        scores[choice] = json.loads(report.read_text())["scores"]["bleu"]
    return scores


def table(scores: dict[Choice, float], chosen: Choice) -> list[dict]:
    """The scores as JSON records, the chosen one marked (for the results file)."""
    return [
        {
            "average_last": choice.average_last,
            "ema": choice.average_last is None,
            "beam_size": choice.beam_size,
            "bleu": bleu,
            "chosen": choice == chosen,
        }
        for choice, bleu in scores.items()
    ]


def capped_averages(average_last: Sequence[int], keep_last: int) -> str | None:
    """What a run that keeps `keep_last` numbered checkpoints does to the larger counts of
    `average_last` (they average the `keep_last` it keeps), or None when every count fits.
    Said before training: at the end of the hour it is too late to raise `train.keep_last`."""
    larger = sorted(n for n in average_last if n > keep_last)
    if not larger or keep_last < 1:  # keep_last < 1 is an error of its own (decoding_problem)
        return None
    counts = " and ".join(f"the last {n}" for n in larger)
    given = ",".join(str(n) for n in average_last)
    if keep_last == 1:
        kept, becomes = "1 numbered checkpoint", "that checkpoint itself"
    else:
        kept, becomes = f"{keep_last} numbered checkpoints", f"the average of those {keep_last}"
    both = " both" if len(larger) > 1 else ""
    return (
        f"--average-last {given}: train.keep_last ({keep_last}) keeps only {kept}, so {counts} "
        f"will{both} be {becomes}; raise train.keep_last to average more"
    )


def average_and_choose(
    run_dir: Path,
    average_last: Sequence[int],
    beam_sizes: Sequence[int],
    valid: tuple[Path, Path],
    target_lang: str,
    length_penalty: float,
    run: Callable[[list[str]], None],
    python: str,
) -> tuple[Choice, Path, list[dict]]:
    """Average the run's last checkpoints (`transformer-average --last N`, one file per count:
    `checkpoint_avg<N>.pt`; for N = 1 the newest numbered checkpoint itself) and choose the
    average and beam size on the validation set; the moving average of the weights is a
    candidate too where the run kept one (`ema_checkpoint`).

    Args:
        run_dir: The run directory (its numbered checkpoints).
        average_last: The counts to average (capped at the checkpoints there are).
        beam_sizes: The beam sizes to try.
        valid: The validation source and reference files.
        target_lang: The target language.
        length_penalty: Alpha, the same for every choice (the run's `decode.length_penalty`).
        run: Runs one command and exits on failure (`quickstart.run`).
        python: The interpreter that runs the commands.

    Returns:
        The chosen pair, its averaged checkpoint, and the validation scores as JSON records
        (empty when there was only one pair to try, which then needs no validation decoding).

    Raises:
        ValueError: the run directory holds no numbered checkpoint.
    """
    numbered = RunDirectory(run_dir).numbered_checkpoints()
    available = len(numbered)
    averages = plan_averages(average_last, available)
    if max(average_last) > available:
        named = [
            "the last checkpoint" if n == 1 else f"the average of the last {n}" for n in averages
        ]
        print(
            f"quickstart: {run_dir} holds {available} numbered checkpoint(s), fewer than the "
            f"last {max(average_last)} asked for; the candidates: {', '.join(named)}",
            flush=True,
        )
    # An earlier decoding's files go: what valid/ holds afterwards is this choice's alone.
    shutil.rmtree(run_dir / "valid", ignore_errors=True)
    averaged: dict[int | None, Path] = {}
    for count in averages:
        if count == 1:  # the last checkpoint itself: nothing to average
            averaged[count] = numbered[-1]
            continue
        averaged[count] = run_dir / f"checkpoint_avg{count}.pt"
        average = ["--last", str(count), "--dir", str(run_dir), "--output", str(averaged[count])]
        run([python, "-m", "transformer", "average", *average])
    ema = ema_checkpoint(run_dir)
    if ema is not None:
        averaged[None] = ema
    choices = [Choice(count, beam) for count in averaged for beam in beam_sizes]
    if len(choices) == 1:
        return choices[0], averaged[choices[0].average_last], []
    scores = score_on_validation(
        choices, averaged, valid, target_lang, length_penalty, run_dir / "valid", run, python
    )
    chosen = best(scores)
    for choice, bleu in scores.items():
        print(
            f"quickstart: validation BLEU {bleu:.2f}: {choice.weights}, beam {choice.beam_size}"
            + " (chosen)" * (choice == chosen),
            flush=True,
        )
    return chosen, averaged[chosen.average_last], table(scores, chosen)
