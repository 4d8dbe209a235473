"""Tests for scripts/validation_choice.py: the quickstart's average and beam size, chosen on the
validation set (the end-to-end run is in tests/scripts/test_reproduce_wmt14.py)."""

from __future__ import annotations

import itertools
import json

import pytest

from scripts import validation_choice
from scripts.validation_choice import Choice


@pytest.mark.parametrize("text, expected", [("5,10", [5, 10]), ("10, 5,10", [10, 5]), ("4", [4])])
def test_counts_keep_the_order_given_and_drop_repeats(text, expected):
    assert validation_choice.counts(text, "--average-last", "5,10") == expected


@pytest.mark.parametrize("text", ["0", "5,", "5,ten", "-1", "2.5", ""])
def test_a_count_that_is_not_a_whole_number_names_the_option_and_entry(text):
    with pytest.raises(ValueError, match=r"^--beam-sizes \(.*\): .* is not a whole number >= 1"):
        validation_choice.counts(text, "--beam-sizes", "4,6")


@pytest.mark.parametrize(
    "wanted, available, expected",
    [([5, 10], 10, [5, 10]), ([5, 10], 6, [5, 6]), ([5, 10], 3, [3]), ([10, 5], 7, [7, 5])],
)
def test_averages_are_capped_at_the_checkpoints_there_are(wanted, available, expected):
    assert validation_choice.plan_averages(wanted, available) == expected


def test_a_run_without_numbered_checkpoints_is_an_error():
    with pytest.raises(ValueError, match="no numbered checkpoint.*keep_last"):
        validation_choice.plan_averages([5], 0)


@pytest.mark.parametrize("seed", range(20))
def test_best_is_the_first_of_the_highest_scores(seed):
    """Against a brute-force scan: the highest BLEU, and of equal ones the first listed."""
    import random

    rng = random.Random(seed)
    choices = [Choice(a, b) for a, b in itertools.product([5, 10], [4, 6])]
    scores = {choice: float(rng.choice([39, 40, 41])) for choice in choices}
    top = max(scores.values())
    first = next(choice for choice in choices if scores[choice] == top)
    assert validation_choice.best(scores) == first


def _fake_steps(run_dir, bleu):
    """A `run` that records each command, writes averaged checkpoints as files, and writes an
    evaluation report whose BLEU is `bleu(average_last, beam_size)` (average_last None for
    checkpoint_ema.pt)."""
    commands = []

    def run(command):
        commands.append(command)
        value = dict(zip(command, command[1:], strict=False))
        if "average" in command:
            (run_dir / value["--output"]).write_bytes(b"averaged")
        else:
            name = value["--checkpoint"].rsplit("/", 1)[1]
            if name == "checkpoint_ema.pt":
                average = None
            elif name.startswith("checkpoint_avg"):
                average = int(name[len("checkpoint_avg") : -3])
            else:  # a numbered checkpoint itself: the last one, not averaged
                average = 1
            score = bleu(average, int(value["--beam-size"]))
            report = {"scores": {"bleu": score}}
            (run_dir / value["--json"]).write_text(json.dumps(report))

    return commands, run


def test_every_average_is_decoded_with_every_beam_and_the_best_chosen(tmp_path, capsys):
    for step in (200, 400, 600, 800, 1000, 1200, 1400):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    table = {(5, 4): 40.1, (5, 6): 40.6, (7, 4): 40.3, (7, 6): 40.2}  # 7: all there are
    commands, run = _fake_steps(tmp_path, lambda a, b: table[(a, b)])
    valid = (tmp_path / "val.en", tmp_path / "val.de")
    chosen, averaged, rows = validation_choice.average_and_choose(
        tmp_path, [5, 10], [4, 6], valid, "de", 2.0, run, "py"
    )
    assert chosen == Choice(5, 6) and averaged == tmp_path / "checkpoint_avg5.pt"
    out = capsys.readouterr().out  # the count asked for, and what it became
    assert "holds 7 numbered checkpoint(s), fewer than the last 10 asked for" in out
    assert "the candidates: the average of the last 5, the average of the last 7" in out
    averages = [c for c in commands if "average" in c]
    assert [c[c.index("--last") + 1] for c in averages] == ["5", "7"]
    decodes = [c for c in commands if "evaluate" in c]
    assert len(decodes) == 4
    for command in decodes:  # the validation set, the run's alpha, hypotheses in `de`
        assert command[command.index("--src") + 1] == str(valid[0])
        assert command[command.index("--ref") + 1] == str(valid[1])
        assert command[command.index("--length-penalty") + 1] == "2.0"
        assert command[command.index("--hyp-out") + 1].endswith(".hyp.de")
    # Each choice has its own files (a suffix swap once wrote avg5.json for both beams).
    reports = [c[c.index("--json") + 1] for c in decodes]
    hyps = [c[c.index("--hyp-out") + 1] for c in decodes]
    assert len(set(reports)) == len(set(hyps)) == 4
    assert reports[1] == str(tmp_path / "valid" / "avg5.beam6.json")
    assert [(r["average_last"], r["beam_size"], r["bleu"]) for r in rows] == [
        (a, b, bleu) for (a, b), bleu in table.items()
    ]
    assert [r["chosen"] for r in rows] == [False, True, False, False]


def test_a_decoding_again_leaves_no_earlier_validation_files(tmp_path):
    """Decoding a finished run again with one candidate (no validation needed) left the first
    decoding's four valid/ files beside a report without validation (#17, new-user pass)."""
    for step in (200, 400, 600):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    commands, run = _fake_steps(tmp_path, lambda a, b: 40.0 + b)
    valid = (tmp_path / "val.en", tmp_path / "val.de")
    validation_choice.average_and_choose(tmp_path, [5, 1], [4, 6], valid, "de", 2.5, run, "py")
    assert len(list((tmp_path / "valid").iterdir())) == 4  # two candidates x two beams, JSON
    validation_choice.average_and_choose(tmp_path, [5], [4], valid, "de", 2.5, run, "py")
    assert not (tmp_path / "valid").exists()


@pytest.mark.parametrize("last_wins", [True, False])
def test_the_last_checkpoint_itself_is_a_candidate_without_averaging(tmp_path, capsys, last_wins):
    """A count of 1 decodes the newest numbered checkpoint (by step, not by name: 1400 after
    200) as it is: no `transformer-average` for it, no checkpoint_avg1.pt; its validation files
    are last.beam<K>, and it is chosen only when it scores highest."""
    for step in (200, 400, 600, 800, 1000, 1200, 1400):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    table = {(5, 4): 40.1, (5, 6): 40.6, (1, 4): 41.0 if last_wins else 40.2, (1, 6): 40.5}
    commands, run = _fake_steps(tmp_path, lambda a, b: table[(a, b)])
    valid = (tmp_path / "val.en", tmp_path / "val.de")
    chosen, path, rows = validation_choice.average_and_choose(
        tmp_path, [5, 1], [4, 6], valid, "de", 2.5, run, "py"
    )
    averages = [c for c in commands if "average" in c]
    assert [c[c.index("--last") + 1] for c in averages] == ["5"]
    assert not (tmp_path / "checkpoint_avg1.pt").exists()
    decoded = [c[c.index("--checkpoint") + 1] for c in commands if "evaluate" in c]
    assert decoded[2:] == [str(tmp_path / "checkpoint_1400.pt")] * 2
    assert (tmp_path / "valid" / "last.beam4.json").is_file()
    assert [(r["average_last"], r["beam_size"]) for r in rows] == list(table)
    out = capsys.readouterr().out
    if last_wins:
        assert chosen == Choice(1, 4) and path == tmp_path / "checkpoint_1400.pt"
        assert "validation BLEU 41.00: the last checkpoint, beam 4 (chosen)" in out
    else:
        assert chosen == Choice(5, 6) and path == tmp_path / "checkpoint_avg5.pt"
        assert "validation BLEU 40.20: the last checkpoint, beam 4\n" in out


def test_the_defaults_try_the_last_checkpoint_beside_the_paper_s_average():
    """`make demo` chooses among the last 5 (first: it wins ties), the last 10 and the last
    checkpoint alone, each with beam 4 and 6 (results/recipe-2026-12-06b/)."""
    assert validation_choice.AVERAGE_LAST == (5, 10, 1)
    assert validation_choice.BEAM_SIZES == (4, 6)


def test_a_single_choice_decodes_nothing_on_validation(tmp_path):
    for step in (200, 400):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    commands, run = _fake_steps(tmp_path, lambda a, b: pytest.fail("no validation decoding"))
    chosen, averaged, rows = validation_choice.average_and_choose(
        tmp_path, [5], [4], (tmp_path / "v.en", tmp_path / "v.de"), "de", 0.6, run, "py"
    )
    assert chosen == Choice(2, 4) and averaged.name == "checkpoint_avg2.pt" and rows == []
    assert len(commands) == 1


@pytest.mark.parametrize("ema_step, candidate", [(1400, True), (1200, False)])
def test_the_moving_average_of_the_newest_step_is_a_candidate(
    tmp_path, capsys, ema_step, candidate, make_model, tiny_tokenizer, write_checkpoint
):
    """checkpoint_ema.pt (`train.ema_decay`) is decoded with every beam beside the averages
    and chosen when it scores highest; one of an older step than the newest numbered
    checkpoint (a run resumed with the setting off) is left out, and a line says so."""
    for step in (200, 400, 600, 800, 1000, 1200, 1400):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    model = make_model(tiny_tokenizer.vocab_size)
    write_checkpoint(tmp_path / "checkpoint_ema.pt", model, tiny_tokenizer, ema_step)
    table = {(5, 4): 40.1, (5, 6): 40.6, (None, 4): 40.9, (None, 6): 40.7}
    commands, run = _fake_steps(tmp_path, lambda a, b: table[(a, b)])
    valid = (tmp_path / "val.en", tmp_path / "val.de")
    chosen, path, rows = validation_choice.average_and_choose(
        tmp_path, [5], [4, 6], valid, "de", 2.5, run, "py"
    )
    decoded = [c[c.index("--checkpoint") + 1] for c in commands if "evaluate" in c]
    out = capsys.readouterr().out
    if candidate:
        assert chosen == Choice(None, 4) and path == tmp_path / "checkpoint_ema.pt"
        assert decoded.count(str(path)) == 2 and len(decoded) == 4
        assert [(r["average_last"], r["ema"], r["chosen"]) for r in rows][2:] == [
            (None, True, True),
            (None, True, False),
        ]
        assert (
            "40.90: the moving average of the weights (checkpoint_ema.pt), beam 4 (chosen)" in out
        )
        assert (tmp_path / "valid" / "ema.beam4.json").is_file()
    else:
        assert chosen == Choice(5, 6) and len(decoded) == 2
        assert (
            "checkpoint_ema.pt is of step 1200, the newest numbered checkpoint of step 1400" in out
        )


def test_a_damaged_moving_average_is_left_out_with_a_line(tmp_path, capsys):
    for step in (200, 400):
        (tmp_path / f"checkpoint_{step}.pt").write_bytes(b"")
    (tmp_path / "checkpoint_ema.pt").write_bytes(b"PK\x03\x04 not a whole file")
    assert validation_choice.ema_checkpoint(tmp_path) is None
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"quickstart: {tmp_path / 'checkpoint_ema.pt'}") and out.endswith(
        ": left out of the choice"
    )
    assert len(out.splitlines()) == 1


@pytest.mark.parametrize(
    "average_last, keep_last, larger",
    [
        ([5, 10, 1], 10, None),
        ([5, 10], 6, "so the last 10 will be the average of those 6;"),
        ([10, 1, 5], 2, "so the last 5 and the last 10 will both be the average of those 2;"),
        ([5, 20], 1, "only 1 numbered checkpoint, so the last 5 and the last 20 will both be that"),
    ],
)
def test_counts_above_keep_last_are_named(average_last, keep_last, larger):
    note = validation_choice.capped_averages(average_last, keep_last)
    if larger is None:
        assert note is None
    else:
        given = ",".join(map(str, average_last))
        assert note.startswith(f"--average-last {given}: train.keep_last ({keep_last}) keeps")
        assert larger in note
        # what plan_averages will do with them, once the run kept keep_last
        assert max(validation_choice.plan_averages(average_last, keep_last)) == keep_last


def test_keep_last_below_one_is_left_to_its_own_error():
    assert validation_choice.capped_averages([5], 0) is None
