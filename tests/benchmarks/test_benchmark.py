"""Smoke tests of benchmarks/benchmark.py with tiny dimensions (the real run: BENCHMARKS.md)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.benchmark import main
from benchmarks.engines import EOS_ID, PAD_ID, Dims, Engine, random_batch, random_sources
from benchmarks.peers import TorchNNPeer
from benchmarks.plan import Plan
from transformer import Transformer

TINY = Dims(vocab_size=64, d_model=32, d_ff=64, n_heads=4, n_layers=2, max_positions=256)


def tiny_plan(engines: tuple[str, ...]) -> Plan:
    return Plan(
        "quick",
        TINY,
        "test: tiny dims",
        train_batch=2,
        train_length=6,
        train_rounds=2,
        decode_batch=2,
        decode_src_length=5,
        decode_length=6,
        decode_rounds=2,
        scaling_decode_batch=1,
        scaling_decode_lengths=(25, 200),
        scaling_decode_rounds=2,
        scaling_train_batch=1,
        scaling_train_lengths=(),  # skipped: one worker start less
        scaling_train_steps=1,
        engines=engines,
        train_dtypes=("fp32",),
        load_sample_seconds=0.1,
    )


def test_random_batch_is_shifted_and_padded():
    batch = {k: torch.tensor(v) for k, v in random_batch(4, 10, 50, seed=0).items()}
    assert batch["src"].shape == batch["tgt_in"].shape == batch["tgt_out"].shape == (4, 10)
    real = batch["tgt_out"].ne(PAD_ID)
    assert torch.equal(real, batch["tgt_in"].ne(PAD_ID))  # same length: bos + w == w + eos
    assert torch.equal(batch["tgt_in"][:, 1:][real[:, 1:]], batch["tgt_out"][:, :-1][real[:, 1:]])
    assert (batch["tgt_out"].eq(EOS_ID).sum(1) == 1).all()
    assert random_batch(4, 10, 50, seed=0) == random_batch(4, 10, 50, seed=0)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_torch_nn_peer_computes_our_function():
    """With our weights copied in, the torch.nn.Transformer peer gives our logits."""
    torch.manual_seed(0)
    ours = Transformer(TINY.model_config()).eval()
    peer = TorchNNPeer(TINY).eval()
    with torch.no_grad():
        peer.embed.weight.copy_(ours.src_embed.weight)
        pairs = [
            (a, b, "self_attn")
            for a, b in zip(ours.encoder.layers, peer.transformer.encoder.layers, strict=True)
        ]
        pairs += [
            (a, b, "self_attn")
            for a, b in zip(ours.decoder.layers, peer.transformer.decoder.layers, strict=True)
        ]
        pairs += [
            (a, b, "cross_attn")
            for a, b in zip(ours.decoder.layers, peer.transformer.decoder.layers, strict=True)
        ]
        for layer, nn_layer, name in pairs:
            attn = getattr(layer, name)
            nn_attn = nn_layer.self_attn if name == "self_attn" else nn_layer.multihead_attn
            nn_attn.in_proj_weight.copy_(
                torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
            )
            nn_attn.in_proj_bias.copy_(
                torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
            )
            nn_attn.out_proj.load_state_dict(attn.out_proj.state_dict())
            nn_layer.linear1.load_state_dict(layer.feed_forward.linear1.state_dict())
            nn_layer.linear2.load_state_dict(layer.feed_forward.linear2.state_dict())
            for i in (1, 2, 3):
                if hasattr(layer, f"norm{i}"):
                    getattr(nn_layer, f"norm{i}").load_state_dict(
                        getattr(layer, f"norm{i}").state_dict()
                    )
        batch = {k: torch.tensor(v) for k, v in random_batch(3, 9, TINY.vocab_size, 2).items()}
        expected = ours(batch["src"], batch["tgt_in"])
        actual = peer(batch["src"], batch["tgt_in"])
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_marian_peer_matches_our_setup():
    pytest.importorskip("transformers")
    engine = Engine("hf", TINY, seed=0)
    config = engine.model.config
    assert config.activation_function == "relu" and config.scale_embedding
    assert (config.dropout, config.attention_dropout, config.activation_dropout) == (0.1, 0.0, 0.0)
    assert config.d_model == TINY.d_model and config.encoder_ffn_dim == TINY.d_ff
    ours = Engine("ours", TINY, seed=0)
    assert engine.describe()["parameters"] == ours.describe()["parameters"]
    src = random_sources(2, 5, TINY.vocab_size, seed=1)
    for beam_size in (1, 4):
        tokens = engine.decode(src, 7, beam_size=beam_size)["tokens"]
        assert all(len(row) == 7 and EOS_ID not in row for row in tokens)


def _run_main(tmp_path, engines, argv_extra=()):
    path = tmp_path / "bench.json"
    argv = ["--json", str(path), "--threads", "1", *argv_extra]
    assert main(argv, plan=tiny_plan(engines)) == 0
    return json.loads(path.read_text())


def test_json_report_has_the_required_keys(tmp_path):
    report = _run_main(tmp_path, ("ours", "torch_nn"))
    assert report["ratios"]["train_vs_torch_nn"] > 0
    assert report["ratios"]["decode_200_over_25"] > 0
    for key in ("machine", "torch_version", "device", "figures", "load", "targets", "engines"):
        assert key in report
    assert report["cache_check"]["equal"]
    figure = report["figures"]["train_fp32_ours"]
    assert figure["min"] <= figure["median"] <= figure["max"]
    assert {t["key"] for t in report["targets"]} >= {"train_vs_torch_nn", "decode_200_over_25"}
    assert "disturbed" in report["load"]
    commit = report["source"]["commit"]  # the measured code (None outside a git checkout)
    assert commit is None or (len(commit) == 40 and isinstance(report["source"]["dirty"], bool))


def test_a_disturbed_run_says_so_next_to_every_verdict():
    from benchmarks.report import format_table

    stats = {"median": 1.5, "min": 1.4, "max": 1.6}
    report = {
        "mode": "full",
        "device": "cpu",
        "dims_note": "dims",
        "figures": {},
        "ratio_stats": {"train_vs_hf": stats},
        "targets": [{"key": "train_vs_hf", "target": ">= 1.0", "met": True}],
        "load": {"disturbed": True, "note": "busy"},
        "cache_check": None,
    }
    assert "met (disturbed run: measure again)" in format_table(report)
    report["load"]["disturbed"] = False
    assert "target >= 1.0: met\n" in format_table(report) + "\n"


@pytest.mark.slow  # starts a Hugging Face worker (importing transformers takes seconds)
def test_json_report_with_hugging_face_has_its_ratios(tmp_path):
    pytest.importorskip("transformers")
    report = _run_main(tmp_path, ("ours", "hf"))
    for key in ("train_vs_hf", "beam4_vs_hf", "greedy_vs_hf"):
        assert report["ratios"][key] > 0
    assert report["engines"]["hf"]["attn_implementation"] == "sdpa"


def test_training_flops_count_the_models_matmul_weights():
    """6 x (weights of every Linear x the tokens it sees) + attention, from the real model;
    the benchmark's count is the training logs' one (transformer/train/flops.py)."""
    import benchmarks.cuda
    import transformer.train.flops

    assert benchmarks.cuda.training_flops is transformer.train.flops.training_flops
    model = Transformer(TINY.model_config())
    B, S, T = 3, 7, 5

    def weights(module, keep=lambda name: True) -> int:
        return sum(
            m.weight.numel()
            for name, m in module.named_modules()
            if isinstance(m, torch.nn.Linear) and keep(name)
        )

    encoder = weights(model.encoder)
    # cross-attention W^K and W^V project the encoder output: source tokens
    on_memory = weights(
        model.decoder, lambda name: name.endswith(("cross_attn.k_proj", "cross_attn.v_proj"))
    )
    decoder = weights(model.decoder) - on_memory
    projection = model.output_projection.weight.numel()
    dense = 6 * ((encoder + on_memory) * B * S + (decoder + projection) * B * T)
    attention = 3 * 4 * TINY.d_model * TINY.n_layers * B * (S * S + T * T + T * S)
    assert benchmarks.cuda.training_flops(TINY.model_config(), [S] * B, [T] * B) == (
        dense + attention
    )


def test_the_peak_is_the_exact_models_or_the_override():
    from benchmarks.cuda import bf16_peak_tflops

    assert bf16_peak_tflops("NVIDIA H100 PCIe", None) == 756.0  # not the SXM's 989.4
    assert bf16_peak_tflops("NVIDIA H100 PCIe", 700.0) == 700.0
    assert bf16_peak_tflops("NVIDIA B200", None) is None  # unknown: tokens/s, no MFU
    assert bf16_peak_tflops("NVIDIA B200", 2250.0) == 2250.0


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_peak_tflops_must_be_a_positive_number(value, capsys):
    from benchmarks.benchmark import parse_args

    assert parse_args(["--peak-tflops", "312"]).peak_tflops == 312.0
    with pytest.raises(SystemExit):
        parse_args(["--peak-tflops", value])
    assert "--peak-tflops" in capsys.readouterr().err


def test_mfu_measurement_runs_on_cpu_without_compile():
    from benchmarks.cuda import measure_mfu

    result = measure_mfu(TINY, 2, 6, 1, 2, peak=1e12, device="cpu", compile_model=False, bf16=False)
    assert len(result["mfu"]) == 2 and all(0 < m < 1 for m in result["mfu"])
    assert result["target_tokens_per_second"][0] > 0
    unknown = measure_mfu(TINY, 2, 6, 1, 1, None, device="cpu", compile_model=False, bf16=False)
    assert unknown["mfu"] is None and unknown["target_tokens_per_second"][0] > 0


def test_an_unknown_gpu_gets_tokens_per_second_and_no_mfu(monkeypatch, capsys):
    """run_cuda_benchmark with a faked CUDA device and a faked measurement."""
    import benchmarks.cuda as cuda

    peaks = []

    def fake_measure(dims, batch_size, length, warmup, steps, peak):
        peaks.append(peak)
        mfu = None if peak is None else [0.5, 0.5]
        return {
            "step_seconds": [1.0, 1.0],
            "target_tokens_per_second": [100.0, 100.0],
            "mfu": mfu,
            "peak_memory_mib": 1.0,
            "parameters": 1,
        }

    monkeypatch.setattr(cuda.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda.torch.cuda, "get_device_name", lambda: "NVIDIA B200")
    monkeypatch.setattr(cuda, "measure_mfu", fake_measure)
    settings = type("Settings", (), {"apply": lambda self: None})()
    body = cuda.run_cuda_benchmark(settings, quick=True, peak_override=None)
    assert peaks == [None, None] and body["ratio_stats"] == {}
    assert "cuda_base_bf16_tokens_per_s" in body["figures"] and "no MFU" in body["dims_note"]
    assert "no peak bf16 FLOP/s known for 'NVIDIA B200'" in capsys.readouterr().out
    body = cuda.run_cuda_benchmark(settings, quick=True, peak_override=2250.0)
    assert peaks[2:] == [2250.0e12, 2250.0e12] and "mfu_base_bf16" in body["ratio_stats"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_a_gpu_is_one_line_before_any_measuring(capsys):
    from benchmarks import benchmark

    assert benchmark.main(["--device", "cuda", "--quick"]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "benchmark.py: error: --device cuda: no CUDA device is available "
        "(drop --device cuda for the CPU run)\n"
    )
    assert "measuring" not in captured.out


def test_a_missing_hugging_face_peer_names_the_extra(capsys, monkeypatch):
    import importlib.util

    from benchmarks import benchmark

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "transformers" else find_spec(name, *a),
    )
    assert benchmark.main(["--quick"]) == 2
    assert "pip install -e '.[bench]' (or --no-hf)" in capsys.readouterr().err
