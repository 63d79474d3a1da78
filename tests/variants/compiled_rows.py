"""The steps of a row that the Numba variants of Exercises 7.3, 7.4 and 9.5 share
(tests/variants/wrong_compiled.py, right_compiled.py), so that each variant's own code is
its mistake or its other way: jitted helpers, inlined into the kernels that call them, and
cached (cache=True, in tests/variants/__pycache__) like them."""

from numba import njit

FAST = {"reassoc", "contract"}
PARTS = 4  # the partial sums of a two-stage reduction (numba.get_num_threads() in a
# kernel would make it one that Numba cannot cache; any number is as right)


@njit(fastmath=FAST, cache=True)
def row_statistics(x, r, ddof=0):
    """(mean, variance) of row r of x (R, H), two passes; the variance divided by H - ddof."""
    h = x.shape[1]
    m = 0.0
    for j in range(h):
        m += x[r, j]
    m /= h
    v = 0.0
    for j in range(h):
        v += (x[r, j] - m) ** 2
    return m, v / (h - ddof)


@njit(fastmath=FAST, cache=True)
def write_row(y, x, r, m, rs, weight, bias):
    """y's row r: (x - m) * rs * weight + bias."""
    for j in range(x.shape[1]):
        y[r, j] = (x[r, j] - m) * rs * weight[j] + bias[j]


@njit(fastmath=FAST, cache=True)
def row_means(grad_output, x, r, mean, rstd, weight):
    """(mean(g), mean(g * x_hat)) of row r, g = grad_output * weight."""
    h = x.shape[1]
    a, b = 0.0, 0.0
    for j in range(h):
        g = grad_output[r, j] * weight[j]
        a += g
        b += g * (x[r, j] - mean[r]) * rstd[r]
    return a / h, b / h


@njit(fastmath=FAST, cache=True)
def write_dx(dx, grad_output, x, r, mean, rstd, weight, g_mean, gx_mean):
    """dx's row r: rstd * (g - mean(g) - x_hat * mean(g * x_hat))."""
    for j in range(x.shape[1]):
        x_hat = (x[r, j] - mean[r]) * rstd[r]
        dx[r, j] = rstd[r] * (grad_output[r, j] * weight[j] - g_mean - x_hat * gx_mean)


@njit(fastmath=FAST, cache=True)
def add_shares(dweight, dbias, p, grad_output, x, r, mean, rstd):
    """Row r's shares of dweight and dbias added into row p of the partial sums (P, H)."""
    for j in range(x.shape[1]):
        dweight[p, j] += grad_output[r, j] * (x[r, j] - mean[r]) * rstd[r]
        dbias[p, j] += grad_output[r, j]


@njit(fastmath=FAST, cache=True)
def add_row(stream, x, residual, r):
    """Exercise 9.5's first pass: stream's row r = x + residual; returns the sum of its
    squares (float64)."""
    squares = 0.0
    for j in range(x.shape[1]):
        s = x[r, j] + residual[r, j]
        stream[r, j] = s
        squares += s * s
    return squares


@njit(fastmath=FAST, cache=True)
def scale_row(y, v, r, rs, weight):
    """Exercise 9.5's second pass: y's row r = v's row r * rs * weight."""
    for j in range(v.shape[1]):
        y[r, j] = v[r, j] * rs * weight[j]
