"""The decode GEMVs (kernels/gemv.py): each kernel against F.linear on odd shapes at 1 row up to its
most (8 for the widening int8; the others any: more than one group of 8 and one pass of 256), rows independent of their neighbours, thread counts, and the input checks. Where the CPU lacks a
kernel's ISA the kernel tests skip (allowed in tests/ci_skips.py); the fallback tests
(tests/kernels/test_gemv_linear.py) run everywhere."""

import pytest
import torch
import torch.nn.functional as F

from posttrain.engine.paged.int8 import quantize
from posttrain.kernels import gemv

KINDS = ("fp32", "bf16", "int8", "int8_lut")
SHAPES = [(37, 577), (16, 64), (50, 128), (1, 33), (20, 200)]  # (N, K): N off 16, K odd, one step, one output


def kernel_or_skip(kind: str):
    """The kernel of `kind`; a skip where this CPU lacks its ISA; a failure where it has the ISA
    but the module did not build (a missing compiler must not pass for a missing flag)."""
    if gemv.missing_flags(kind):
        pytest.skip(f"this CPU lacks {gemv.missing_flags(kind)} for the {kind} GEMV")
    kernel = gemv.kernel_named(kind)
    assert kernel is not None, "the CPU has the ISA but the GEMV module did not build (see the log)"
    return kernel


def operands(kind: str, rows: int, n: int, k: int, seed: int = 0) -> tuple:
    """(kernel args without x's rows picked, x, reference y in fp64)."""
    g = torch.Generator().manual_seed(seed)
    x, w, b = torch.randn(rows, k, generator=g), torch.randn(n, k, generator=g) / k**0.5, torch.randn(n, generator=g)
    if kind == "fp32":
        return (w, b), x, F.linear(x.double(), w.double(), b.double())
    x, b = x.bfloat16(), b.bfloat16()
    if kind == "bf16":
        w = w.bfloat16()
        return (w, b), x, F.linear(x.double(), w.double(), b.double())
    q, scale = quantize(w)
    scale = scale.bfloat16().float()  # the engine's scales are the compute dtype's (engine/paged/int8.py)
    return (q, scale, b), x, F.linear(x.double(), q.double()) * scale.double() + b.double()  # int8, int8_lut


def call(kernel: gemv.Gemv, x: torch.Tensor, args: tuple) -> torch.Tensor:
    """args: (W as torch stores it, the rest): W packed for the kernel, then the call."""
    return kernel.run(x, kernel.pack(args[0]), *args[1:])


def tolerance(kind: str, ref: torch.Tensor) -> torch.Tensor:
    """fp32: sums over K in another order; bf16 out: one bf16 rounding (2^-8 relative) on top."""
    rel = 1e-5 if kind == "fp32" else 2.0**-8
    return rel * ref.abs() + 1e-4


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n,k", SHAPES)
def test_each_kernel_matches_f_linear_at_1_row_up_to_its_most(kind, n, k):
    kernel = kernel_or_skip(kind)
    for rows in (*range(1, 10), 17, 300):
        if rows > kernel.max_rows:
            continue
        args, x, ref = operands(kind, rows, n, k, seed=rows)
        y = call(kernel, x, args)
        assert y.shape == (rows, n) and y.dtype == x.dtype
        assert ((y.double() - ref).abs() <= tolerance(kind, ref)).all(), (kind, rows, n, k)


@pytest.mark.parametrize("kind", KINDS)
def test_a_rows_result_does_not_depend_on_the_rows_beside_it(kind):
    kernel = kernel_or_skip(kind)
    rows = min(kernel.max_rows, 19)  # fp32, bf16: two whole groups of 8 rows and a part
    args, x, _ = operands(kind, rows, 70, 577 if kind == "fp32" else 200)
    together = call(kernel, x, args)
    others = x.clone()
    others[1:] = torch.randn_like(others[1:].float()).to(x.dtype) * 100
    for i in range(rows):  # alone, and among any count of other rows: the same bits
        assert torch.equal(call(kernel, x[i : i + 1].contiguous(), args)[0], together[i])
        assert torch.equal(call(kernel, x[: i + 1].contiguous(), args)[i], together[i])
    assert torch.equal(call(kernel, others, args)[0], together[0])
    if kernel.max_rows >= 300:  # across passes of 256 rows over W, too
        args, x, _ = operands(kind, 300, 70, 200)
        together = call(kernel, x, args)
        for i in (0, 255, 256, 299):
            assert torch.equal(call(kernel, x[i : i + 1].contiguous(), args)[0], together[i])


@pytest.mark.parametrize("kind", KINDS)
def test_threads_split_outputs_without_changing_them(kind):
    kernel = kernel_or_skip(kind)
    args, x, _ = operands(kind, 3, 4096, 576)  # 2.4+ MB of weights: split across threads
    one = call(kernel, x, args)
    torch.set_num_threads(2)  # the autouse fixture restores one thread
    assert torch.equal(call(kernel, x, args), one)


def test_the_bindings_refuse_what_they_cannot_compute():
    kernel = kernel_or_skip("fp32")
    w = kernel.pack(torch.randn(8, 16))
    with pytest.raises(RuntimeError, match="1 to .* rows"):
        kernel.run(torch.randn(0, 16), w, None)
    with pytest.raises(RuntimeError, match="packed for fp32"):
        kernel.run(torch.randn(1, 17), w, None)
    with pytest.raises(RuntimeError, match="packed for fp32"):
        kernel.run(torch.randn(1, 16), gemv.Packed(torch.randn(8, 16), 8), None)
    with pytest.raises(RuntimeError, match="contiguous"):
        kernel.run(torch.randn(16, 2).t(), w, None)
    with pytest.raises(RuntimeError, match="bias"):
        kernel.run(torch.randn(1, 16), w, torch.randn(7))


def test_packed_weights_are_cut_from_huge_page_chunks_aligned_and_apart():
    kernel_or_skip("fp32")
    arena = gemv.HugeArena()
    arena.CHUNK = 4 << 20
    a = arena.empty(torch.Size((3, 5, 4, 16)), torch.float32)  # 3,840 bytes
    b = arena.empty(torch.Size((1, 1, 4, 16)), torch.bfloat16)
    big = arena.empty(torch.Size((1024, 300, 4, 16)), torch.int8)  # more than a chunk: a chunk of its own
    assert a.untyped_storage().data_ptr() % (2 << 20) == 0  # a chunk starts on a huge-page boundary
    assert b.data_ptr() == a.data_ptr() + 3840 and b.data_ptr() % 64 == 0
    assert big.data_ptr() % (2 << 20) == 0 and big.numel() == 1024 * 300 * 64
    a.fill_(1), b.fill_(2), big.fill_(3)
    assert a.eq(1).all() and b.eq(2).all() and big.eq(3).all()


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_load():
    """torch's build lock is a plain file: a build killed midway leaves it, and torch's loader
    then waits on it for ever (tests hung so here). Under our flock it is known stale."""
    import subprocess
    import sys

    gemv.build_dir().mkdir(parents=True, exist_ok=True)
    (gemv.build_dir() / "lock").touch()
    done = subprocess.run([sys.executable, "-c", "from posttrain.kernels import gemv; "
                           "print(gemv.module() is not None)"], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0 and done.stdout.split()[-1] == "True", done.stderr[-2000:]
