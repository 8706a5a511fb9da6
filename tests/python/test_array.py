"""The array class: construction, dtypes, properties, conversion out, operators (NumPy as the
reference)."""

import copy
import operator
import pickle

import numpy as np
import pytest

import tessera.core as mx

ALL_DTYPES = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32,
              mx.int64, mx.float16, mx.float32, mx.float64, mx.bfloat16, mx.complex64]
NUMPY_OF = {mx.bool_: np.bool_, mx.uint8: np.uint8, mx.uint16: np.uint16, mx.uint32: np.uint32,
            mx.uint64: np.uint64, mx.int8: np.int8, mx.int16: np.int16, mx.int32: np.int32,
            mx.int64: np.int64, mx.float16: np.float16, mx.float32: np.float32,
            mx.float64: np.float64, mx.complex64: np.complex64}


def test_python_scalars_take_mlx_default_dtypes():
    assert mx.array(True).dtype == mx.bool_
    assert mx.array(3).dtype == mx.int32
    assert mx.array(2**40).dtype == mx.int64  # does not fit in int32
    assert mx.array(1.5).dtype == mx.float32
    assert mx.array(1 + 2j).dtype == mx.complex64
    assert mx.array(3).item() == 3 and isinstance(mx.array(3).item(), int)
    assert mx.array(1.5).item() == 1.5
    assert mx.array(True).item() is True
    assert mx.array(1 + 2j).item() == 1 + 2j


def test_nested_lists_and_tuples():
    a = mx.array([[1, 2, 3], (4, 5, 6)])
    assert a.shape == (2, 3) and a.dtype == mx.int32
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mx.array([1, 2.5]).dtype == mx.float32
    assert mx.array([True, False]).dtype == mx.bool_
    assert mx.array([1, 2**40]).dtype == mx.int64
    assert mx.array([]).shape == (0,) and mx.array([]).dtype == mx.float32
    assert mx.array([[1, 2]], dtype=mx.float16).dtype == mx.float16
    s = mx.array([mx.array([1, 2]), mx.array([3, 4])])
    assert s.tolist() == [[1, 2], [3, 4]]


@pytest.mark.parametrize("bad", [[[1, 2], [3]], [[1, 2], 3], [1, [2, 3]]])
def test_ragged_lists_are_a_clear_error(bad):
    with pytest.raises(ValueError, match="ragged"):
        mx.array(bad)


def test_unconvertible_object_names_its_type():
    with pytest.raises(ValueError, match="object"):
        mx.array(object())


@pytest.mark.parametrize("dt", [d for d in ALL_DTYPES if d != mx.bfloat16])
def test_numpy_round_trip_every_dtype(dt):
    rng = np.random.default_rng(0)
    ref = (rng.standard_normal((3, 4)) * 10).astype(NUMPY_OF[dt])
    if dt == mx.complex64:
        ref = ref + 1j * ref[::-1]
    a = mx.array(ref, dtype=dt)
    assert a.dtype == dt and a.shape == (3, 4)
    np.testing.assert_array_equal(np.asarray(a), ref)
    np.testing.assert_array_equal(np.array(a.tolist(), dtype=ref.dtype), ref)


def test_numpy_float64_becomes_float32_as_mlx():
    assert mx.array(np.ones(3)).dtype == mx.float32
    assert mx.array(np.ones(3, np.complex128)).dtype == mx.complex64
    assert mx.array(np.ones(3), dtype=mx.float64).dtype == mx.float64


def test_non_contiguous_and_big_endian_numpy_inputs():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for view in (base[:, ::2, ::-1], base.transpose(2, 0, 1), base[1], base[..., 3]):
        np.testing.assert_array_equal(np.asarray(mx.array(view)), view)
    be = np.arange(6, dtype=">i4").reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(mx.array(be)), be.astype("=i4"))
    np.testing.assert_array_equal(np.asarray(mx.array(np.float32(2.5))), np.float32(2.5))


def test_buffer_protocol_and_memoryview():
    a = mx.array([[1.0, 2.0], [3.0, 4.0]])
    m = memoryview(a)
    assert m.format == "f" and m.shape == (2, 2) and m.strides == (8, 4)
    assert mx.array(memoryview(bytearray(b"\x01\x02\x03"))).tolist() == [1, 2, 3]


@pytest.mark.parametrize("name", ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                                  "int32", "int64", "float16", "float32", "float64", "complex64"])
def test_every_dtypes_buffer_format_is_numpys(name):
    want = np.arange(-3, 3).astype(name.rstrip("_"))
    view = memoryview(mx.array(want, dtype=getattr(mx, name)))  # float64 stays float64
    got = np.asarray(view)  # NumPy reads the format (PEP 3118), not the array's dtype
    assert got.dtype == want.dtype and view.itemsize == want.itemsize
    np.testing.assert_array_equal(got, want)


def test_asarray_is_a_zero_copy_view_that_keeps_the_buffer_alive():
    a = mx.arange(12).reshape(3, 4)
    v = np.asarray(a)
    w = np.asarray(a)
    assert v.__array_interface__["data"][0] == w.__array_interface__["data"][0]
    del a
    np.testing.assert_array_equal(v, np.arange(12).reshape(3, 4))
    t = mx.arange(6).reshape(2, 3).T
    np.testing.assert_array_equal(np.asarray(t), np.arange(6).reshape(2, 3).T)


def test_bfloat16_has_a_buffer_but_no_numpy_dtype():
    a = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4), dtype=mx.bfloat16)
    view = memoryview(a)
    assert (view.format, view.shape, view.strides, view.itemsize) == ("bfloat16", (3, 4), (8, 2), 2)
    # The bytes are bfloat16's: float32's upper halves (these values are exact in bfloat16).
    want = np.arange(12, dtype=np.float32).reshape(3, 4).view(np.uint32) >> 16
    np.testing.assert_array_equal(np.frombuffer(view.cast("B"), np.uint16).reshape(3, 4), want)
    for convert in (np.asarray, np.array):  # NumPy reads the buffer first, as with MLX
        with pytest.raises(ValueError, match="bfloat16"):
            convert(a)
    with pytest.raises(TypeError, match="bfloat16"):
        a.__array__()
    assert mx.array([1.5], dtype=mx.bfloat16).astype(mx.float32).tolist() == [1.5]


def test_properties():
    a = mx.zeros((2, 3, 4), dtype=mx.float16)
    assert (a.size, a.ndim, a.itemsize, a.nbytes) == (24, 3, 2, 48)
    assert a.shape == (2, 3, 4) and isinstance(a.shape, tuple)
    assert a.T.shape == (4, 3, 2)
    z = mx.array([1 + 2j, 3 - 1j])
    assert z.real.tolist() == [1.0, 3.0] and z.imag.tolist() == [2.0, -1.0]
    assert len(a) == 2
    with pytest.raises(TypeError):
        len(mx.array(1.0))
    assert [x.tolist() for x in mx.array([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]


def test_bool_int_float_conversions():
    assert bool(mx.array(1)) and not bool(mx.array(0.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(mx.array([1, 2]))
    assert int(mx.array(7.9)) == 7 and float(mx.array(2)) == 2.0
    assert [10, 20, 30][mx.array(1)] == 20


def test_repr_matches_mlx():
    assert repr(mx.array([1, 2, 3])) == "array([1, 2, 3], dtype=int32)"
    assert repr(mx.array(2.5)) == "array(2.5, dtype=float32)"
    assert str(mx.array([[1.0, 2.0]])) == "array([[1, 2]], dtype=float32)"
    assert repr(mx.float32) == "tessera.core.float32"


def test_dtype_objects_and_categories():
    assert mx.float32.size == 4 and mx.complex64.size == 8 and mx.bool_.size == 1
    assert mx.issubdtype(mx.float16, mx.floating)
    assert mx.issubdtype(mx.int8, mx.signedinteger) and not mx.issubdtype(mx.uint8, mx.signedinteger)
    assert mx.issubdtype(mx.complex64, mx.inexact) and mx.issubdtype(mx.floating, mx.number)
    assert mx.finfo(mx.float32).eps == float(np.finfo(np.float32).eps)
    assert mx.finfo(mx.float16).max == float(np.finfo(np.float16).max)
    assert (mx.iinfo(mx.int16).min, mx.iinfo(mx.int16).max) == (-32768, 32767)
    assert mx.pi == np.pi and mx.e == np.e and mx.newaxis is None
    assert mx.inf == float("inf") and mx.nan != mx.nan
    assert {mx.float32: 1}[mx.float32] == 1


def test_pickle_and_deepcopy_every_dtype():
    for dt in ALL_DTYPES:
        a = mx.arange(6).reshape(2, 3).astype(dt)
        b = pickle.loads(pickle.dumps(a))
        assert b.dtype == dt and b.shape == (2, 3)
        assert mx.array_equal(a, b).item()
        c = copy.deepcopy(a)
        assert mx.array_equal(a, c).item() and c is not a
    assert pickle.loads(pickle.dumps(mx.float16)) == mx.float16


BINARY = [("__add__", np.add), ("__sub__", np.subtract), ("__mul__", np.multiply),
          ("__truediv__", np.true_divide), ("__floordiv__", np.floor_divide),
          ("__mod__", np.mod), ("__pow__", np.power)]


@pytest.mark.parametrize("name,ref", BINARY)
def test_arithmetic_operators_forward_reflected_and_in_place(name, ref):
    x = np.array([[1.5, -2.0, 3.0], [4.0, 5.5, -6.0]], np.float32)
    y = np.array([0.5, 2.0, -1.5], np.float32)
    if name == "__pow__":
        x = np.abs(x)
    a, b = mx.array(x), mx.array(y)
    np.testing.assert_allclose(np.asarray(getattr(a, name)(b)), ref(x, y), rtol=1e-6)
    rname = "__r" + name[2:]
    np.testing.assert_allclose(np.asarray(getattr(b, rname)(a)), ref(x, y), rtol=1e-6)
    iname = "__i" + name[2:]
    c = mx.array(x)
    ident = id(c)
    c = getattr(c, iname)(b)
    assert id(c) == ident
    np.testing.assert_allclose(np.asarray(c), ref(x, y), rtol=1e-6)


SYNTAX = [(operator.add, operator.iadd, np.add), (operator.sub, operator.isub, np.subtract),
          (operator.mul, operator.imul, np.multiply),
          (operator.truediv, operator.itruediv, np.true_divide)]


@pytest.mark.parametrize("op,iop,ref", SYNTAX)
def test_operator_syntax_matches_numpy_with_the_array_on_either_side(op, iop, ref):
    # `a + b` runs the type's number slots, not the __add__ method: the same results and errors.
    x = np.array([[1.5, -2.0, 3.0], [4.0, 5.5, -6.0]], np.float32)
    y = np.array([0.5, 2.0, -1.5], np.float32)
    a = mx.array(x)
    for other, ref_other in ((mx.array(y), y), (2.5, np.float32(2.5)), (3, np.float32(3)),
                             (True, np.float32(1))):
        np.testing.assert_allclose(np.asarray(op(a, other)), ref(x, ref_other), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(op(other, a)), ref(ref_other, x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(op(a, y)), ref(x, y), rtol=1e-6)
    c = mx.array(x)
    alias = c
    c = iop(c, mx.array(y))
    assert c is alias
    np.testing.assert_allclose(np.asarray(alias), ref(x, y), rtol=1e-6)
    with pytest.raises(ValueError, match="cannot be combined"):
        op([1.0, 2.0, 3.0], a)
    with pytest.raises(ValueError, match="broadcast|shape"):
        op(a, mx.ones((4,)))
    with pytest.raises(ValueError, match="broadcast|shape"):
        iop(c, mx.ones((4,)))
    assert c is alias and c.shape == (2, 3)  # a failed in-place op leaves the array as it was
    np.testing.assert_allclose(np.asarray(op(a, 1.0)), ref(x, np.float32(1)), rtol=1e-6)


def test_repeated_python_scalar_operands_keep_their_value_dtype_and_sign():
    # Scalar operands may be shared between ops (a small per-thread cache): the same constant in
    # a chain whose every step could reuse an input's buffer must never be overwritten.
    z = mx.array(0.0)
    for _ in range(10):
        z = z + 2.0
    assert z.item() == 20.0
    w = mx.array([1.0, 2.0, 3.0])
    for _ in range(5):
        w = (w * 2.0 + 2.0) - 2.0
    np.testing.assert_array_equal(np.asarray(w), np.array([1.0, 2.0, 3.0]) * 32)
    assert (mx.array(1.0) / -0.0).item() == -np.inf and (mx.array(1.0) / 0.0).item() == np.inf
    assert (mx.array([1], mx.int8) + 3).dtype == mx.int8
    assert (mx.array([1], mx.int32) + 3).dtype == mx.int32
    assert (mx.array([1.0], mx.float16) + 0.5).dtype == mx.float16
    assert (mx.array([1.0]) + 0.5).dtype == mx.float32
    # More distinct constants than the cache holds, used twice over.
    x = mx.array([10.0])
    for c in [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 2**20, -7]:
        assert (x - c).item() == 10.0 - c


def test_python_scalars_keep_the_array_dtype():
    h = mx.ones((2,), dtype=mx.float16)
    assert (h + 1).dtype == mx.float16 and (h * 2.5).dtype == mx.float16 and (1 - h).dtype == mx.float16
    i = mx.ones((2,), dtype=mx.uint8)
    assert (i + 1).dtype == mx.uint8
    assert (i + 1.5).dtype == mx.float32
    assert (mx.array([True]) + 1).dtype == mx.int32


def test_matmul_bitwise_comparisons_and_unary():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.asarray(mx.array(x) @ mx.array(w)), x @ w)
    i, j = np.array([12, 5, 7], np.int32), np.array([10, 3, 1], np.int32)
    a, b = mx.array(i), mx.array(j)
    for op in ("__and__", "__or__", "__xor__", "__lshift__", "__rshift__"):
        np.testing.assert_array_equal(np.asarray(getattr(a, op)(b)), getattr(i, op)(j))
    np.testing.assert_array_equal(np.asarray(~a), ~i)
    np.testing.assert_array_equal(np.asarray(~mx.array([True, False])), [False, True])
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        np.testing.assert_array_equal(np.asarray(getattr(a, op)(b)), getattr(i, op)(j))
    assert (a == None) is False and (a != None) is True  # noqa: E711
    np.testing.assert_array_equal(np.asarray(-a), -i)
    np.testing.assert_array_equal(np.asarray(abs(mx.array([-1, 2]))), [1, 2])


def test_methods_match_numpy():
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    a = mx.array(x)
    np.testing.assert_allclose(np.asarray(a.sum()), x.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a.sum(axis=1, keepdims=True)), x.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a.mean((0, 1))), x.mean(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a.var(axis=0, ddof=1)), x.var(0, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a.max(0)), x.max(0))
    np.testing.assert_array_equal(np.asarray(a.argmax(1)), x.argmax(1))
    np.testing.assert_allclose(np.asarray(a.cumsum(1)), x.cumsum(1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(a.cumsum()), x.cumsum(), rtol=1e-5)
    assert a.reshape(2, 6).shape == (2, 6) and a.reshape((6, 2)).shape == (6, 2)
    assert a.transpose().shape == (4, 3) and a.transpose(1, 0).shape == (4, 3)
    assert [p.shape for p in a.split(2, axis=1)] == [(3, 2), (3, 2)]
    np.testing.assert_allclose(np.asarray(a.exp()), np.exp(x), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(a.astype(mx.int32)), x.astype(np.int32))
    np.testing.assert_allclose(np.asarray(mx.array([1.234, 5.678]).round(1)), [1.2, 5.7], rtol=1e-6)


def test_type_stubs_are_installed_with_signatures_and_docstrings():
    import ast
    import pathlib

    stub_dir = pathlib.Path(mx.__file__).parent / "core"
    text = (stub_dir / "__init__.pyi").read_text()
    tree = ast.parse(text)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"array", "Dtype", "sum", "value_and_grad", "zeros"} <= names
    assert "def sum(" in text and "keepdims: bool = False" in text
    assert (stub_dir / "random.pyi").exists() and (stub_dir / "distributed.pyi").exists()
    # The methods that are module functions have those functions' stubs, with self first.
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "array"]
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in FUNCTION_METHODS:
        assert name in methods, name
        params = methods[name].args.posonlyargs + methods[name].args.args
        assert params[0].arg == "self", name
        assert ast.get_docstring(methods[name]) == ast.get_docstring(functions[name]), name
    assert [a.arg for a in methods["sum"].args.args] == ["self", "axis", "keepdims"]
    assert "instancemethod" not in text


def test_result_type_and_broadcast_shapes_match_numpy():
    assert mx.result_type(mx.array([1], mx.int8), mx.float16) == mx.float16
    assert mx.result_type(mx.int32, mx.uint32) == mx.int64
    assert mx.result_type(mx.array(True), mx.array([1], mx.uint8)) == mx.uint8
    assert mx.broadcast_shapes((2, 1, 3), (4, 1), (3,)) == np.broadcast_shapes((2, 1, 3), (4, 1), (3,))
    with pytest.raises(ValueError, match="broadcast"):
        mx.broadcast_shapes((2, 3), (4,))
    assert (mx.float32 == None) is False and mx.float32 in [None, mx.float32]  # noqa: E711


def test_dlpack_in_and_out():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(mx.array(x.__dlpack__())), x)  # a capsule

    class Producer:  # any object with __dlpack__ / __dlpack_device__
        def __dlpack__(self, **kwargs):
            return x.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return x.__dlpack_device__()

    np.testing.assert_array_equal(np.asarray(mx.array(Producer())), x)
    np.testing.assert_array_equal(np.from_dlpack(mx.arange(4)), np.arange(4))
    assert mx.arange(4).__dlpack_device__() == (1, 0)


def test_operators_take_scalars_and_arrays_not_lists_as_mlx():
    a = mx.array([1, 2, 3])
    assert (a == [1, 2, 3]) is False and (a != (1, 2, 3)) is True
    for bad in ([1, 2, 3], (1, 2, 3), "x"):
        with pytest.raises(ValueError, match="cannot be combined"):
            a + bad
        with pytest.raises(ValueError, match="cannot be combined"):
            a < bad
    np.testing.assert_array_equal(np.asarray(a + np.array([1, 1, 1])), [2, 3, 4])
    assert mx.add(a, [1, 1, 1]).tolist() == [2, 3, 4]  # the functions convert lists


def test_python_ints_that_do_not_fit_the_array_dtype_are_errors():
    y = mx.array(2_000_000_000, dtype=mx.int32)
    with pytest.raises(ValueError, match="does not fit"):
        y + 3_000_000_000
    with pytest.raises(ValueError, match="does not fit"):
        mx.array([1], dtype=mx.uint8) - 256
    assert (mx.array([1], dtype=mx.uint8) + 255).tolist() == [0]  # fits: wraps as uint8 arithmetic
    assert (mx.array([1.0]) + 2**40).dtype == mx.float32


def test_asarray_and_from_dlpack():
    a = mx.array([1.0, 2.0])
    assert mx.asarray(a).tolist() == [1.0, 2.0] and mx.asarray([1, 2]).tolist() == [1, 2]
    assert mx.asarray([1, 2], dtype=mx.float16).dtype == mx.float16
    np.testing.assert_array_equal(np.asarray(mx.from_dlpack(np.arange(3.0, dtype=np.float32))), [0, 1, 2])


def test_objects_with_the_mlx_array_protocol_convert():
    class Wrapped:
        def __init__(self, a):
            self.a = a

        def __mlx_array__(self):
            return self.a

    w = Wrapped(mx.array([1.0, 2.0]))
    assert mx.array(w).tolist() == [1.0, 2.0]
    assert (mx.array([1.0, 1.0]) + w).tolist() == [2.0, 3.0]
    assert mx.add(w, 1.0).tolist() == [2.0, 3.0]


def test_array_api_helpers_can_cast_isdtype_namespace_asarray_copy():
    # can_cast follows the promotion table (NumPy's safe casting for these pairs).
    for a, b in [(mx.int8, mx.int16), (mx.int16, mx.int8), (mx.uint8, mx.int16), (mx.uint16, mx.int16),
                 (mx.float32, mx.float64), (mx.float64, mx.float32), (mx.int32, mx.float32)]:
        want = np.can_cast(np.dtype(str(a).split(".")[-1]), np.dtype(str(b).split(".")[-1]))
        if (a, b) == (mx.int32, mx.float32):
            want = True  # MLX's promotion: int32 with float32 gives float32
        assert mx.can_cast(a, b) == want, (a, b)
    assert mx.can_cast(mx.array([1], dtype=mx.int8), mx.int32)
    with pytest.raises(ValueError, match="from_ must be an array or a dtype"):
        mx.can_cast(3, mx.int32)
    assert mx.isdtype(mx.int32, "signed integer") and not mx.isdtype(mx.uint8, "signed integer")
    assert mx.isdtype(mx.float16, ("integral", "real floating")) and not mx.isdtype(mx.bool_, "numeric")
    assert mx.isdtype(mx.int8, (mx.int8, mx.int16)) and not mx.isdtype(mx.int32, mx.int16)
    with pytest.raises(ValueError, match="unknown kind 'float'"):
        mx.isdtype(mx.float32, "float")
    with pytest.raises(ValueError, match="at least one"):
        mx.result_type()
    xp = mx.array(1.0).__array_namespace__()
    assert xp is mx and xp.asarray([1, 2]).tolist() == [1, 2]
    a = mx.array([1, 2, 3])
    b = mx.asarray(a, copy=True)
    assert b.tolist() == [1, 2, 3] and b.dtype == a.dtype
    with pytest.raises(ValueError, match="copy=False"):
        mx.asarray(a, copy=False)


def test_format_specs_apply_to_zero_d_arrays_only():
    assert f"{mx.arange(3)[1]:.2f}" == format(1, ".2f") == "1.00"
    assert f"{mx.array(0.35487):.1f}" == format(np.float32(0.35487).item(), ".1f")
    assert f"{mx.array([1, 2, 3])}" == repr(mx.array([1, 2, 3]))
    with pytest.raises(TypeError, match="format string '.2f' for an array of 1 dimensions"):
        f"{mx.arange(3):.2f}"


def test_print_options_set_digits_after_the_point():
    x = mx.array([1.123456789, -2.5])
    assert str(x) == "array([1.12346, -2.5], dtype=float32)"
    assert mx.get_printoptions().precision == -1
    try:
        with mx.printoptions(precision=4) as opts:
            assert opts.precision == 4 and mx.get_printoptions().precision == 4
            assert str(x) == f"array([{1.123456789:.4f}, {-2.5:.4f}], dtype=float32)"
            assert str(mx.array([7, 8])) == "array([7, 8], dtype=int32)"
        assert str(x) == "array([1.12346, -2.5], dtype=float32)"
        mx.set_printoptions(precision=2)
        s = mx.sin(x)
        want = np.sin(np.array([1.123456789, -2.5], dtype=np.float32))
        assert str(s) == f"array([{want[0]:.2f}, {want[1]:.2f}], dtype=float32)"
        assert repr(mx.array(1 + 2j)) == "array(1.00+2.00j, dtype=complex64)"
        with pytest.raises(ValueError, match="-2"):
            mx.printoptions(precision=-2)
        assert mx.get_printoptions().precision == 2
    finally:
        mx.set_printoptions()
    assert mx.get_printoptions().precision == -1


def test_in_place_division_of_an_integer_array_is_refused():
    a = mx.array([1, 2])
    with pytest.raises(ValueError, match="int32"):
        a /= 1
    assert a.dtype == mx.int32 and a.tolist() == [1, 2]
    b = mx.array([2.0, 3.0])
    alias = b
    b /= 2
    assert alias is b and b.tolist() == [1.0, 1.5]
    c = mx.array([7, 8])
    c //= 2
    assert c.tolist() == [3, 4] and c.dtype == mx.int32


def test_lists_may_mix_arrays_with_nested_lists_and_scalars():
    x, y = mx.array([True], mx.bool_), mx.array([5], mx.int8)
    z = mx.array([[x, [2.0]], [[3.0], y]])
    np.testing.assert_array_equal(np.asarray(z), np.array([[[1.0], [2.0]], [[3.0], [5.0]]]))
    assert z.shape == (2, 2, 1) and z.dtype == mx.float32
    assert mx.array([mx.array(1), 2, mx.array(3)]).tolist() == [1, 2, 3]
    m = mx.array(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert mx.array([m, [[6, 7, 8], [9, 10, 11]]]).tolist() == np.arange(12).reshape(2, 2, 3).tolist()
    with pytest.raises(ValueError, match="ragged"):
        mx.array([x, [1.0, 2.0]])
    with pytest.raises(ValueError, match="ragged"):
        mx.array([x, 1.0])  # an array of shape (1,) where a scalar sits


def test_from_dlpack_copies_and_keeps_a_views_strides():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (x.T, np.arange(20, dtype=np.int32)[2:10:2], x[:, 1:3]):
        y = mx.from_dlpack(view)
        assert y.tolist() == view.tolist()
        assert y.dtype == {np.dtype(np.float32): mx.float32, np.dtype(np.int32): mx.int32}[view.dtype]
        m = memoryview(y)
        assert m.strides == view.strides and not m.c_contiguous
        np.testing.assert_array_equal(np.asarray(y), view)
    src = np.arange(3, dtype=np.float32)
    y = mx.from_dlpack(src, copy=True)
    src += 10
    assert y.tolist() == [0.0, 1.0, 2.0]  # a copy: later writes to the source are not seen
    with pytest.raises(ValueError, match="copy=False"):
        mx.from_dlpack(src, copy=False)
    assert mx.from_dlpack(np.ones(3, np.float64)).dtype == mx.float32  # as MLX
    sparse = np.arange(100, dtype=np.float32)[::10]
    assert mx.from_dlpack(sparse).tolist() == sparse.tolist()  # compacted, not a 10x span
    flipped = np.arange(5, dtype=np.float32)[::-1]
    assert mx.from_dlpack(flipped).tolist() == flipped.tolist()


def test_numpy_dimension_past_int32_is_an_overflow_error():
    with pytest.raises(OverflowError, match="2147483648"):
        mx.array(np.empty(2**31, dtype=np.bool_))


def test_objects_the_number_protocol_converts_are_operands_of_their_narrowest_kind():
    # A Fraction, a Decimal, a mock (mlx-lm's tests pass MagicMocks through its trainer): each
    # becomes the Python scalar it converts to, int through __index__ before float through
    # __float__ before complex through __complex__, and takes part weakly typed like one.
    from decimal import Decimal
    from fractions import Fraction
    from unittest.mock import MagicMock

    class OnlyComplex:
        def __complex__(self):
            return 2 - 1j

    x = np.array([1.0, -2.5, 4.0], dtype=np.float32)
    a = mx.array(x, dtype=mx.bfloat16)
    r = a + Fraction(1, 4)
    assert r.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(r.astype(mx.float32)), x + 0.25)
    np.testing.assert_array_equal(np.array(mx.array(x) * Decimal("1.5")), x * 1.5)
    np.testing.assert_array_equal(np.array(Fraction(3, 2) - mx.array(x)), 1.5 - x)
    np.testing.assert_array_equal(np.array(mx.maximum(mx.array(x), Fraction(1, 2))), np.maximum(x, 0.5))
    i = mx.array([1, 2, 3])
    total = i + MagicMock()  # MagicMock's __index__ is 1
    assert total.dtype == mx.int32 and total.tolist() == [2, 3, 4]
    acc = mx.array(0.0)
    before = id(acc)
    acc += MagicMock()
    acc *= Fraction(5, 2)
    assert id(acc) == before and acc.item() == 2.5
    z = mx.array(x) * OnlyComplex()
    assert z.dtype == mx.complex64
    np.testing.assert_allclose(np.array(z), x * (2 - 1j))
    assert mx.array(Fraction(3, 4)).item() == 0.75 and mx.array(Fraction(3, 4)).dtype == mx.float32
    with pytest.raises(ValueError, match="object of type object"):
        mx.array(x) + object()


# The methods that are module functions: a.NAME(...) is mx.NAME(a, ...), one definition each.
FUNCTION_METHODS = ["sum", "prod", "max", "min", "mean", "all", "any", "logsumexp", "var", "std",
                    "argmax", "argmin", "abs", "square", "sqrt", "rsqrt", "reciprocal", "exp",
                    "log", "log2", "log10", "log1p", "sin", "cos", "conj", "round", "cumsum",
                    "cumprod", "cummax", "cummin", "logcumsumexp", "flatten", "squeeze",
                    "moveaxis", "swapaxes", "split", "diagonal", "diag", "view"]


@pytest.mark.parametrize("name", FUNCTION_METHODS)
def test_methods_are_the_module_functions(name):
    assert getattr(mx.array, name).__doc__ == getattr(mx, name).__doc__


def test_function_methods_take_arguments_like_the_functions():
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    a = mx.array(x)
    np.testing.assert_allclose(np.array(a.sum(0, keepdims=True, stream=mx.cpu)),
                               x.sum(0, keepdims=True))
    np.testing.assert_allclose(np.array(a.var(axis=1, ddof=1)), x.var(axis=1, ddof=1), rtol=1e-6)
    np.testing.assert_array_equal(np.array(a.cumsum(1, reverse=True)),
                                  np.flip(np.cumsum(np.flip(x, 1), 1), 1))
    np.testing.assert_array_equal(np.array(a.argmax(axis=1)), x.argmax(axis=1))
    parts = a.split([1], axis=1)
    np.testing.assert_array_equal(np.array(parts[1]), x[:, 1:])
    np.testing.assert_allclose(np.array(a.log1p()), np.log1p(x), rtol=1e-6)
    assert a.view(mx.int32).dtype == mx.int32
    np.testing.assert_array_equal(np.array(a.reshape(4, 3)), x.reshape(4, 3))  # *shape as MLX
    np.testing.assert_array_equal(np.array(a.transpose()), x.T)
    with pytest.raises(TypeError):
        a.sum(0, False, mx.cpu)  # stream is keyword-only, as for mx.sum
    # The unbound method is the function itself.
    np.testing.assert_allclose(np.array(mx.array.mean(a)), x.mean())
