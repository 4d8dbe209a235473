"""Tests for transformer/cli/evaluate_outputs.py: transformer-evaluate's default file names.

References: the names written out by hand; a file system's 255-byte limit on a name; every
pair of the ensembles below, which must never share a name.
"""

from __future__ import annotations

import itertools
import re

from transformer.cli.evaluate_outputs import MAX_STEM, ensemble_stem

HASHED = r"\+{n}more-[0-9a-f]{{8}}"


def test_a_checkpoint_is_its_name_and_an_ensemble_in_one_directory_all_their_names(tmp_path):
    long_name = "k" * 200  # one checkpoint keeps its name, however long (it is a file name)
    assert ensemble_stem([tmp_path / f"{long_name}.pt"]) == long_name
    assert ensemble_stem([tmp_path / "a.pt", tmp_path / "b.pt"]) == "a+b"
    # The same directory written another way is the same directory.
    (tmp_path / "run2").mkdir()
    assert ensemble_stem([tmp_path / "a.pt", tmp_path / "run2" / ".." / "b.pt"]) == "a+b"


def test_ensembles_whose_names_could_collide_get_the_digest_of_their_paths(tmp_path):
    """`a other/b` and `a other_b`, `x/run/b` and `y/run/b`, `a+b c` and `a b+c` shared a name
    (#17, bad-input pass)."""
    a, other = tmp_path / "a.pt", tmp_path / "other"
    ensembles = [
        [a, tmp_path / "b.pt"],
        [a, other / "b.pt"],
        [a, tmp_path / "other_b.pt"],
        [a, tmp_path / "x" / "run" / "b.pt"],
        [a, tmp_path / "y" / "run" / "b.pt"],
        [tmp_path / "a+b.pt", tmp_path / "c.pt"],
        [a, tmp_path / "b+c.pt"],
        [a, tmp_path / "b.pt", tmp_path / "c.pt"],
    ]
    stems = [ensemble_stem(members) for members in ensembles]
    assert all(x != y for x, y in itertools.combinations(stems, 2)), stems
    assert re.fullmatch("a" + HASHED.format(n=1), stems[1])
    assert re.fullmatch("a" + HASHED.format(n=1), stems[3])
    assert re.fullmatch("a\\+b" + HASHED.format(n=1), stems[5])
    assert stems[7] == "a+b+c"


def test_a_long_ensemble_name_stays_a_valid_file_name_in_bytes(tmp_path):
    """Eight 27-character names would give a 223-character stem; a first member of 63 emoji
    (252 bytes) was cut at 60 characters, 240 bytes (#17, bad-input pass)."""
    members = [tmp_path / f"checkpoint_avg10_of_run_{i}.pt" for i in range(8)]
    long = ensemble_stem(members)
    assert re.fullmatch("checkpoint_avg10_of_run_0" + HASHED.format(n=7), long)
    emoji = tmp_path / ("\N{GRINNING FACE}" * 63 + ".pt")
    for stem in (long, ensemble_stem([emoji, tmp_path / "b.pt"])):
        assert len(stem.encode()) <= MAX_STEM
        name = f"{stem}.wmt14_full.en-de.hyp.de"
        (tmp_path / name).touch()  # a file system takes the name
