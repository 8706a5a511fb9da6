"""tessera.core.fft against numpy.fft (computed in complex128): every length kind (powers of
two, mixed radix, primes through Bluestein, 1), n / s padding and cutting, axes, norms, real
transforms, shifts and frequencies; gradients against finite differences."""

import os

import numpy as np
import pytest

import tessera.core as mx

RNG = np.random.default_rng(9)


def crand(*shape):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(np.complex64)


def close(got, want, tol=2e-6):
    got = np.asarray(got)
    assert got.shape == want.shape
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, atol=tol * scale * np.log2(max(2, want.size)), rtol=0)


@pytest.mark.parametrize("n", [1, 2, 6, 16, 45, 97, 210, 1024, 1031, 3 * 17 * 19])
def test_fft_ifft_every_length_kind(n):
    x = crand(3, n)
    close(mx.fft.fft(mx.array(x)), np.fft.fft(x.astype(np.complex128)))
    close(mx.fft.ifft(mx.array(x)), np.fft.ifft(x.astype(np.complex128)))


@pytest.mark.parametrize("n", [1, 2, 7, 64, 101, 1000])
def test_rfft_irfft(n):
    r = RNG.standard_normal((2, n)).astype(np.float32)
    close(mx.fft.rfft(mx.array(r)), np.fft.rfft(r.astype(np.float64)))
    spec = np.fft.rfft(r.astype(np.float64))
    close(mx.fft.irfft(mx.array(spec.astype(np.complex64)), n=n), np.fft.irfft(spec, n=n))


def test_sizes_axes_and_norms():
    x = crand(4, 6, 10)
    x128 = x.astype(np.complex128)
    close(mx.fft.fft(mx.array(x), n=13, axis=1), np.fft.fft(x128, n=13, axis=1))
    close(mx.fft.fft(mx.array(x), n=3, axis=0), np.fft.fft(x128, n=3, axis=0))
    close(mx.fft.fft2(mx.array(x)), np.fft.fft2(x128))
    close(mx.fft.ifft2(mx.array(x), s=(5, 12), axes=(0, 2)), np.fft.ifft2(x128, s=(5, 12), axes=(0, 2)))
    close(mx.fft.fftn(mx.array(x)), np.fft.fftn(x128))
    close(mx.fft.ifftn(mx.array(x), s=(7, 9)), np.fft.ifftn(x128, s=(7, 9), axes=(1, 2)))
    for norm in ["backward", "ortho", "forward"]:
        close(mx.fft.fftn(mx.array(x), axes=[0, 2], norm=norm), np.fft.fftn(x128, axes=[0, 2], norm=norm))
        close(mx.fft.ifft(mx.array(x), norm=norm), np.fft.ifft(x128, norm=norm))
    r = RNG.standard_normal((5, 6, 8)).astype(np.float32)
    r64 = r.astype(np.float64)
    close(mx.fft.rfft2(mx.array(r)), np.fft.rfft2(r64))
    close(mx.fft.rfftn(mx.array(r), s=(4, 9), axes=(0, 2)), np.fft.rfftn(r64, s=(4, 9), axes=(0, 2)))
    spec = np.fft.rfftn(r64)
    close(mx.fft.irfftn(mx.array(spec.astype(np.complex64)), s=r.shape),
          np.fft.irfftn(spec, s=r.shape, axes=(0, 1, 2)))
    close(mx.fft.irfft2(mx.array(spec.astype(np.complex64))), np.fft.irfft2(spec))
    # A transposed (strided) input.
    close(mx.fft.fft(mx.array(x).transpose(2, 0, 1), axis=0), np.fft.fft(x128.transpose(2, 0, 1), axis=0))


def test_shifts_and_frequencies():
    a = RNG.standard_normal((5, 6))
    np.testing.assert_array_equal(np.array(mx.fft.fftshift(mx.array(a))), np.fft.fftshift(a).astype(np.float32))
    np.testing.assert_array_equal(np.array(mx.fft.ifftshift(mx.array(a), axes=1)),
                                  np.fft.ifftshift(a, axes=1).astype(np.float32))
    for n in [1, 6, 7]:
        np.testing.assert_allclose(np.array(mx.fft.fftfreq(n, 0.5)), np.fft.fftfreq(n, 0.5), rtol=1e-6)
        np.testing.assert_allclose(np.array(mx.fft.rfftfreq(n, 0.5)), np.fft.rfftfreq(n, 0.5), rtol=1e-6)


def test_vmap_and_jvp_are_the_transform():
    x = crand(3, 4, 16)
    got = mx.vmap(lambda v: mx.fft.fft(v, axis=0), in_axes=2)(mx.array(x))
    close(got, np.moveaxis(np.fft.fft(x.astype(np.complex128), axis=0), 2, 0))
    r = RNG.standard_normal((6, 9)).astype(np.float32)
    t = RNG.standard_normal((6, 9)).astype(np.float32)
    (_,), (tan,) = mx.jvp(lambda v: (mx.fft.rfft(v),), [mx.array(r)], [mx.array(t)])
    close(tan, np.fft.rfft(t.astype(np.float64)))


@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft_even", "rfft_odd", "irfft_even", "irfft_odd", "fft2_real"])
def test_gradients_match_finite_differences(kind):
    n = 8 if kind.endswith("even") else 7
    # Real-valued losses of real inputs (float32 inputs: the transforms are complex64).
    if kind == "fft":
        fn = lambda v: mx.sum(mx.abs(mx.fft.fft(v * (1 + 2j))) ** 2 * mx.arange(6))
    elif kind == "ifft":
        fn = lambda v: mx.sum(mx.real(mx.fft.ifft(v * (1 - 1j))) * mx.arange(6) + mx.imag(mx.fft.ifft(v)))
    elif kind.startswith("rfft"):
        fn = lambda v: mx.sum(mx.real(mx.fft.rfft(v)) * mx.arange(n // 2 + 1) + mx.imag(mx.fft.rfft(v)) ** 2)
    elif kind.startswith("irfft"):
        fn = lambda v: mx.sum(mx.fft.irfft(v + 0.5j * v[::-1], n=n) * mx.arange(n))
    else:
        fn = lambda v: mx.sum(mx.abs(mx.fft.fft2(v)) * mx.arange(6))
    size = {"irfft_even": n // 2 + 1, "irfft_odd": n // 2 + 1}.get(kind, 6 if kind in ("fft", "ifft", "fft2_real") else n)
    shape = (3, 6) if kind == "fft2_real" else (size,)
    x = RNG.standard_normal(shape).astype(np.float32)
    got = np.array(mx.grad(fn)(mx.array(x)))
    eps = 1e-2
    want = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        want[i] = (fn(mx.array(xp)).item() - fn(mx.array(xm)).item()) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: mx.fft.fft(mx.ones((4,)), n=0), "positive"),
        (lambda: mx.fft.fftn(mx.ones((4, 4)), axes=[0, 0]), "twice"),
        (lambda: mx.fft.fft(mx.ones((4,)), axis=2), "axis"),
        (lambda: mx.fft.rfft(mx.ones((4,), dtype=mx.complex64)), "real input"),
        (lambda: mx.fft.fft(mx.ones((4,)), norm="both"), "norm"),
        (lambda: mx.fft.fftfreq(0), "n > 0"),
    ],
)
def test_errors_name_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_hadamard_transform_matches_the_sylvester_matrix():
    import scipy.linalg

    x = RNG.standard_normal((3, 16)).astype(np.float32)
    h = scipy.linalg.hadamard(16)
    np.testing.assert_allclose(np.array(mx.hadamard_transform(mx.array(x))), x @ h.T / 4.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.array(mx.hadamard_transform(mx.array(x), scale=1.0)), x @ h.T, rtol=1e-5, atol=1e-4)
    g = mx.grad(lambda v: mx.sum(mx.hadamard_transform(v) * mx.arange(16)))(mx.array(x))
    np.testing.assert_allclose(np.array(g), np.broadcast_to(np.arange(16) @ h / 4.0, x.shape), rtol=1e-5)
    # A scalar is a transform of size 1: the value times the scale.
    assert mx.hadamard_transform(mx.array(5.0)).item() == 5.0
    assert mx.hadamard_transform(mx.array(5.0), scale=0.2).item() == np.float32(5.0) * np.float32(0.2)
    with pytest.raises(ValueError, match="empty"):
        mx.hadamard_transform(mx.array([]))
    with pytest.raises(ValueError, match=r"36\) must be m \* 2\^k with m in \(1, 12, 20, 28\)"):
        mx.hadamard_transform(mx.ones((36,)))


HADAMARD = np.load(os.path.join(os.path.dirname(__file__), "data", "mlx_hadamard.npz"))


@pytest.mark.parametrize("m", [12, 20, 28])
def test_hadamard_transform_of_m_times_a_power_of_two(m):
    import scipy.linalg

    hm = np.array(mx.hadamard_transform(mx.eye(m), scale=1.0))
    np.testing.assert_array_equal(hm, HADAMARD[f"eye_{m}"])  # MLX's H_m, entry for entry
    np.testing.assert_array_equal(hm @ hm.T, m * np.eye(m))  # and a Hadamard matrix
    for k in (1, 3):
        n = m << k
        full = np.kron(hm, scipy.linalg.hadamard(1 << k))  # transform of e_j = column j of H
        np.testing.assert_array_equal(np.array(mx.hadamard_transform(mx.eye(n), scale=1.0)), full)
        x = HADAMARD[f"x_{n}"]
        y = np.array(mx.hadamard_transform(mx.array(x)))
        np.testing.assert_allclose(y, HADAMARD[f"y_{n}"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y, x.astype(np.float64) @ full / np.sqrt(n), rtol=1e-5, atol=1e-5)
        x64 = x.astype(np.float64)
        np.testing.assert_allclose(np.array(mx.hadamard_transform(mx.array(x64, dtype=mx.float64), scale=0.5)), x64 @ full * 0.5, rtol=1e-12)
        y16 = np.array(mx.hadamard_transform(mx.array(x, dtype=mx.float16)).astype(mx.float32))
        np.testing.assert_allclose(y16, x.astype(np.float16).astype(np.float64) @ full / np.sqrt(n), rtol=2e-3, atol=2e-3)
    # The gradient is the transposed transform: H_20 and H_28 are not symmetric.
    n = 2 * m
    full = np.kron(hm, scipy.linalg.hadamard(2))
    w = RNG.standard_normal(n)
    g = mx.grad(lambda v: mx.sum(mx.hadamard_transform(v, scale=1.0) * mx.array(w, dtype=mx.float64)))(mx.zeros((n,), dtype=mx.float64))
    np.testing.assert_allclose(np.array(g), full @ w, rtol=1e-12)
    # vmap over the transformed axis
    xs = RNG.standard_normal((n, 3))
    v = mx.vmap(lambda r: mx.hadamard_transform(r, scale=1.0), in_axes=1)(mx.array(xs, dtype=mx.float64))
    np.testing.assert_allclose(np.array(v), xs.T @ full, rtol=1e-12)