"""Checkpoints: atomic writes, safe and checked reads, rebuilding the model from the file.

What a read checks inside the file (the types of its entries, the model config, tied
weights) is tested in test_checkpoint_contents.py.
"""

from __future__ import annotations

import os
import pickle
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from transformer.checkpoint import (
    FORMAT_VERSION,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
    strip_wrapper_prefixes,
)


@pytest.fixture
def model(make_model, tiny_tokenizer):
    """A small model in training mode (as training saves it)."""
    return make_model(tiny_tokenizer.vocab_size).train()


def test_round_trip_rebuilds_the_model_in_eval_mode(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    path = tmp_path / "c.pt"
    save_checkpoint(checkpoint_state(model, tiny_tokenizer, 7), path)
    assert torch.load(path, weights_only=True)["step"] == 7
    loaded, tokenizer, config = load_checkpoint(path)
    assert not loaded.training
    assert config.model == model.config
    assert tokenizer.src_model_bytes == tiny_tokenizer.src_model_bytes
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    # Tied weights stay tied after loading.
    assert loaded.src_embed.weight.data_ptr() == loaded.output_projection.weight.data_ptr()
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_wrapper_prefixes_are_stripped(tmp_path, model, tiny_tokenizer, checkpoint_state):
    prefixed = {f"module._orig_mod.{k}": v for k, v in model.state_dict().items()}
    assert strip_wrapper_prefixes(prefixed).keys() == model.state_dict().keys()
    path = tmp_path / "c.pt"
    save_checkpoint({**checkpoint_state(model, tiny_tokenizer, 7), "model": prefixed}, path)
    loaded, _, _ = load_checkpoint(path)
    assert torch.equal(loaded.src_embed.weight, model.src_embed.weight)


def test_read_errors_name_the_path_and_the_problem(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    missing = tmp_path / "missing.pt"
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        read_checkpoint(missing)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="garbage.pt.*not a readable checkpoint"):
        read_checkpoint(garbage)
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(1)}, plain)
    with pytest.raises(ValueError, match="plain.pt.*format_version"):
        read_checkpoint(plain)
    future = tmp_path / "future.pt"
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), "format_version": 99}, future)
    with pytest.raises(ValueError, match="future.pt.*format_version 99"):
        read_checkpoint(future)


class _Payload:
    """An arbitrary object: weights_only loading must refuse it (it could run code)."""


def test_objects_other_than_tensors_and_plain_values_are_refused(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    path = tmp_path / "evil.pt"
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), "extra": _Payload()}, path)
    with pytest.raises(ValueError, match="evil.pt"):
        read_checkpoint(path)


def test_failed_save_keeps_the_previous_file(tmp_path, model, tiny_tokenizer, checkpoint_state):
    path = tmp_path / "c.pt"
    save_checkpoint(checkpoint_state(model, tiny_tokenizer, 7), path)
    with pytest.raises(Exception):  # noqa: B017 - whatever torch.save raises for a lambda
        save_checkpoint({"format_version": 1, "bad": lambda: None}, path)
    assert read_checkpoint(path)["step"] == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def test_bytes_changed_inside_a_tensor_are_refused_not_loaded(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    """torch.load read a checkpoint with 20,000 overwritten bytes in its embedding and the
    model translated `??` everywhere, exit 0 (#17, bad-input pass): the archive's CRC-32s
    catch it. The damage is placed in the largest tensor's bytes, found with zipfile."""
    import zipfile

    path = tmp_path / "c.pt"
    save_checkpoint(checkpoint_state(model, tiny_tokenizer, 7), path)
    with zipfile.ZipFile(path) as archive:
        member = max(archive.infolist(), key=lambda info: info.file_size)
        start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    assert member.compress_type == zipfile.ZIP_STORED  # torch stores tensors uncompressed
    data = bytearray(path.read_bytes())
    data[start + 8 : start + 8 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"c\.pt: damaged checkpoint: .* fails its CRC-32"):
        read_checkpoint(path)


WRITER = """
import sys, torch
from transformer.checkpoint import save_checkpoint
step = 0
while True:
    step += 1
    save_checkpoint({"format_version": 1, "model": {"w": torch.full((500_000,), float(step))},
                     "model_config": {}, "step": step}, sys.argv[1])
    print(step, flush=True)
"""


def test_kill_9_during_saves_never_leaves_a_truncated_checkpoint(tmp_path):
    path = tmp_path / "c.pt"
    rng = random.Random(0)
    for _ in range(3):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        process.stdout.readline()  # at least one checkpoint is complete
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        process.stdout.close()
        state = read_checkpoint(path)
        assert torch.all(state["model"]["w"] == state["step"])


@pytest.mark.parametrize(
    "content", [b"hello world\n", b"model: 5\n", b"", b"\x00" * 10, b"PK\x03\x04junk"]
)
def test_text_and_empty_files_are_not_readable_checkpoints(tmp_path, content):
    path = tmp_path / "notes.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError) as error:
        read_checkpoint(path)
    message = str(error.value)
    assert message.startswith(f"{path}: not a readable checkpoint")
    assert "weights_only" not in message and "\n" not in message
    if not content:
        assert message.endswith("the file is empty (0 bytes)")


def test_arbitrary_objects_message_omits_the_weights_only_false_advice(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    path = tmp_path / "evil.pt"
    torch.save({**checkpoint_state(model, tiny_tokenizer, 7), "extra": _Payload()}, path)
    with pytest.raises(ValueError) as error:
        read_checkpoint(path)
    assert "Unsupported global" in str(error.value)
    assert "weights_only" not in str(error.value)


def test_tampered_spm_bytes_name_the_checkpoint(tmp_path, model, tiny_tokenizer, checkpoint_state):
    path = tmp_path / "tampered.pt"
    torch.save(
        checkpoint_state(model, tiny_tokenizer, 7, spm_model=b"not a sentencepiece model"), path
    )
    with pytest.raises(ValueError, match=rf"^{path}: .*SentencePiece"):
        load_checkpoint(path)


class _SystemCall:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_pickled_function_call_is_refused_without_the_weights_only_false_advice(tmp_path):
    path = tmp_path / "call.pt"
    torch.save({"format_version": FORMAT_VERSION, "payload": _SystemCall()}, path)
    with pytest.raises(ValueError) as error:
        read_checkpoint(path)
    message = str(error.value)
    assert str(path) in message and "GLOBAL" in message and "system" in message
    assert "weights_only" not in message and "\n" not in message


@pytest.mark.parametrize("path", ["/dev/null", "."])
def test_a_path_that_exists_but_is_no_regular_file_is_not_called_missing(path):
    with pytest.raises(ValueError, match="not a checkpoint file .it is not a regular file.$"):
        read_checkpoint(path)


def test_a_plain_pickle_is_refused_in_one_line_without_torch_warnings(tmp_path, recwarn):
    """`pickle.dump` of a dict, not `torch.save`: torch.load warned about the pickle protocol
    on stderr before the error (bad-input pass, #17)."""
    path = tmp_path / "foreign.pt"
    path.write_bytes(pickle.dumps({"a": 1}, protocol=4))
    with pytest.raises(ValueError, match=r"foreign\.pt: not a readable checkpoint") as error:
        read_checkpoint(path)
    assert "\n" not in str(error.value)
    assert [str(warning.message) for warning in recwarn] == []


@pytest.mark.parametrize("device", ["tpu", "cuda:0"])
def test_unknown_or_unavailable_device_is_a_clear_error(
    tmp_path, model, tiny_tokenizer, checkpoint_state, device
):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    path = tmp_path / "ok.pt"
    torch.save(checkpoint_state(model, tiny_tokenizer, 7), path)
    with pytest.raises(ValueError, match=f"device '{device}'"):
        load_checkpoint(path, device=device)


@pytest.mark.parametrize("path", [None, 3, ["c.pt"]])
def test_a_path_that_is_not_a_file_name_is_a_value_error(path):
    with pytest.raises(ValueError, match=r"^checkpoint path must be a file name, not "):
        load_checkpoint(path)


def test_the_meta_device_is_refused(tmp_path, model, tiny_tokenizer, checkpoint_state):
    path = tmp_path / "ok.pt"
    torch.save(checkpoint_state(model, tiny_tokenizer, 7), path)
    with pytest.raises(ValueError, match=r"^device 'meta' is not a device this project runs on"):
        load_checkpoint(path, device="meta")


def test_a_checkpoint_holding_the_other_schedules_ignored_knob_still_loads(
    tmp_path, model, tiny_tokenizer, checkpoint_state
):
    """Runs from before train.peak_lr / lr_scale were checked against lr_schedule stored the
    knob their schedule ignored (make demo's own tries did); they load, without it."""
    state = checkpoint_state(model, tiny_tokenizer, 7)
    train = state.setdefault("config", {}).setdefault("train", {})
    train.update(lr_schedule="inverse_sqrt", peak_lr=0.005, lr_scale=0.32)
    save_checkpoint(state, tmp_path / "c.pt")
    config = load_checkpoint(tmp_path / "c.pt")[2]
    assert (config.train.peak_lr, config.train.lr_scale) == (0.005, 1.0)
