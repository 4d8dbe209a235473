"""benchmarks/linear_kernels.py: plain `nn.Linear` against the same layer swapped for oneDNN."""

from __future__ import annotations

import pytest

from benchmarks import linear_kernels
from transformer.cpu import onednn
from transformer.cpu.onednn import onednn_available


def test_linear_kernels_script_prints_every_product(capsys):
    status = linear_kernels.main(["--threads", "1", "--rounds", "1"])
    out = capsys.readouterr().out
    if not onednn_available():
        assert status == 1 and "no oneDNN" in out
        return
    rows = [line for line in out.splitlines() if "ms" in line]
    assert status == 0 and len(rows) == 2 * len(linear_kernels.SHAPES)
    # The two kernels compute the same float32 products: outputs differ by rounding only.
    assert all(float(row.split()[-1]) < 1e-3 for row in rows)


@pytest.mark.skipif(not onednn_available(), reason="this PyTorch build has no oneDNN operator")
def test_the_onednn_side_really_computes_with_onednn(monkeypatch):
    """Forward and backward of the swapped layer go to oneDNN; the plain layer never does."""
    calls = []
    real = onednn._onednn_matmul

    def counting(x, w, b):
        calls.append(tuple(w.shape))
        return real(x, w, b)

    monkeypatch.setattr(onednn, "_onednn_matmul", counting)
    result = linear_kernels.measure(48, 16, rows=8, rounds=2)
    assert result["max_abs_diff"] < 1e-4
    # 1 no-grad output + (1 warm-up + 1 timed) x 2 rounds, forward and forward + backward
    # (backward: dL/dx and dL/dW); a plain layer calling oneDNN would add more.
    forward, train = 1 + 2 * 2, 2 * 2 * 3
    assert len(calls) == forward + train
