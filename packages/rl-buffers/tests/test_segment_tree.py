import hashlib
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from rl_buffers import MinSegmentTree, SumSegmentTree, _extension, segment_tree

CSRC = Path(_extension.__file__).parent / "csrc"


def _random_ops(size, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(size, (n,), generator=g), torch.rand(n, generator=g) * 10)
            for n in (1, 7, 64, 3 * size)]  # fmt: skip


@pytest.mark.parametrize("size", [1, 2, 5, 1000, 4097])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sum_tree_matches_plain_reference(size, dtype):
    tree = SumSegmentTree(size, dtype=dtype, backend="torch")
    leaves = torch.zeros(size, dtype=dtype)
    for index, value in _random_ops(size, 0):
        tree.update(index, value)
        for i, v in zip(
            index.tolist(), value.to(dtype).tolist(), strict=False
        ):  # plain loop: last write wins
            leaves[i] = v
    assert torch.equal(tree.values(), leaves)
    start, end = size // 3, size
    assert torch.allclose(tree.query(start, end), leaves[start:end].sum(), rtol=1e-5)
    cumsum = torch.cumsum(leaves.double(), 0)
    mass = torch.rand(100, dtype=torch.float64) * cumsum[-1] * 0.999
    expected = torch.searchsorted(cumsum, mass, right=True)
    got = tree.scan_lower_bound(mass)
    # float32 rounding may move a mass that sits on a boundary by one leaf
    assert (got - expected).abs().max() <= (0 if dtype == torch.float64 else 1)


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_min_tree_matches_plain_reference(size):
    tree = MinSegmentTree(size, backend="torch")
    leaves = torch.full((size,), float("inf"))
    for index, value in _random_ops(size, 1):
        tree.update(index, value)
        for i, v in zip(index.tolist(), value.tolist(), strict=False):
            leaves[i] = v
    assert tree.query(0, size) == leaves.min()
    assert tree.query(size // 2, size) == leaves[size // 2 :].min()


@pytest.mark.parametrize("size", [1, 6, 1000, (1 << 14) + 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cpp_extension_is_bit_identical_to_fallback(size, dtype):
    if _extension.load("cpu") is not None:
        pytest.skip(f"C++ extension unavailable: {_extension.load('cpu')}")
    pairs = [(cls(size, dtype=dtype, backend="torch"), cls(size, dtype=dtype, backend="cpp"))
             for cls in (SumSegmentTree, MinSegmentTree)]  # fmt: skip
    for index, value in _random_ops(size, 2):
        for ref, fast in pairs:
            ref.update(index, value)
            fast.update(index, value)
    for ref, fast in pairs:
        assert torch.equal(ref.tree, fast.tree)
        for start, end in [(0, size), (size // 3, size), (0, 0)]:
            assert torch.equal(ref.query(start, end), fast.query(start, end))
    (ref, fast) = pairs[0]
    mass = torch.rand(513, dtype=dtype) * ref.query(0, size)
    assert torch.equal(ref.scan_lower_bound(mass), fast.scan_lower_bound(mass))


def test_auto_falls_back_and_warns_once(monkeypatch):
    monkeypatch.setitem(_extension._results, "cpu", "RuntimeError: no compiler (test)")
    monkeypatch.setattr(segment_tree, "_warned", set())
    with pytest.warns(RuntimeWarning, match="no compiler"):
        tree = SumSegmentTree(8, backend="auto")
    assert tree.backend == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SumSegmentTree(8, backend="auto").backend == "torch"


def test_explicit_backend_errors(monkeypatch):
    monkeypatch.setitem(_extension._results, "cpu", "RuntimeError: no compiler (test)")
    with pytest.raises(RuntimeError, match="backend='torch'"):
        SumSegmentTree(8, backend="cpp")
    with pytest.raises(ValueError, match="cannot run a tree on cpu"):
        SumSegmentTree(8, backend="cuda")
    with pytest.raises(ValueError, match="backend must be one of"):
        SumSegmentTree(8, backend="triton")


def test_build_directory_is_torch_version_specific():
    path = _extension.build_directory("cpu")
    assert torch.__version__.replace("+", "_") in str(path)


def test_build_directory_is_shared_by_installations_of_one_torch_build(monkeypatch):
    # two venvs with the same torch build share one compile; another build gets its own
    here = _extension.build_directory("cpu")
    monkeypatch.setattr(torch, "__file__", "/elsewhere/site-packages/torch/__init__.py")
    assert _extension.build_directory("cpu") == here
    monkeypatch.setattr(torch.version, "git_version", "another-revision")
    elsewhere = _extension.build_directory("cpu")
    assert elsewhere != here and elsewhere.name == here.name


def test_a_built_library_loads_without_ninja_or_a_compiler():
    """Once built on this machine, the extension loads with no build tool on PATH."""
    if _extension.load("cpu") is not None:
        pytest.skip(f"the extension cannot be built here: {_extension.load('cpu')}")
    code = "from rl_buffers import _extension\nprint(_extension.load('cpu'))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PATH": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.stdout.strip() == "None", out.stderr[-2000:]
    assert "No CUDA runtime" not in out.stderr


def test_out_of_range_index_raises():
    tree = SumSegmentTree(4, backend="torch")
    with pytest.raises(IndexError, match=r"expected \[0, 4\)"):
        tree.update(torch.tensor([4]), 1.0)


def test_cuda_source_compiles_with_nvcc(tmp_path):
    """The .cu builds with this machine's nvcc (no GPU needed); cached by source hash."""
    nvcc = shutil.which("nvcc") or (
        "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
    )
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    source = CSRC / "segment_tree_cuda.cu"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    # the .cu needs no torch header: one check per source, whatever the torch install
    cache = _extension.build_directory("cpu").parents[1] / f"nvcc-check-{digest}.o"
    if cache.exists():
        return
    out = tmp_path / "segment_tree_cuda.o"
    cmd = [nvcc, "-c", "-O3", "-std=c++17", "-gencode", "arch=compute_80,code=sm_80",
           "-gencode", "arch=compute_90,code=sm_90", str(source), "-o", str(out)]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(out, cache)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_kernels_match_fallback(dtype):
    size = 5000
    pairs = [(cls(size, dtype=dtype, backend="torch"), cls(size, dtype=dtype, device="cuda", backend="cuda"))
             for cls in (SumSegmentTree, MinSegmentTree)]  # fmt: skip
    for index, value in _random_ops(size, 3):
        for ref, fast in pairs:
            ref.update(index, value)
            fast.update(index.cuda(), value.cuda())
    for ref, fast in pairs:
        assert torch.equal(ref.tree, fast.tree.cpu())
        assert torch.equal(ref.query(10, size), fast.query(10, size).cpu())
    mass = torch.rand(1000, dtype=dtype) * pairs[0][0].query(0, size)
    assert torch.equal(
        pairs[0][0].scan_lower_bound(mass), pairs[0][1].scan_lower_bound(mass.cuda()).cpu()
    )
