"""A compiled one-pass kernel (numba) over a float chunk: sums, sign counts, minimum and maximum.

Imported only through :func:`debugger.stats.compiled_kernel`: numba costs about 1 s to start in
a process, which a long-running recorder repays within its first iterations and a short CLI run
does not.
"""
from __future__ import annotations

import numba
import numpy as np

if getattr(numba.config, "DISABLE_JIT", False):
    # NUMBA_DISABLE_JIT would run this loop as Python, about 1 us an element: numpy's passes instead
    raise ImportError("numba's JIT is disabled (NUMBA_DISABLE_JIT)")

# Reassociation is what lets LLVM vectorise the sums; NaN and Inf keep their IEEE meaning (no
# "nnan"/"ninf"), so a non-finite element still makes the sum non-finite and the caller falls back.
_FLAGS = {"reassoc", "nsz", "contract", "arcp"}
_OUT = "Tuple((f8, f8, f8, i8, i8, f8, f8))"
_SIGS = [f"{_OUT}(f4[::1], i4[::1])", f"{_OUT}(f8[::1], i8[::1])"]
_MAGNITUDE = 0x7FFFFFFFFFFFFFFF


def _one_pass(x, bits):  # type: ignore[no-untyped-def]
    """Sum, sum of squares and absolute sum (float64 accumulators), zeros, positives, minimum and
    maximum of ``x`` (finite); ``bits`` is ``x`` viewed as integers of its width."""
    s = 0.0
    sq = 0.0
    ab = 0.0
    zeros = 0
    positives = 0
    # The minimum and maximum over order-preserving integer keys of the floats' bits (sign and
    # magnitude -> two's complement): integer min/max vectorise, float ones (NaN-aware) do not.
    lo = np.int64(_MAGNITUDE)
    hi = -lo - 1
    for i in range(x.size):
        v = np.float64(x[i])
        s += v
        sq += v * v
        ab += abs(v)
        zeros += 1 if v == 0 else 0
        positives += 1 if v > 0 else 0
        b = np.int64(bits[i])           # sign-extended, so one 64-bit mask serves both widths
        k = b ^ ((b >> 63) & _MAGNITUDE)
        lo = k if k < lo else lo
        hi = k if k > hi else hi
    ends = np.empty(2, x.dtype)
    ends_bits = ends.view(bits.dtype)
    ends_bits[0] = lo ^ ((lo >> 63) & _MAGNITUDE)     # the key's inverse, truncated to the width
    ends_bits[1] = hi ^ ((hi >> 63) & _MAGNITUDE)
    return s, sq, ab, zeros, positives, np.float64(ends[0]), np.float64(ends[1])


try:
    one_pass = numba.njit(_SIGS, fastmath=_FLAGS, nogil=True, cache=True)(_one_pass)
except RuntimeError:
    # no writable place for numba's cache (a read-only install and no writable home): compiled anew
    # in each process (about 2 s) rather than not at all
    one_pass = numba.njit(_SIGS, fastmath=_FLAGS, nogil=True)(_one_pass)



def _update_pass(cur, prev, rtol):  # type: ignore[no-untyped-def]
    """Sum and maximum of |cur - prev|, maximum of |cur - prev| - rtol * |prev| and sum of |prev|
    (float64 accumulators), as debugger.stats.update_stats computes them for finite elements. Built
    with every fast-math flag (a vectorised maximum): only a result whose two sums are finite means
    something; a non-finite element makes one of them non-finite, and the caller falls back."""
    d_sum = 0.0
    d_max = 0.0
    excess = -np.inf
    p_sum = 0.0
    for i in range(cur.size):
        c = np.float64(cur[i])
        p = np.float64(prev[i])
        d = abs(c - p)
        ap = abs(p)
        d_sum += d
        d_max = max(d, d_max)
        excess = max(d - ap * rtol, excess)
        p_sum += ap
    return d_sum, d_max, excess, p_sum


_UPDATE_SIGS = ["Tuple((f8, f8, f8, f8))(f4[::1], f4[::1], f8)", "Tuple((f8, f8, f8, f8))(f8[::1], f8[::1], f8)"]
try:
    update_pass = numba.njit(_UPDATE_SIGS, fastmath=True, nogil=True, cache=True)(_update_pass)
except RuntimeError:
    update_pass = numba.njit(_UPDATE_SIGS, fastmath=True, nogil=True)(_update_pass)
