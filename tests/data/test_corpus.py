"""Reading parallel text: real Multi30k files, tiny broken corpora, whole or in chunks."""

from __future__ import annotations

import os
import re
import threading

import pytest

from transformer.data.corpus import (
    corpus_fingerprint,
    corpus_size,
    iter_parallel,
    read_lines,
    read_parallel,
    resolve_prefix,
    split_lines,
)


def write_pair(tmp_path, name, src, tgt, src_lang="en", tgt_lang="de"):
    """Write PREFIX.en / PREFIX.de (bytes or str lines) and return the prefix."""
    for lang, lines in ((src_lang, src), (tgt_lang, tgt)):
        data = lines if isinstance(lines, bytes) else "".join(f"{x}\n" for x in lines).encode()
        (tmp_path / f"{name}.{lang}").write_bytes(data)
    return str(tmp_path / name)


def test_reads_real_multi30k_validation(shared_data):
    prefix = shared_data / "multi30k" / "val"
    text = read_parallel(str(prefix), "en", "de")
    with open(f"{prefix}.en", encoding="utf-8") as en, open(f"{prefix}.de", encoding="utf-8") as de:
        expected_en, expected_de = en.read().splitlines(), de.read().splitlines()
    assert len(text) == len(expected_en) == 1014
    assert text.src == expected_en and text.tgt == expected_de


def test_either_direction_from_the_same_files(shared_data):
    prefix = str(shared_data / "multi30k" / "test_2016_flickr")
    en_de, de_en = read_parallel(prefix, "en", "de"), read_parallel(prefix, "de", "en")
    assert de_en.src == en_de.tgt and de_en.tgt == en_de.src
    assert de_en.fingerprint != en_de.fingerprint


def test_relative_paths_use_transformer_data_dir_then_cwd(shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(shared_data))
    assert resolve_prefix("multi30k/val") == shared_data / "multi30k" / "val"
    assert len(read_parallel("multi30k/val", "en", "de")) == 1014
    monkeypatch.delenv("TRANSFORMER_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    write_pair(tmp_path, "tiny", ["a", "b"], ["x", "y"])
    assert read_parallel("tiny", "en", "de").tgt == ["x", "y"]
    assert resolve_prefix("/abs/prefix").as_posix() == "/abs/prefix"


def test_missing_file_names_the_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_DATA_DIR", str(tmp_path))
    (tmp_path / "only.en").write_text("hello\n")
    with pytest.raises(FileNotFoundError, match=r"only\.de.*TRANSFORMER_DATA_DIR"):
        read_parallel("only", "en", "de")


def test_misaligned_files_name_both_files_and_counts(tmp_path):
    prefix = write_pair(tmp_path, "bad", ["a", "b", "c"], ["x", "y"])
    with pytest.raises(ValueError) as info:
        read_parallel(prefix, "en", "de")
    message = str(info.value)
    assert "bad.en" in message and "bad.de" in message
    assert "3 lines" in message and "2 lines" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    prefix = write_pair(tmp_path, "enc", ["a", "b", "c"], b"x\ny\nz \xff end\n")
    with pytest.raises(ValueError, match=r"enc\.de: line 3 is not valid UTF-8"):
        read_parallel(prefix, "en", "de")


def test_line_splitting_matches_line_numbers(tmp_path):
    # CRLF endings, no final newline, a BOM, and a U+2028 inside a sentence (not a new line).
    (tmp_path / "f.txt").write_bytes("\ufeffa\r\nb\u2028c\n\nlast".encode())
    assert read_lines(tmp_path / "f.txt") == ["a", "b\u2028c", "", "last"]


def test_a_pipe_reads_like_a_file(tmp_path):
    # `--src /dev/stdin` and the shell's `<(...)` are pipes, not regular files.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(
        target=pipe.write_bytes, args=("a\nb\u2028c\n".encode(),), daemon=True
    )
    writer.start()
    assert read_lines(pipe) == ["a", "b\u2028c"]
    writer.join()


def test_a_directory_or_a_missing_file_is_named(tmp_path):
    with pytest.raises(IsADirectoryError, match=f"^{re.escape(str(tmp_path))} is a directory"):
        read_lines(tmp_path)
    with pytest.raises(FileNotFoundError, match="corpus file not found: .*missing.txt"):
        read_lines(tmp_path / "missing.txt")


@pytest.mark.parametrize("text", ["", "\n", "a\r\nb\n", "a\n\nb", "x\r\n\r\ny\r\n"])
def test_split_lines_matches_splitlines_on_newlines_only(text):
    assert split_lines(text) == text.splitlines()
    assert split_lines("a\u2028b\n") == ["a\u2028b"]  # str.splitlines would split here


def test_empty_lines_on_one_side_are_kept_aligned(tmp_path):
    prefix = write_pair(tmp_path, "gaps", ["a", "", "c"], ["x", "y", "  "])
    text = read_parallel(prefix, "en", "de")
    assert text.src == ["a", "", "c"] and text.tgt == ["x", "y", "  "]


def test_fingerprint_follows_content(tmp_path):
    prefix = write_pair(tmp_path, "fp", ["a"], ["x"])
    first = corpus_fingerprint(prefix, "en", "de")
    assert first == read_parallel(prefix, "en", "de").fingerprint
    write_pair(tmp_path, "fp", ["a"], ["y"])
    assert corpus_fingerprint(prefix, "en", "de") != first


def test_chunks_name_the_line_of_bad_utf8_and_the_counts_of_misaligned_files(tmp_path):
    lines = [f"line {i}" for i in range(10)]
    bad = "".join(f"{x}\n" for x in lines).encode() + b"caf\xe9\n"  # line 11
    prefix = write_pair(tmp_path, "bad", bad, lines + ["ok"])
    with pytest.raises(ValueError, match=r"bad\.en: line 11 is not valid UTF-8"):
        list(iter_parallel(prefix, "en", "de", chunk_pairs=4))
    short = write_pair(tmp_path, "short", lines, lines[:7])
    with pytest.raises(ValueError, match=r"short\.en has 10 lines but .*short\.de has 7 lines"):
        list(iter_parallel(short, "en", "de", chunk_pairs=3))
    no_newline = write_pair(tmp_path, "last", b"a\r\nb", b"x\ny\n")  # no final newline, CRLF
    assert list(iter_parallel(no_newline, "en", "de", chunk_pairs=1)) == [
        (["a"], ["x"]),
        (["b"], ["y"]),
    ]
    assert corpus_size(no_newline, "en", "de") == 2


def test_bom_is_dropped_from_the_first_chunk_only(tmp_path):
    prefix = write_pair(tmp_path, "bom", "\ufeffa\n\ufeffb\n".encode(), ["x", "y"])
    assert list(iter_parallel(prefix, "en", "de", chunk_pairs=1))[1] == (["\ufeffb"], ["y"])
    assert read_parallel(prefix, "en", "de").src == ["a", "\ufeffb"]
