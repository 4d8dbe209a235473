"""transformer/cpu/primitive_cache.py: oneDNN keeps the compiled products of every batch shape.

The reference is oneDNN's own report of each primitive it builds (`ONEDNN_VERBOSE=profile_create`
prints `create:cache_miss` or `create:cache_hit`), in a fresh process that multiplies bfloat16
matrices of five shapes twice, the way token-based batches change shape.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from transformer.cpu import primitive_cache
from transformer.cpu.primitive_cache import CAPACITY_VARIABLES, keep_compiled_products

# Five shapes, twice each: with room for five primitives the second round hits the cache.
PATTERN = """
import sys
import torch
from transformer.cpu.primitive_cache import keep_compiled_products
if sys.argv[1] != "none":
    print("set", keep_compiled_products(int(sys.argv[1])), flush=True)
weight = torch.randn(64, 64, dtype=torch.bfloat16)
for _ in range(2):
    for rows in (17, 33, 65, 129, 257):
        torch.nn.functional.linear(torch.randn(rows, 64, dtype=torch.bfloat16), weight)
"""


def cache_report(capacity: str, **environment: str) -> dict[str, int]:
    """Cache hits and misses oneDNN reports for `PATTERN` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in CAPACITY_VARIABLES}
    env.update(ONEDNN_VERBOSE="profile_create", **environment)
    out = subprocess.run(
        [sys.executable, "-c", PATTERN, capacity], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    counts = {
        "hits": sum("create:cache_hit" in line for line in lines),
        "misses": sum("create:cache_miss" in line for line in lines),
    }
    counts["set"] = next((line for line in lines if line.startswith("set ")), None)
    if counts["hits"] + counts["misses"] == 0:
        pytest.skip("this CPU's bfloat16 products do not go through oneDNN primitives")
    return counts


def test_the_capacity_set_after_torch_is_imported_is_the_one_onednn_uses():
    # oneDNN's default (1024): five primitives built, then five found again.
    assert cache_report("none") == {"hits": 5, "misses": 5, "set": None}
    # Room for two only (set by the function after `import torch`): every product is rebuilt,
    # which is what 1024 does to the ~2300 shapes of a demo epoch.
    assert cache_report("2") == {"hits": 0, "misses": 10, "set": "set True"}
    assert cache_report("8") == {"hits": 5, "misses": 5, "set": "set True"}


@pytest.mark.parametrize("name", CAPACITY_VARIABLES)
def test_a_capacity_the_environment_sets_stands(name):
    assert cache_report("8", **{name: "2"}) == {"hits": 0, "misses": 10, "set": "set False"}


def test_it_sets_the_variable_once_and_refuses_a_capacity_below_one(monkeypatch):
    for name in CAPACITY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert keep_compiled_products() is True
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(
        primitive_cache.PRIMITIVE_CACHE_CAPACITY
    )
    assert keep_compiled_products(16) is False  # already set: left as it is
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] != "16"
    with pytest.raises(ValueError, match=r"capacity \(0\) must be at least 1"):
        keep_compiled_products(0)
