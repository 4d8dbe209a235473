"""Tests for transformer/cli/evaluate.py (the transformer-evaluate command)."""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.error

import pytest
import sacrebleu

from transformer.cli.evaluate import main
from transformer.config import Config, config_to_dict
from transformer.data.config import DataConfig
from transformer.decode.translator import Translator
from transformer.evaluate.bleu import corpus_scores

HYPS = ["Ein Mann isst einen Apfel.", "Zwei Hunde spielen im Schnee-Feld.", ""]
REFS = ["Ein Mann isst einen roten Apfel.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest."]


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_scores_an_existing_hypothesis_file(tmp_path, capsys):
    hyp = write_lines(tmp_path / "hyp.de", HYPS)
    ref = write_lines(tmp_path / "ref.de", REFS)
    out_json = tmp_path / "scores.json"
    assert main(["--hyp", str(hyp), "--ref", str(ref), "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    bleu = sacrebleu.corpus_bleu(HYPS, [REFS])
    assert f"sacreBLEU BLEU  = {bleu.score:.2f}" in printed
    assert "sacreBLEU chrF2" in printed and "tokenized BLEU (13a + compound split" in printed
    report = json.loads(out_json.read_text())
    assert report["scores"]["bleu"] == pytest.approx(bleu.score)
    assert report["scores"]["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score)
    assert report["scores"]["tokenized_bleu"] == pytest.approx(
        corpus_scores(HYPS, REFS)["tokenized_bleu"]
    )
    assert "tok:13a" in report["scores"]["signatures"]["bleu"]
    assert report["target_lang"] == "de"  # from the reference file's suffix


def test_a_hypothesis_pipe_scores_as_its_file_does(tmp_path, capsys):
    # `--hyp /dev/stdin` or `<(...)`: a pipe, which was "corpus file not found".
    ref = write_lines(tmp_path / "ref.de", REFS)
    pipe = tmp_path / "hyp.de"
    os.mkfifo(pipe)
    writer = threading.Thread(target=write_lines, args=(pipe, HYPS), daemon=True)
    writer.start()
    assert main(["--hyp", str(pipe), "--ref", str(ref), "--output-dir", str(tmp_path / "o")]) == 0
    writer.join()
    assert f"sacreBLEU BLEU  = {sacrebleu.corpus_bleu(HYPS, [REFS]).score:.2f}" in (
        capsys.readouterr().out
    )


def test_line_count_mismatch_names_both_files_and_counts(tmp_path, capsys):
    hyp = write_lines(tmp_path / "hyp.de", HYPS[:2])
    ref = write_lines(tmp_path / "ref.de", REFS)
    assert main(["--hyp", str(hyp), "--ref", str(ref)]) == 1
    error = capsys.readouterr().err
    assert f"{hyp} has 2 lines but {ref} has 3" in error


def test_translates_scores_and_writes_everything(
    translation_model, synthetic_tokenizer, tmp_path, capsys, synthetic_sentences, write_checkpoint
):
    checkpoint = tmp_path / "checkpoint_best.pt"
    write_checkpoint(checkpoint, translation_model, synthetic_tokenizer)
    sources = synthetic_sentences(6, seed=20)
    src = write_lines(tmp_path / "test.en", sources)
    ref = write_lines(tmp_path / "test.de", synthetic_sentences(6, seed=21))
    out_dir = tmp_path / "eval"
    args = ["--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref)]
    settings = ["--beam-size", "2", "--max-len-b", "8", "--device", "cpu"]
    assert main(args + settings + ["--output-dir", str(out_dir)]) == 0
    expected = Translator(translation_model, synthetic_tokenizer).translate(
        sources, beam_size=2, max_len_b=8
    )
    hyp_file = out_dir / "checkpoint_best.test.hyp.de"  # the checkpoint's data.target_lang
    assert hyp_file.read_text(encoding="utf-8") == "".join(h + "\n" for h in expected)
    report = json.loads((out_dir / "checkpoint_best.test.json").read_text())
    assert report["scores"]["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(expected, [ref.read_text().splitlines()]).score
    )
    assert report["decoding"]["beam_size"] == 2
    assert report["decoding"]["length_penalty"] == 0.6
    assert report["decoding"]["max_len_b"] == 8
    assert report["hyp"] == str(hyp_file) and report["checkpoint"] == str(checkpoint)
    assert report["checkpoints"] == [str(checkpoint)]  # as an ensemble's report lists them
    assert "sacreBLEU BLEU" in capsys.readouterr().out

    # default output place: next to the checkpoint
    assert main(args + settings) == 0
    assert (tmp_path / "checkpoint_best.test.hyp.de").is_file()
    assert (tmp_path / "checkpoint_best.test.json").is_file()


def test_the_default_hypothesis_file_ends_with_the_checkpoints_target_language(
    translation_model, synthetic_tokenizer, tmp_path, synthetic_sentences, write_checkpoint
):
    """A DE->EN checkpoint writes `<checkpoint>.<test>.hyp.en`, whatever the files are called;
    `--output-dir` is created when missing (it names a directory, not a file)."""
    config = Config(
        model=translation_model.config, data=DataConfig(source_lang="de", target_lang="en")
    )
    checkpoint = tmp_path / "avg.pt"
    write_checkpoint(
        checkpoint, translation_model, synthetic_tokenizer, config=config_to_dict(config)
    )
    src = write_lines(tmp_path / "newstest2014.src", synthetic_sentences(2, seed=20))
    ref = write_lines(tmp_path / "newstest2014.ref", synthetic_sentences(2, seed=21))
    args = ["--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref)]
    assert main(args + ["--max-len-b", "4", "--beam-size", "1", "--device", "cpu"]) == 0
    assert sorted(p.name for p in tmp_path.glob("avg.*")) == [
        "avg.newstest2014.hyp.en",
        "avg.newstest2014.json",
        "avg.pt",
    ]
    out_dir = tmp_path / "new" / "eval"
    assert main(args + ["--max-len-b", "4", "--output-dir", str(out_dir)]) == 0
    assert (out_dir / "avg.newstest2014.hyp.en").is_file()


def test_test_set_download_failure_names_the_local_alternative(monkeypatch, capsys, tmp_path):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("sacrebleu.utils.get_source_file", offline)
    monkeypatch.setattr("sacrebleu.utils.get_reference_files", offline)
    checkpoint = tmp_path / "unused.pt"
    checkpoint.write_bytes(b"")  # exists (checked first), never read: the test set fails first
    args = ["--checkpoint", str(checkpoint), "--test-set", "wmt14/full", "--langpair", "en-de"]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert "wmt14/full" in error and "--src FILE --ref FILE" in error
    assert (
        main(["--checkpoint", str(checkpoint), "--test-set", "wmt99", "--langpair", "en-de"]) == 1
    )
    assert "unknown sacreBLEU test set 'wmt99'" in capsys.readouterr().err
    assert (
        main(["--checkpoint", str(checkpoint), "--test-set", "wmt14/full", "--langpair", "xx-de"])
        == 1
    )
    assert "no language pair 'xx-de'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--ref", "r.de"], "give --checkpoint"),
        (["--hyp", "h.de", "--ref", "r.de", "--checkpoint", "c.pt"], "--hyp scores"),
        (["--checkpoint", "c.pt", "--ref", "r.de"], "give --src"),
        (["--checkpoint", "c.pt", "--src", "s.en"], "give --ref"),
        (["--checkpoint", "c.pt", "--test-set", "wmt14/full"], "needs --langpair"),
    ],
)
def test_inconsistent_arguments_are_rejected(argv, message, capsys):
    assert main(argv) == 2  # a wrong command line
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_real_test_set_scores_equal_sacrebleu(shared_data, tmp_path, capsys):
    ref = shared_data / "multi30k" / "test_2016_flickr.de"
    refs = ref.read_text(encoding="utf-8").splitlines()
    hyps = refs[1:] + refs[:1]  # every hypothesis is another sentence's reference
    hyp = write_lines(tmp_path / "shifted.de", hyps)
    out_json = tmp_path / "scores.json"
    assert main(["--hyp", str(hyp), "--ref", str(ref), "--json", str(out_json)]) == 0
    scores = json.loads(out_json.read_text())["scores"]
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert main(["--hyp", str(ref), "--ref", str(ref)]) == 0
    assert "sacreBLEU BLEU  = 100.00" in capsys.readouterr().out


def test_empty_files_say_there_is_nothing_to_score(tmp_path, capsys):
    empty = tmp_path / "e"
    empty.write_text("")
    assert main(["--hyp", str(empty), "--ref", str(empty)]) == 1
    error = capsys.readouterr().err
    assert error == f"transformer-evaluate: error: nothing to score: {empty} is empty\n"
    never = tmp_path / "never-read.pt"
    never.write_bytes(b"")  # exists (checked first), never read: the empty source ends it
    never = str(never)
    assert main(["--checkpoint", never, "--src", str(empty), "--ref", str(empty)]) == 1
    assert f"nothing to score: {empty} is empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, value", [("--beam-size", "0"), ("--length-penalty", "nan"), ("--max-len-b", "-2")]
)
def test_decoding_options_are_checked_first(tmp_path, capsys, option, value):
    src = write_lines(tmp_path / "s.en", ["a man ."])
    never = tmp_path / "never-read.pt"
    never.write_bytes(b"")  # exists (checked first), never read: the empty source ends it
    never = str(never)
    argv = ["--checkpoint", never, "--src", str(src), "--ref", str(src), option, value]
    assert main(argv) == 2
    error = capsys.readouterr().err.splitlines()[-1]  # after the usage, as argparse prints
    assert error.startswith(f"transformer-evaluate: error: {option} (")


@pytest.mark.parametrize(
    "outputs, message",
    [
        (["--json", "{hyp}"], "--json .*hyp.de is also an input"),
        (["--json", "{ref}"], "--json .*ref.de is also an input"),
        (["--json", "{tmp}"], "--json .* is a directory"),
        (["--json", "{ref}/x.json"], "ref.de is a file, not a directory"),
    ],
)
def test_outputs_never_overwrite_inputs(tmp_path, capsys, outputs, message):
    hyp = write_lines(tmp_path / "hyp.de", HYPS)
    ref = write_lines(tmp_path / "ref.de", REFS)
    before = {p: p.read_bytes() for p in (hyp, ref)}
    names = {"hyp": hyp, "ref": ref, "tmp": tmp_path}
    argv = ["--hyp", str(hyp), "--ref", str(ref), *(o.format(**names) for o in outputs)]
    assert main(argv) == 1
    assert re.search(message, capsys.readouterr().err)
    assert {p: p.read_bytes() for p in (hyp, ref)} == before


def test_outputs_checked_first(
    translation_model,
    synthetic_tokenizer,
    tmp_path,
    capsys,
    monkeypatch,
    synthetic_sentences,
    write_checkpoint,
):
    checkpoint = tmp_path / "checkpoint_best.pt"
    write_checkpoint(checkpoint, translation_model, synthetic_tokenizer)
    src = write_lines(tmp_path / "test.en", synthetic_sentences(3, seed=20))
    ref = write_lines(tmp_path / "test.de", synthetic_sentences(3, seed=21))
    before = src.read_bytes()
    monkeypatch.setattr(Translator, "translate", lambda *a, **k: pytest.fail("translated"))
    args = ["--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref)]
    assert main(args + ["--hyp-out", str(src)]) == 1
    assert "--hyp-out" in capsys.readouterr().err and src.read_bytes() == before
    assert main(args + ["--hyp-out", str(tmp_path / "h"), "--json", str(tmp_path / "h")]) == 2
    assert "name the same file" in capsys.readouterr().err


def test_an_output_dir_that_is_a_dangling_link_is_refused_before_scoring(tmp_path, capsys):
    hyp = write_lines(tmp_path / "hyp.de", HYPS)
    ref = write_lines(tmp_path / "ref.de", REFS)
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    assert main(["--hyp", str(hyp), "--ref", str(ref), "--output-dir", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing scored
    (error,) = captured.err.splitlines()
    assert error.startswith(f"transformer-evaluate: error: --output-dir {out / 'hyp.de.json'}: ")
    assert f"{out} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in error


def test_an_output_dir_that_is_a_file_is_named_as_the_option_given(tmp_path, capsys):
    """It was reported as `--json FILE/hyp.de.json` (#17, bad-input pass)."""
    hyp = write_lines(tmp_path / "hyp.de", HYPS)
    ref = write_lines(tmp_path / "ref.de", REFS)
    assert main(["--hyp", str(hyp), "--ref", str(ref), "--output-dir", str(ref)]) == 1
    assert capsys.readouterr() == (
        "",
        f"transformer-evaluate: error: --output-dir {ref} is a file, not a directory\n",
    )


def test_hyp_out_and_json_through_a_link_are_one_file(tmp_path, capsys):
    hyp = write_lines(tmp_path / "hyp.de", HYPS)
    ref = write_lines(tmp_path / "ref.de", REFS)
    (tmp_path / "scores.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "scores.json")
    argv = ["--hyp", str(hyp), "--ref", str(ref), "--json", str(tmp_path / "scores.json")]
    assert main([*argv, "--hyp-out", str(tmp_path / "link.json")]) == 2
    assert "--hyp-out and --json name the same file" in capsys.readouterr().err
    assert (tmp_path / "scores.json").read_text() == "{}"


def test_a_missing_checkpoint_is_named_before_the_outputs_named_after_it(tmp_path, capsys):
    """Its folder missing too, the error was about creating the --json folder (#17)."""
    write_lines(tmp_path / "src.en", ["a b"])
    write_lines(tmp_path / "ref.de", ["a b"])
    missing = tmp_path / "no-run" / "checkpoint_avg5.pt"
    argv = ["--checkpoint", str(missing), "--src", str(tmp_path / "src.en")]
    assert main([*argv, "--ref", str(tmp_path / "ref.de")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"transformer-evaluate: error: checkpoint not found: {missing}"


@pytest.fixture
def two_members(
    translation_model, synthetic_tokenizer, tmp_path, write_checkpoint, make_search_model
):
    """(a.pt, b.pt, b's model): two checkpoints of one vocabulary that decode differently."""
    first = write_checkpoint(tmp_path / "a.pt", translation_model, synthetic_tokenizer)
    other = make_search_model(synthetic_tokenizer.vocab_size, seed=5)
    return first, write_checkpoint(tmp_path / "b.pt", other, synthetic_tokenizer), other


def test_several_checkpoints_decode_as_the_ensemble_transformer_translate_builds(
    two_members, tmp_path, capsys, synthetic_sentences
):
    first, second, _ = two_members
    sources = synthetic_sentences(5, seed=30)
    src = write_lines(tmp_path / "test.en", sources)
    ref = write_lines(tmp_path / "test.de", synthetic_sentences(5, seed=31))
    args = ["--src", str(src), "--ref", str(ref), "--beam-size", "2", "--max-len-b", "8"]

    missing = tmp_path / "missing.pt"
    assert main(["--checkpoint", str(first), str(missing), *args]) == 1
    assert (
        capsys.readouterr().err == f"transformer-evaluate: error: checkpoint not found: {missing}\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "b.pt", "test.de", "test.en"]

    assert main(["--checkpoint", str(first), str(second), *args]) == 0
    expected = Translator.from_checkpoints([first, second]).translate(
        sources, beam_size=2, max_len_b=8
    )
    alone = Translator.from_checkpoint(first).translate(sources, beam_size=2, max_len_b=8)
    assert expected != alone  # the second member changes the search
    hyp_file = tmp_path / "a+b.test.hyp.de"  # next to the first member
    assert hyp_file.read_text(encoding="utf-8") == "".join(h + "\n" for h in expected)
    report = json.loads((tmp_path / "a+b.test.json").read_text())
    assert report["checkpoints"] == [str(first), str(second)] and "checkpoint" not in report
    assert report["scores"]["bleu"] == pytest.approx(
        sacrebleu.corpus_bleu(expected, [ref.read_text().splitlines()]).score
    )


def test_checkpoint_given_twice_is_one_ensemble_and_members_must_translate_one_way(
    two_members, synthetic_tokenizer, tmp_path, capsys, synthetic_sentences, write_checkpoint
):
    """`--checkpoint a --checkpoint b` kept only b; an EN->DE and a DE->EN model with one
    joint vocabulary decoded together (#17, bad-input pass)."""
    first, second, other = two_members
    src = write_lines(tmp_path / "test.en", synthetic_sentences(3, seed=32))
    ref = write_lines(tmp_path / "test.de", synthetic_sentences(3, seed=33))
    args = ["--src", str(src), "--ref", str(ref), "--beam-size", "2", "--max-len-b", "6"]
    assert main(["--checkpoint", str(first), "--checkpoint", str(second), *args]) == 0
    report = json.loads((tmp_path / "a+b.test.json").read_text())
    assert report["checkpoints"] == [str(first), str(second)]

    reverse = Config(model=other.config, data=DataConfig(source_lang="de", target_lang="en"))
    backwards = write_checkpoint(
        tmp_path / "r.pt", other, synthetic_tokenizer, config=config_to_dict(reverse)
    )
    capsys.readouterr()
    assert main(["--checkpoint", str(first), str(backwards), *args]) == 1
    assert capsys.readouterr().err == (
        f"transformer-evaluate: error: {backwards} translates de->en, not en->de as {first} "
        "does: an ensemble's members translate one way\n"
    )


def test_two_ensembles_with_one_first_member_write_their_own_files(
    two_members, tmp_path, capsys, synthetic_sentences
):
    """Both ensembles were written to `a.ensemble2.test.*`, the second over the first (#17,
    bad-input pass); the same file twice is no ensemble."""
    first, second, _ = two_members
    elsewhere = tmp_path / "run2"
    elsewhere.mkdir()
    third = elsewhere / "b.pt"
    third.write_bytes(second.read_bytes())  # another file of the same name, in run2/
    src = write_lines(tmp_path / "test.en", synthetic_sentences(3, seed=34))
    ref = write_lines(tmp_path / "test.de", synthetic_sentences(3, seed=35))
    args = ["--src", str(src), "--ref", str(ref), "--beam-size", "2", "--max-len-b", "6"]
    assert main(["--checkpoint", str(first), str(second), *args]) == 0
    assert main(["--checkpoint", str(first), str(third), *args]) == 0
    reports = {
        path.name: json.loads(path.read_text())["checkpoints"]
        for path in tmp_path.glob("a+*.test.json")
    }
    (other,) = set(reports) - {"a+b.test.json"}  # a+1more-<digest>: b is in another directory
    assert reports == {"a+b.test.json": [str(first), str(second)], other: [str(first), str(third)]}
    assert (tmp_path / other.replace(".json", ".hyp.de")).is_file()

    capsys.readouterr()
    assert main(["--checkpoint", str(first), str(second), str(first), *args]) == 1
    assert capsys.readouterr().err == (
        f"transformer-evaluate: error: {first} is the same file as {first}: an ensemble's "
        "members must be different checkpoints\n"
    )
