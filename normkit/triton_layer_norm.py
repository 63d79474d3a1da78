"""A fused LayerNorm on a GPU, in Triton (Unit 7's optional extra; not an exercise).

    python -m normkit.triton_layer_norm     the table of report(), or one line saying why not

The same kernel as the compiled CPU one, where a CUDA device and Triton are present. The
forward, as in Triton's "Layer Normalization" tutorial, gives each row one program: the row
is loaded once into a block of BLOCK values (the next power of two >= H, masked past H), its
mean and centred variance are two sums in registers, and y is written once. The backward is
closer to llm.c's layernorm_backward_kernel10 than to the tutorial's (whose programs share
partial rows under a lock): each program writes dx for a run of consecutive rows and keeps
partial sums of dγ and dβ in registers, then writes them to its own row of a (programs, H)
buffer that a torch sum reduces: no two programs write one address (no atomics, no race).
Triton comes with CUDA builds of torch, not with the course's CPU environment: this module
imports without it; forward() and backward() raise a RuntimeError where it or CUDA is missing.
"""

from __future__ import annotations  # the kernels' `tl.constexpr` annotations stay strings

import functools
import math

import torch
import torch.nn.functional as F

try:  # present with CUDA builds of torch; absent in the course's CPU environment
    import triton
    import triton.language as tl
except ImportError:
    triton = tl = None

ROWS = 4096
SIZES = (256, 1024, 4096)  # H, as normkit.benchmark's table
MAX_H = 65536  # one row in one block (checked against torch at 65536 on an H100, not timed)
TRAFFIC = {"forward": 2, "forward+backward": 5}  # the minimum-traffic model, multiples of |x|
DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # computed in float32 inside
WARPS_PER_SM = 8  # the backward's warps per multiprocessor (_programs; best of 4 to 64 on an H100)
SKIPPED = "No CUDA device or no Triton here: the Triton LayerNorm is skipped."


def _jit(kernel):
    """triton.jit where Triton is installed; elsewhere the plain function, never called."""
    return triton.jit(kernel) if triton is not None else kernel


@_jit
def _forward_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, H, eps,
                    BLOCK: tl.constexpr):
    """Program r normalizes row r: x, y (R, H) with row stride `stride`; w, b (H,);
    mean, rstd (R,) float32, saved for the backward."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)  # (BLOCK,), BLOCK >= H
    inside = cols < H
    x = tl.load(x_ptr + row * stride + cols, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
    mean = tl.sum(x, axis=0) / H  # ()
    xc = tl.where(inside, x - mean, 0.0)  # (BLOCK,) centred, 0 past H
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / H + eps)  # (): a second sum, from registers
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
    b = tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
    y = xc * rstd * w + b  # (BLOCK,)
    tl.store(y_ptr + row * stride + cols, y.to(y_ptr.dtype.element_ty), mask=inside)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@_jit
def _backward_kernel(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_part_ptr,
                     db_part_ptr, R, stride, H, rows_per_program, BLOCK: tl.constexpr):
    """Program p: dx of rows [p * rows_per_program, (p + 1) * rows_per_program) ∩ [0, R),
    and the sums over those rows of dy * xhat and dy into row p of dw_part, db_part
    (programs, H) float32. dy, x, dx (R, H) with row stride `stride`; w (H,)."""
    p = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)  # (BLOCK,), BLOCK >= H
    inside = cols < H
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)  # this program's partial dγ
    db = tl.zeros((BLOCK,), dtype=tl.float32)  # this program's partial dβ
    first = p * rows_per_program
    for row in range(first, tl.minimum(first + rows_per_program, R)):
        offsets = row * stride + cols  # (BLOCK,)
        x = tl.load(x_ptr + offsets, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
        dy = tl.load(dy_ptr + offsets, mask=inside, other=0.0).to(tl.float32)  # (BLOCK,)
        rstd = tl.load(rstd_ptr + row)  # ()
        xhat = (x - tl.load(mean_ptr + row)) * rstd  # (BLOCK,)
        wdy = w * dy  # (BLOCK,), 0 past H (dy is): the sums below see H values only
        c1 = tl.sum(xhat * wdy, axis=0) / H  # ()
        c2 = tl.sum(wdy, axis=0) / H  # ()
        dx = (wdy - xhat * c1 - c2) * rstd  # (BLOCK,)
        tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=inside)
        dw += dy * xhat  # stage one of dγ: this program's rows only
        db += dy
    tl.store(dw_part_ptr + p * H + cols, dw, mask=inside)
    tl.store(db_part_ptr + p * H + cols, db, mask=inside)


def available():
    """True where a CUDA device and Triton are both here."""
    return triton is not None and torch.cuda.is_available()


def _require_gpu():
    """Raise a RuntimeError saying what is missing, where a kernel cannot run."""
    if triton is None:
        raise RuntimeError("normkit.triton_layer_norm needs Triton (it comes with CUDA "
                           "builds of torch); it is not installed here")
    if not torch.cuda.is_available():
        raise RuntimeError("normkit.triton_layer_norm needs a CUDA device; torch sees none")


def _check_matrix(name, t, function):
    """Raise a ValueError unless t is a 2-D (rows, H) tensor, at least one row,
    1 <= H <= MAX_H, of a dtype in DTYPES, contiguous, on a CUDA device (checked in this
    order, the device last)."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{function}: {name} must be a 2-D (rows, H) tensor; got {got}")
    rows, h = t.shape
    if rows < 1 or not 1 <= h <= MAX_H:
        raise ValueError(f"{function}: {name} needs at least one row and 1 <= H <= {MAX_H}; "
                         f"got shape {tuple(t.shape)}")
    if t.dtype not in DTYPES:
        raise ValueError(f"{function}: {name}'s dtype must be float32, float16 or bfloat16; "
                         f"got {t.dtype}")
    if not t.is_contiguous():
        raise ValueError(f"{function}: {name} must be contiguous; got strides {t.stride()}")
    if not t.is_cuda:
        raise ValueError(f"{function}: {name} must be on a CUDA device; got {t.device}")


def _check_like(name, t, shape, dtype, device, function):
    """Raise a ValueError unless t is a contiguous tensor of this shape, dtype and device."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{function}: {name} must be a tensor; got {type(t).__name__}")
    if tuple(t.shape) != shape or t.dtype != dtype or t.device != device:
        raise ValueError(f"{function}: {name} must have shape {shape}, dtype {dtype}, device "
                         f"{device}; got {tuple(t.shape)}, {t.dtype}, {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{function}: {name} must be contiguous; got strides {t.stride()}")


def _warps(block):
    """Warps per program: one per 256 values of the block, 1 to 16."""
    return min(max(block // 256, 1), 16)


def forward(x, weight, bias, eps=1e-5):
    """LayerNorm over the last dim of x (R, H) on a CUDA device, with weight and bias (H,)
    of x's dtype. Returns y (R, H) of x's dtype, and mean and rstd (R,) in float32 for
    backward()."""
    _check_matrix("x", x, "forward")
    rows, h = x.shape
    for name, t in (("weight", weight), ("bias", bias)):
        _check_like(name, t, (h,), x.dtype, x.device, "forward")
    _require_gpu()
    return _forward(x, weight, bias, float(eps))


def _forward(x, weight, bias, eps):
    """forward() without the checks: launch the forward kernel, one program per row."""
    rows, h = x.shape
    y = torch.empty_like(x)  # (R, H)
    mean, rstd = (torch.empty(rows, dtype=torch.float32, device=x.device) for _ in range(2))
    block = triton.next_power_of_2(h)
    _forward_kernel[(rows,)](x, weight, bias, y, mean, rstd, x.stride(0), h, eps,
                             BLOCK=block, num_warps=_warps(block))
    return y, mean, rstd


def backward(dy, x, weight, mean, rstd):
    """LayerNorm's gradients given the upstream dy (R, H), the forward's x (R, H) and weight
    (H,), and forward()'s mean and rstd (R,). Returns dx (R, H), dweight and dbias (H,),
    each of its input's dtype (dγ and dβ summed in float32)."""
    _check_matrix("x", x, "backward")
    rows, h = x.shape
    _check_like("dy", dy, (rows, h), x.dtype, x.device, "backward")
    _check_like("weight", weight, (h,), x.dtype, x.device, "backward")
    for name, t in (("mean", mean), ("rstd", rstd)):
        _check_like(name, t, (rows,), torch.float32, x.device, "backward")
    _require_gpu()
    return _backward(dy, x, weight, mean, rstd, _programs(x.device, h))


def _programs(device, h):
    """How many backward programs: enough for WARPS_PER_SM warps on each multiprocessor
    (a program of few warps waits on its loads alone), and no more: each program adds a
    row to the (programs, H) partial sums, written once and read again by stage two."""
    warps = _warps(triton.next_power_of_2(h))
    return _multiprocessors(device) * max(1, WARPS_PER_SM // warps)


@functools.cache
def _multiprocessors(device):
    """The number of streaming multiprocessors of a CUDA device."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def _backward(dy, x, weight, mean, rstd, programs):
    """backward() without the checks, on at most `programs` programs, each taking a run of
    consecutive rows; then the second stage: dγ and dβ as sums over the programs."""
    rows, h = x.shape
    rows_per_program = math.ceil(rows / min(rows, programs))
    programs = math.ceil(rows / rows_per_program)  # none left without a row
    dx = torch.empty_like(x)  # (R, H)
    dw_part, db_part = (torch.empty(programs, h, dtype=torch.float32, device=x.device)
                        for _ in range(2))  # (programs, H): stage one's partial sums
    block = triton.next_power_of_2(h)
    _backward_kernel[(programs,)](dy, x, weight, mean, rstd, dx, dw_part, db_part, rows,
                                  x.stride(0), h, rows_per_program, BLOCK=block,
                                  num_warps=_warps(block))
    return dx, dw_part.sum(0).to(weight.dtype), db_part.sum(0).to(weight.dtype)


def _inputs(rows, h, device, generator):
    """x, weight, bias and an upstream gradient dy: standard normal float32 on device."""
    def randn(*shape):
        return torch.randn(*shape, device=device, generator=generator)

    return randn(rows, h), randn(h), randn(h), randn(rows, h)


def _check_against_torch(x, weight, bias, dy, eps):
    """Assert that forward() and backward() give F.layer_norm's y and torch autograd's dx,
    dγ, dβ (torch.testing.assert_close; float32's default tolerances, and for dγ and dβ,
    sums over R rows added in another order, an atol of R float32 epsilons, about the
    rounding of such a sum of terms of size 1). Returns the largest |difference| of each."""
    rows, h = x.shape
    y, mean, rstd = forward(x, weight, bias, eps)
    dx, dw, db = backward(dy, x, weight, mean, rstd)
    xg, wg, bg = (t.detach().clone().requires_grad_() for t in (x, weight, bias))
    expected = F.layer_norm(xg, (h,), wg, bg, eps)
    expected.backward(dy)
    sums = {"rtol": 1.3e-6, "atol": rows * torch.finfo(x.dtype).eps}
    pairs = {"y": (y, expected.detach(), {}), "dx": (dx, xg.grad, {}),
             "dγ": (dw, wg.grad, sums), "dβ": (db, bg.grad, sums)}
    for name, (actual, wanted, tolerance) in pairs.items():
        torch.testing.assert_close(actual, wanted, **tolerance,
                                   msg=lambda m, name=name: f"H = {h}, {name}: {m}")
    return {name: (actual - wanted).abs().max().item()
            for name, (actual, wanted, _) in pairs.items()}


def _graphed(fn, grads):
    """fn captured in a CUDA graph, after three warm-up calls on a side stream (as torch's
    CUDA-graph notes ask; the kernels compile there) and with the grads' .grad reset to
    None (the captured backward writes them rather than adds to them). A replay launches
    all of fn's kernels at once: its time is the GPU's work, not Python's launch overhead
    (measured on an H100 at H = 256: the Triton forward and backward took 219 us called
    from Python, 33 us replayed)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    for t in grads:
        t.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def _timed(x, weight, bias, dy, eps):
    """(kernel, pass) -> median milliseconds of a replay of the pass's CUDA graph
    (_graphed), timed by triton.testing.do_bench: CUDA events around each replay, the L2
    cache flushed before it, so that the bytes come from the device's memory."""
    from triton.testing import do_bench

    h = x.shape[1]
    xg, wg, bg = (t.detach().clone().requires_grad_() for t in (x, weight, bias))

    def triton_both():
        y, mean, rstd = forward(x, weight, bias, eps)
        return backward(dy, x, weight, mean, rstd)

    def torch_both():
        F.layer_norm(xg, (h,), wg, bg, eps).backward(dy)

    fns = {("triton", "forward"): lambda: forward(x, weight, bias, eps),
           ("F.layer_norm", "forward"): lambda: F.layer_norm(x, (h,), weight, bias, eps),
           ("triton", "forward+backward"): triton_both,
           ("F.layer_norm", "forward+backward"): torch_both}
    return {key: do_bench(_graphed(fn, (xg, wg, bg)).replay, return_mode="median")
            for key, fn in fns.items()}


def _copy_bandwidth(device, nbytes=2**28):
    """The device's memory-copy bandwidth in GB/s (bytes read + written per second) of a
    copy_ between two buffers of nbytes, far larger than the L2 cache."""
    from triton.testing import do_bench

    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / (do_bench(lambda: dst.copy_(src), return_mode="median") / 1e3) / 1e9


def report(device="cuda", sizes=SIZES, rows=ROWS, eps=1e-5):
    """The Triton LayerNorm against F.layer_norm on a CUDA device, for (rows, H) float32
    inputs, H in sizes: first checked against torch (an AssertionError if it differs),
    then the median time of a forward and of a forward plus backward, its ratio to
    F.layer_norm's, the GB/s of the minimum-traffic model (2|x|, 5|x|) and their fraction
    of the device's copy bandwidth, measured in the same run. Returns a text table."""
    _require_gpu()
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    copy_gbps = _copy_bandwidth(device)
    lines = [f"{torch.cuda.get_device_name(device)}: copy {copy_gbps:.0f} GB/s; {rows} rows, "
             f"float32; Triton {triton.__version__}, torch {torch.__version__}; CUDA-graph "
             "replays, L2 flushed before each",
             f"{'H':>5}  {'pass':<17}{'kernel':<13}{'median us':>10}{'x torch':>8}"
             f"{'GB/s':>7}{'of copy':>8}"]
    for h in sizes:
        x, weight, bias, dy = _inputs(rows, h, device, generator)
        errors = _check_against_torch(x, weight, bias, dy, eps)
        times = _timed(x, weight, bias, dy, eps)
        for pass_ in TRAFFIC:
            for kernel in ("triton", "F.layer_norm"):
                ms = times[kernel, pass_]
                gbps = TRAFFIC[pass_] * x.nbytes / (ms / 1e3) / 1e9
                lines.append(f"{h:>5}  {pass_:<17}{kernel:<13}{ms * 1e3:>10.1f}"
                             f"{ms / times['F.layer_norm', pass_]:>8.2f}{gbps:>7.0f}"
                             f"{gbps / copy_gbps:>8.0%}")
        lines.append(f"{h:>5}  checked against torch, largest |difference|: "
                     + ", ".join(f"{name} {error:.1e}" for name, error in errors.items()))
    return "\n".join(lines)


def main():
    """Print report(), or the one line SKIPPED where there is no CUDA device or no Triton."""
    print(report() if available() else SKIPPED)


if __name__ == "__main__":
    main()
