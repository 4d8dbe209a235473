"""benchmarks/make_corpus.py: a synthetic WMT-like corpus, checked by re-reading its files."""

from __future__ import annotations

import contextlib
import io
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import make_corpus, pseudo_words

REPO = Path(__file__).resolve().parents[2]
PAIRS, WORDS = 2000, 5000
MARKS = ",.?!:"  # attached to words; a word of the vocabulary never ends with one


def generate(prefix: Path, pairs: int = PAIRS, seed: int = 1) -> str:
    """Run the script in this process; returns its summary line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert (
            make_corpus.main(
                ["--pairs", str(pairs), "--words", str(WORDS), "--seed", str(seed)]
                + ["--output", str(prefix)]
            )
            == 0
        )
    return out.getvalue()


def vocabulary_word(token: str) -> str:
    """The vocabulary word of a token: without its mark, first letter as in the vocabulary
    (a line's first word is capitalised; no two words differ by that letter's case alone)."""
    word = token.rstrip(MARKS)
    return word[:1].lower() + word[1:]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """(directory, summary line, {"en": lines, "de": lines}) of one 2,000-pair corpus."""
    directory = tmp_path_factory.mktemp("corpus")
    summary = generate(directory / "train")
    lines = {
        side: (directory / f"train.{side}").read_text(encoding="utf-8").split("\n")
        for side in ("en", "de")
    }
    return directory, summary, lines


def test_the_sides_have_the_same_lines_and_none_is_empty(corpus):
    directory, _, lines = corpus
    assert sorted(p.name for p in directory.iterdir()) == ["train.de", "train.en"]
    for side in ("en", "de"):
        assert lines[side][-1] == ""  # the file ends with a newline
        assert len(lines[side]) == PAIRS + 1
        assert all(line.strip() and line == line.strip() for line in lines[side][:-1])
        assert not any("  " in line for line in lines[side])


def test_sentence_lengths_are_wmt_like_and_correlated(corpus):
    _, _, lines = corpus
    counts = {side: [len(line.split()) for line in lines[side][:-1]] for side in lines}
    for side, (low, high) in {"en": (22.0, 25.5), "de": (21.0, 24.5)}.items():
        assert make_corpus.MIN_WORDS <= min(counts[side])
        assert max(counts[side]) <= make_corpus.MAX_WORDS
        assert low <= statistics.mean(counts[side]) <= high
        assert statistics.median(counts[side]) < statistics.mean(counts[side])  # skewed right
        assert 0.01 < sum(n > 45 for n in counts[side]) / PAIRS < 0.15  # a long tail
    assert statistics.correlation(counts["en"], counts["de"]) > 0.8


def test_the_summary_line_agrees_with_an_independent_count(corpus):
    directory, summary, lines = corpus
    assert summary.count("\n") == 1 and f" {PAIRS} pairs;" in summary
    for side in ("en", "de"):
        match = re.search(
            rf"{side}: (\d+) bytes, ([\d.]+) words/line, (\d+) distinct words", summary
        )
        assert match, summary
        tokens = [token for line in lines[side] for token in line.split()]
        assert int(match[1]) == (directory / f"train.{side}").stat().st_size
        assert float(match[2]) == pytest.approx(len(tokens) / PAIRS, abs=0.005)
        assert int(match[3]) == len({vocabulary_word(token) for token in tokens})
        assert int(match[3]) > WORDS / 2  # Zipf-like, not a few words repeated


def test_the_text_looks_like_raw_english_and_german(corpus):
    _, _, lines = corpus
    text = {side: "\n".join(lines[side]) for side in lines}
    tokens = {side: text[side].split() for side in text}
    for side in ("en", "de"):
        assert all(line[0].isupper() or not line[0].isalpha() for line in lines[side][:-1])
        assert 0.7 < sum(line[-1] in ".?!:" for line in lines[side][:-1]) / PAIRS < 0.99
        assert 0.02 < sum(t.endswith(",") for t in tokens[side]) / len(tokens[side]) < 0.12
        assert 0.003 < sum(t[0].isdigit() for t in tokens[side]) / len(tokens[side]) < 0.05
        # 5,000 words are shorter than 300,000 (6.0 and 7.1 bytes, as in newstest2014)
        bytes_per_word = len(text[side].encode("utf-8")) / len(tokens[side])
        assert {"en": 4.5, "de": 5.5}[side] < bytes_per_word < {"en": 6.5, "de": 7.5}[side]
    assert all(letter in text["de"] for letter in "äöüß")
    assert sum(not c.isascii() for c in text["de"]) > 20 * sum(not c.isascii() for c in text["en"])
    shared = {vocabulary_word(t) for t in tokens["en"]} & {vocabulary_word(t) for t in tokens["de"]}
    assert len(shared) < 0.1 * len({vocabulary_word(t) for t in tokens["en"]})


def test_the_vocabulary_has_distinct_words_without_marks():
    for language in ("en", "de"):
        words = pseudo_words.make_vocabulary(1, WORDS, language)
        assert len({vocabulary_word(word) for word in words}) == WORDS
        assert all(word and not word.endswith(tuple(MARKS)) for word in words)
        assert all(len(word.split()) == 1 for word in words)
        assert statistics.mean(map(len, words[:100])) < statistics.mean(map(len, words[-100:]))


def test_the_same_seed_gives_the_same_bytes_and_another_seed_others(corpus, tmp_path):
    directory, _, _ = corpus
    generate(tmp_path / "again")
    generate(tmp_path / "other", seed=2)
    generate(tmp_path / "short", pairs=PAIRS // 2)
    for side in ("en", "de"):
        first = (directory / f"train.{side}").read_bytes()
        assert (tmp_path / f"again.{side}").read_bytes() == first
        assert (tmp_path / f"other.{side}").read_bytes() != first
        short = (tmp_path / f"short.{side}").read_bytes()  # a shorter corpus is a prefix
        assert short.count(b"\n") == PAIRS // 2 and first.startswith(short)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--pairs", "0"], "--pairs (0) must be at least 1"),
        (["--output", "{tmp}/missing/train"], "the directory {tmp}/missing does not exist"),
        (["--words", "10"], "--words (10) must be at least 100"),
        (["--seed", "-1"], "--seed (-1) must be at least 0"),
    ],
)
def test_a_bad_argument_exits_2_with_one_line(tmp_path, capsys, arguments, message):
    given = {"--pairs": "10", "--output": str(tmp_path / "train")}
    given.update(zip(arguments[::2], arguments[1::2], strict=True))
    argv = [part.format(tmp=tmp_path) for item in given.items() for part in item]
    with pytest.raises(SystemExit) as exit_:
        make_corpus.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].endswith(message.format(tmp=tmp_path))
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_ctrl_c_exits_130_and_leaves_the_old_files(tmp_path, capsys, monkeypatch):
    for side in ("en", "de"):
        (tmp_path / f"train.{side}").write_text(f"old {side}\n")
    real, calls = make_corpus.render, []

    def interrupted_on_the_second_side(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(make_corpus, "render", interrupted_on_the_second_side)
    argv = ["--pairs", "10", "--words", "100", "--output", str(tmp_path / "train")]
    assert make_corpus.main(argv) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.endswith(": interrupted\n")
    assert captured.err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de", "train.en"]  # no temp
    assert (tmp_path / "train.de").read_text() == "old de\n"


def test_runs_as_a_file_from_another_directory(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "make_corpus.py")]
        + ["--pairs", "5", "--words", "100", "--output", "small"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("small.{en,de}: 5 pairs;")
    assert (tmp_path / "small.en").read_text(encoding="utf-8").count("\n") == 5
