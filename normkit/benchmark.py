"""Times the LayerNorm kernels against torch.nn.functional.layer_norm (not an exercise).

    make bench                                  your normlib/ (REFERENCE=1: the reference's)
    python -m normkit.benchmark --sizes 1024 --rounds 5
    from normkit.benchmark import run, table; print(table(*run()))      (in a notebook)

It times your naive (Exercises 1.2, 2.2), fast (7.1, 7.2), compiled (7.3, 7.4) kernels, RMSNorm
against LayerNorm (Unit 4, section 3), your fused residual add and RMSNorm (9.5) against
torch's two steps, on 4096 rows of H float32 values (H in SIZES): the median of each over
interleaved rounds (each round times every kernel once, so a busy moment slows all alike),
its ratio to torch's, and the bandwidth of the minimum traffic (TRAFFIC) against a memory
copy timed in the same run; with CUDA, torch.compile's fused kernel too. Times vary between
runs and machines, ratios much less: never assert a time in a test (README.md, "Speed").
"""

import argparse
import math
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

from normkit.kernel_code import numba_installed
from normlib import layer_norm, layer_norm_fast, rms_norm

ROWS = 4096
SIZES = (256, 1024, 4096)
KERNELS = ("naive", "fast", "compiled", "torch")
PASSES = ("forward", "forward+backward")
TRAFFIC = {"forward": 2, "forward+backward": 5}  # multiples of |x| in bytes


def copy_bandwidth(nbytes=64 * 2**20, rounds=5):
    """The memory-copy bandwidth in GB/s (bytes read + bytes written, per second) of a
    copy between two arrays of nbytes, far larger than the caches: NumPy's np.copyto
    (one thread) and torch's copy_ (torch's threads). Returns {"numpy": .., "torch": ..}."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    src_t, dst_t = torch.from_numpy(src), torch.from_numpy(dst)
    times = interleaved({"numpy": lambda: np.copyto(dst, src),
                         "torch": lambda: dst_t.copy_(src_t)}, rounds)
    return {name: 2 * nbytes / t / 1e9 for name, t in times.items()}


def interleaved(fns, rounds, min_time=0.01):
    """The median seconds per call of each fn (name -> function of no argument), timed in
    `rounds` rounds; each round calls every fn in turn, enough times to last min_time."""
    calls = {}
    for name, fn in fns.items():  # warm up, and find how many calls last min_time
        fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, math.ceil(min_time / max(time.perf_counter() - start, 1e-9)))
    samples = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate the order
            start = time.perf_counter()
            for _ in range(calls[name]):
                fns[name]()
            samples[name].append((time.perf_counter() - start) / calls[name])
    return {name: float(np.median(s)) for name, s in samples.items()}


def compiled_kernels():
    """(forward, backward) of your normlib/layer_norm_compiled.py, in the NumPy kernels'
    arguments (x (*B, H) as (R, H) rows; a None weight or bias as ones or zeros), or None
    where Numba is not installed."""
    try:
        from normlib import layer_norm_compiled as compiled
    except ImportError:  # (no Numba here)
        return None

    def params(weight, bias, h, dtype):
        return (np.ones(h, dtype) if weight is None else weight,
                np.zeros(h, dtype) if bias is None else bias)

    def forward(x, shape, weight=None, bias=None, eps=1e-5):
        h = x.shape[-1]
        y, mean, rstd = compiled.layer_norm_forward_compiled(
            x.reshape(-1, h), *params(weight, bias, h, x.dtype), eps)
        return y.reshape(x.shape), mean, rstd

    def backward(grad_output, x, shape, mean, rstd, weight=None, bias=None):
        h = x.shape[-1]
        return compiled.layer_norm_backward_compiled(
            grad_output.reshape(-1, h), x.reshape(-1, h), mean, rstd,
            params(weight, bias, h, x.dtype)[0])

    return forward, backward


def kernels(x, weight, bias, grad_output, chosen=KERNELS):
    """(kernel, pass) -> a function of no argument running it on these arrays, for the
    kernels chosen; a kernel whose exercise raises NotImplementedError, or needs Numba
    where it is not installed, is left out. A compiled kernel is compiled here, by its
    first call, not in its timing."""
    h = x.shape[-1]
    xt, wt, bt = (torch.from_numpy(a) for a in (x, weight, bias))
    dyt = torch.from_numpy(grad_output)
    xg = xt.clone().requires_grad_()

    def torch_forward_backward():
        F.layer_norm(xg, (h,), wt, bt).backward(dyt)
        xg.grad = None

    def numpy_forward_backward(forward, backward):
        y, mean, rstd = forward(x, (h,), weight, bias)
        return backward(grad_output, x, (h,), mean, rstd, weight, bias)

    numpy = {"naive": (layer_norm.layer_norm_forward, layer_norm.layer_norm_backward),
             "fast": (layer_norm_fast.layer_norm_forward_fast,
                      layer_norm_fast.layer_norm_backward_fast),
             "compiled": compiled_kernels()}
    fns = {("torch", "forward"): lambda: F.layer_norm(xt, (h,), wt, bt),
           ("torch", "forward+backward"): torch_forward_backward}
    for name, pair in numpy.items():
        if pair is None or name not in chosen:
            continue
        forward, backward = pair
        for pass_, fn in [("forward", lambda f=forward: f(x, (h,), weight, bias)),
                          ("forward+backward",
                           lambda f=forward, b=backward: numpy_forward_backward(f, b))]:
            try:
                with warnings.catch_warnings():  # (a compiled stub: Numba's notes on it)
                    warnings.simplefilter("ignore")
                    fn()
            except NotImplementedError:
                continue
            fns[name, pass_] = fn
    return fns


def inputs(rows, h, dtype, seed):
    """x (rows, h), weight (h,), bias (h,) and an upstream gradient (rows, h): standard
    normal samples of dtype, the same for a seed whatever the kernels timed."""
    rng = np.random.default_rng(seed)
    x, dy = (rng.standard_normal((rows, h)).astype(dtype) for _ in range(2))  # (R, H)
    weight, bias = (rng.standard_normal(h).astype(dtype) for _ in range(2))  # (H,)
    return x, weight, bias, dy


def run(sizes=SIZES, rows=ROWS, rounds=7, dtype=np.float32, seed=0, chosen=KERNELS):
    """Time the kernels chosen (torch always) for (rows, H) inputs, H in sizes. Returns
    (results, bandwidth): results a list of dicts (H, kernel, pass, seconds, ratio, bytes
    of the model, gbps, fraction of the copy bandwidth); bandwidth as copy_bandwidth
    returns it, measured first."""
    bandwidth = copy_bandwidth()
    best = max(bandwidth.values())
    results = []
    for h in sizes:
        x, weight, bias, dy = inputs(rows, h, dtype, seed)
        times = interleaved(kernels(x, weight, bias, dy, chosen), rounds)
        for (kernel, pass_), seconds in sorted(times.items(), key=lambda kv: (
                PASSES.index(kv[0][1]), KERNELS.index(kv[0][0]))):
            moved = TRAFFIC[pass_] * x.nbytes  # bytes, the minimum-traffic model
            gbps = moved / seconds / 1e9
            results.append({"H": h, "kernel": kernel, "pass": pass_, "seconds": seconds,
                            "ratio": seconds / times["torch", pass_], "bytes": moved,
                            "gbps": gbps, "fraction": gbps / best})
    return results, bandwidth


def norm_kernels(x, weight, bias, grad_output):
    """(implementation, norm, pass) -> a function of no argument: RMSNorm, torch's and your
    naive NumPy one (Exercises 3.6 and 3.7), beside LayerNorm's of kernels(), forward and
    forward plus backward; a pair is left out where either kernel is (its exercise raises
    NotImplementedError)."""
    h = x.shape[-1]
    layer = kernels(x, weight, bias, grad_output)  # LayerNorm's, as the first table's
    xt, wt, dyt = (torch.from_numpy(a) for a in (x, weight, grad_output))
    xg = xt.clone().requires_grad_()

    def torch_forward_backward():
        F.rms_norm(xg, (h,), wt).backward(dyt)
        xg.grad = None

    def numpy_forward_backward():
        y, rrms = rms_norm.rms_norm_forward(x, (h,), weight)
        return rms_norm.rms_norm_backward(grad_output, x, (h,), rrms, weight)

    rms = {("torch", "forward"): lambda: F.rms_norm(xt, (h,), wt),
           ("torch", "forward+backward"): torch_forward_backward,
           ("naive", "forward"): lambda: rms_norm.rms_norm_forward(x, (h,), weight),
           ("naive", "forward+backward"): numpy_forward_backward}
    fns = {}
    for (implementation, pass_), fn in rms.items():
        if (implementation, pass_) not in layer:
            continue
        try:
            fn()
        except NotImplementedError:
            continue
        fns[implementation, "rms", pass_] = fn
        fns[implementation, "layer", pass_] = layer[implementation, pass_]
    return fns


def rms_versus_layer_norm(sizes=SIZES, rows=ROWS, rounds=7, dtype=np.float32, seed=0):
    """RMSNorm's median time against LayerNorm's (both with a weight; LayerNorm also with a
    bias), for (rows, H) inputs, H in sizes, in interleaved rounds. Returns a list of dicts
    (H, implementation, pass, rms and layer seconds, ratio rms / layer)."""
    results = []
    for h in sizes:
        x, weight, bias, dy = inputs(rows, h, dtype, seed)
        times = interleaved(norm_kernels(x, weight, bias, dy), rounds)
        for implementation in ("naive", "torch"):
            for pass_ in PASSES:
                if (implementation, "rms", pass_) in times:
                    rms, layer = (times[implementation, n, pass_] for n in ("rms", "layer"))
                    results.append({"H": h, "implementation": implementation, "pass": pass_,
                                    "rms": rms, "layer": layer, "ratio": rms / layer})
    return results


def rms_table(results):
    """The results of rms_versus_layer_norm() as a text table."""
    lines = ["RMSNorm against LayerNorm, in the same run",
             f"{'H':>5}  {'pass':<17}{'kernels':<8}{'RMSNorm ms':>11}{'LayerNorm ms':>13}"
             f"{'ratio':>7}"]
    for r in results:
        lines.append(f"{r['H']:>5}  {r['pass']:<17}{r['implementation']:<8}"
                     f"{r['rms'] * 1e3:>11.3f}{r['layer'] * 1e3:>13.3f}{r['ratio']:>7.2f}")
    return "\n".join(lines)


def environment(dtype=np.float32, rows=ROWS):
    """One line on what was measured: rows, dtype, threads."""
    compiled = "; no Numba"
    if numba_installed():
        import numba

        compiled = f"; Numba {numba.__version__} on {numba.get_num_threads()} threads"
    return (f"{rows} rows, {np.dtype(dtype).name}; torch {torch.__version__} on "
            f"{torch.get_num_threads()} threads; NumPy {np.__version__}, whose elementwise "
            f"operations run on 1 thread{compiled}")


def table(results, bandwidth):
    """The results of run() as a text table."""
    lines = [f"memory copy: NumPy {bandwidth['numpy']:.1f} GB/s (1 thread), torch "
             f"{bandwidth['torch']:.1f} GB/s; 'of copy' is against the faster",
             f"{'H':>5}  {'pass':<17}{'kernel':<9}{'median ms':>10}{'x torch':>9}"
             f"{'MB moved':>9}{'GB/s':>7}{'of copy':>9}"]
    for r in results:
        lines.append(f"{r['H']:>5}  {r['pass']:<17}{r['kernel']:<9}{r['seconds'] * 1e3:>10.3f}"
                     f"{r['ratio']:>9.2f}{r['bytes'] / 1e6:>9.1f}{r['gbps']:>7.1f}"
                     f"{r['fraction']:>9.0%}")
    return "\n".join(lines)


ADD_NORM = ("yours, fused", "torch, two steps", "torch, add_ in place")
ADD_NORM_TRAFFIC = {"yours, fused": 4, "torch, two steps": 5, "torch, add_ in place": 5}


def add_norm_kernels(x, residual, weight, eps=1e-6):
    """name -> a function of no argument (ADD_NORM): your fused_add_rms_norm (Exercise 9.5),
    compiled here by a first call (left out where it raises NotImplementedError or Numba is
    not installed); torch's two steps, residual + x then F.rms_norm, out of place as a
    model's forward runs them, and with the add in place (the residual grows by x at each
    call: finite for any number of rounds)."""
    h = x.shape[1]
    xt, rt, wt = (torch.from_numpy(a.copy()) for a in (x, residual, weight))
    fns = {"torch, two steps": lambda: F.rms_norm(rt + xt, (h,), wt, eps),
           "torch, add_ in place": lambda: F.rms_norm(rt.add_(xt), (h,), wt, eps)}
    try:
        from normlib.fused_add_norm import fused_add_rms_norm
        fused_add_rms_norm(x, residual, weight, eps)  # (compiles)
        fns["yours, fused"] = lambda: fused_add_rms_norm(x, residual, weight, eps)
    except (ImportError, NotImplementedError):
        pass
    return fns


def add_norm_run(sizes=SIZES, rows=ROWS, rounds=7, dtype=np.float32, seed=0):
    """The fused add + RMSNorm against torch's two steps, (rows, H) inputs for H in sizes,
    interleaved rounds: a list of dicts (H, kernel, seconds, ratio to torch's two steps,
    bytes of the minimum traffic, GB/s)."""
    results = []
    for h in sizes:
        rng = np.random.default_rng(seed)
        x, residual = (rng.standard_normal((rows, h)).astype(dtype) for _ in range(2))
        weight = (1 + 0.1 * rng.standard_normal(h)).astype(dtype)
        times = interleaved(add_norm_kernels(x, residual, weight), rounds)
        for name in ADD_NORM:
            if name in times:
                moved = ADD_NORM_TRAFFIC[name] * x.nbytes
                results.append({"H": h, "kernel": name, "seconds": times[name],
                                "ratio": times[name] / times["torch, two steps"],
                                "bytes": moved, "gbps": moved / times[name] / 1e9})
    return results


def add_norm_table(results):
    """The results of add_norm_run() as a text table."""
    lines = ["the residual add and RMSNorm (Exercise 9.5), fused against torch's two steps",
             f"{'H':>5}  {'kernel':<22}{'median ms':>10}{'x two steps':>12}{'MB moved':>9}"
             f"{'GB/s':>7}"]
    for r in results:
        lines.append(f"{r['H']:>5}  {r['kernel']:<22}{r['seconds'] * 1e3:>10.3f}"
                     f"{r['ratio']:>12.2f}{r['bytes'] / 1e6:>9.1f}{r['gbps']:>7.1f}")
    if not any(r["kernel"] == ADD_NORM[0] for r in results):
        lines.append("not timed: yours (Exercise 9.5 raises NotImplementedError, or no Numba)")
    return "\n".join(lines)


def _layer_norm_ops(x, weight, bias, eps: float = 1e-5):
    """LayerNorm over the last dim in plain torch operations, for torch.compile to fuse."""
    mean = x.mean(dim=-1, keepdim=True)  # (R, 1)
    xc = x - mean  # (R, H)
    rstd = torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + eps)  # (R, 1)
    return xc * rstd * weight + bias  # (R, H)


def fused_table(device="cuda", sizes=SIZES, rows=ROWS, dtype=torch.float32, compile=True):
    """A fused LayerNorm forward (torch.compile of _layer_norm_ops: on a CUDA device,
    inductor generates one Triton kernel) against F.layer_norm on `device`, in GB/s of
    the 2|x| model and as a fraction of the device's copy bandwidth, timed with
    torch.utils.benchmark.Timer (which synchronizes CUDA). compile=False times the
    unfused operations instead (for a test on a CPU). Returns the table as text."""
    from torch.utils.benchmark import Timer

    fused = torch.compile(_layer_norm_ops, dynamic=False) if compile else _layer_norm_ops
    name = "compiled" if compile else "eager ops"

    def median(fn, *args):
        timer = Timer("fn(*args)", globals={"fn": fn, "args": args})
        return timer.blocked_autorange(min_run_time=0.2).median

    src = torch.ones(2**28 // 4 if device != "cpu" else 2**24 // 4, device=device)
    copy_gbps = 2 * src.nbytes / median(torch.Tensor.copy_, torch.empty_like(src), src) / 1e9
    lines = [f"{torch.device(device)}: copy {copy_gbps:.0f} GB/s; {rows} rows, "
             f"{str(dtype).removeprefix('torch.')}",
             f"{'H':>5}  {'kernel':<12}{'median us':>10}{'GB/s':>8}{'of copy':>9}"]
    gen = torch.Generator(device=device).manual_seed(0)
    for h in sizes:
        x = torch.randn(rows, h, device=device, dtype=dtype, generator=gen)  # (R, H)
        w, b = (torch.randn(h, device=device, dtype=dtype, generator=gen) for _ in range(2))
        expected = F.layer_norm(x, (h,), w, b)
        torch.testing.assert_close(fused(x, w, b), expected)  # the same result, first
        for kernel, fn, args in [(name, fused, (x, w, b)),
                                 ("F.layer_norm", F.layer_norm, (x, (h,), w, b))]:
            seconds = median(fn, *args)
            gbps = 2 * x.nbytes / seconds / 1e9
            lines.append(f"{h:>5}  {kernel:<12}{seconds * 1e6:>10.1f}{gbps:>8.0f}"
                         f"{gbps / copy_gbps:>9.0%}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, metavar="H")
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    print(environment(rows=args.rows))
    results, bandwidth = run(args.sizes, args.rows, args.rounds)
    print(table(results, bandwidth))
    missing = {(k, p) for k in KERNELS for p in PASSES} - {(r["kernel"], r["pass"])
                                                           for r in results}
    for kernel, pass_ in sorted(missing):
        print(f"not timed: the {kernel} {pass_} (its exercise raises NotImplementedError)")
    print()
    print(rms_table(rms_versus_layer_norm(args.sizes, args.rows, args.rounds)))
    print()
    print(add_norm_table(add_norm_run(args.sizes, args.rows, args.rounds)))
    if torch.cuda.is_available():
        print(fused_table())


if __name__ == "__main__":
    main()
