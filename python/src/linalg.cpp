// tessera.core.linalg: include/tessera/linalg.h's routines with MLX's signatures.
#include "convert.h"

#include <nanobind/stl/pair.h>

#include <string>

namespace tessera::python {

void init_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("linalg", "Linear algebra routines.");

  m.def(
      "norm",
      [](const array& a, const std::variant<std::monostate, int, double, std::string>& ord,
         const std::variant<std::monostate, int, std::vector<int>>& axis, bool keepdims,
         StreamOrDevice s) {
        std::optional<std::vector<int>> axes;
        if (auto* i = std::get_if<int>(&axis)) axes = std::vector<int>{*i};
        if (auto* v = std::get_if<std::vector<int>>(&axis)) axes = *v;
        if (auto* name = std::get_if<std::string>(&ord)) {
          return linalg::norm(a, *name, axes, keepdims, s);
        }
        if (auto* i = std::get_if<int>(&ord)) {
          return linalg::norm(a, static_cast<double>(*i), axes, keepdims, s);
        }
        if (auto* d = std::get_if<double>(&ord)) return linalg::norm(a, *d, axes, keepdims, s);
        return linalg::norm(a, axes, keepdims, s);
      },
      nb::arg(), "ord"_a = nb::none(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
      "stream"_a = nb::none(),
      "Vector or matrix norm.\n\n"
      "With neither ``ord`` nor ``axis``, the 2-norm of the flattened input. With\n"
      "one axis, a vector norm; with two, a matrix norm.\n\n"
      "Args:\n"
      "    a (array): Input array (1-D or 2-D when ``ord`` is given without\n"
      "      ``axis``).\n"
      "    ord (int, float or str, optional): The norm: for vectors ``inf``,\n"
      "      ``-inf``, ``0`` or any p; for matrices ``1``, ``-1``, ``inf``,\n"
      "      ``-inf``, ``2``, ``-2``, ``'fro'`` or ``'nuc'``. Default: ``None``\n"
      "      (2-norm / Frobenius).\n"
      "    axis (int or list(int), optional): One or two axes to reduce.\n"
      "    keepdims (bool, optional): Keep the reduced axes. Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The norm.\n");
  // The factorizations: (..., M, N) float32 / float64 matrices, batched over leading dims.
#define LINALG_DOC(summary, args, returns)                                     \
  summary "\n\nArgs:\n    a (array): Input array of matrices (float32 or float64).\n" args \
          "\nReturns:\n    " returns "\n"
  m.def("qr", &linalg::qr, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The QR factorization ``a = q @ r`` (reduced: ``q`` is (..., M, K), ``r``\n"
                   "(..., K, N), K = min(M, N)).", "",
                   "tuple(array, array): ``q`` and ``r``."));
  m.def(
      "svd",
      [](const array& a, bool compute_uv, StreamOrDevice s) -> nb::object {
        auto out = linalg::svd(a, compute_uv, s);
        if (!compute_uv) return nb::cast(out[0]);
        return nb::make_tuple(out[0], out[1], out[2]);
      },
      nb::arg(), "compute_uv"_a = true, nb::kw_only(), "stream"_a = nb::none(),
      LINALG_DOC("The singular value decomposition ``a = u @ diag(s) @ vt``.",
                 "    compute_uv (bool, optional): Also return ``u`` and ``vt``. Default: ``True``.\n",
                 "tuple(array, array, array) or array: ``u`` (..., M, M), ``s`` (..., K)\n"
                 "    descending, ``vt`` (..., N, N); ``s`` alone without ``compute_uv``."));
  m.def("inv", &linalg::inv, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The inverse of square matrices (a singular one raises).", "",
                   "array: The inverse."));
  m.def("tri_inv", &linalg::tri_inv, nb::arg(), "upper"_a = false, nb::kw_only(),
        "stream"_a = nb::none(),
        LINALG_DOC("The inverse of triangular matrices.",
                   "    upper (bool, optional): Upper (else lower) triangular; the other triangle\n"
                   "      is not read. Default: ``False``.\n",
                   "array: The (triangular) inverse."));
  m.def("cholesky", &linalg::cholesky, nb::arg(), "upper"_a = false, nb::kw_only(),
        "stream"_a = nb::none(),
        LINALG_DOC("The Cholesky factor of symmetric positive definite matrices.",
                   "    upper (bool, optional): Return ``u`` with ``a = u.T @ u`` (else ``l`` with\n"
                   "      ``a = l @ l.T``). Only that triangle of ``a`` is read. Default: ``False``.\n",
                   "array: The triangular factor."));
  m.def("cholesky_inv", &linalg::cholesky_inv, nb::arg(), "upper"_a = false, nb::kw_only(),
        "stream"_a = nb::none(),
        LINALG_DOC("The inverse of a matrix from its Cholesky factor ``a`` (given in place of\n"
                   "the matrix).",
                   "    upper (bool, optional): ``a`` is the upper factor. Default: ``False``.\n",
                   "array: The inverse of the factored matrix."));
  m.def("pinv", &linalg::pinv, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The Moore-Penrose pseudo-inverse (through the SVD).", "",
                   "array: The pseudo-inverse, (..., N, M)."));
  m.def(
      "lu",
      [](const array& a, StreamOrDevice s) {
        auto out = linalg::lu(a, s);
        return nb::make_tuple(out[0], out[1], out[2]);
      },
      nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
      LINALG_DOC("The LU factorization with partial pivoting: ``l[p] @ u == a``.", "",
                 "tuple(array, array, array): ``p`` (..., M) row indices, ``l`` (..., M, K)\n"
                 "    unit lower, ``u`` (..., K, N) upper."));
  m.def("lu_factor", &linalg::lu_factor, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The packed LU factorization (LAPACK's getrf).", "",
                   "tuple(array, array): ``lu`` and the 0-based ``pivots`` (row i was swapped\n"
                   "    with row pivots[i])."));
  m.def("solve", &linalg::solve, nb::arg(), nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        "Solve ``a @ x = b``.\n\n"
        "Args:\n"
        "    a (array): Square matrices (..., N, N).\n"
        "    b (array): Right-hand sides (..., N) or (..., N, K); batch dims broadcast.\n\n"
        "Returns:\n"
        "    array: ``x``.\n");
  m.def("solve_triangular", &linalg::solve_triangular, nb::arg(), nb::arg(), "upper"_a = false,
        nb::kw_only(), "stream"_a = nb::none(),
        "Solve ``a @ x = b`` for triangular ``a``.\n\n"
        "Args:\n"
        "    a (array): Triangular matrices (..., N, N).\n"
        "    b (array): Right-hand sides.\n"
        "    upper (bool, optional): ``a`` is upper triangular. Default: ``False``.\n\n"
        "Returns:\n"
        "    array: ``x``.\n");
  m.def("cross", &linalg::cross, nb::arg(), nb::arg(), "axis"_a = -1, nb::kw_only(),
        "stream"_a = nb::none(),
        "The cross product of vectors of 2 or 3 elements along ``axis``.\n\n"
        "Args:\n"
        "    a (array): First vectors.\n"
        "    b (array): Second vectors (broadcast against ``a``).\n"
        "    axis (int, optional): The vectors' axis. Default: ``-1``.\n\n"
        "Returns:\n"
        "    array: The cross products (3 elements along ``axis``).\n");
  m.def("eig", &linalg::eig, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("Eigenvalues and right eigenvectors of general square matrices.", "",
                   "tuple(array, array): complex64 eigenvalues (..., N) and eigenvectors as\n"
                   "    columns (..., N, N)."));
  m.def("eigvals", &linalg::eigvals, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("Eigenvalues of general square matrices.", "",
                   "array: complex64 eigenvalues (..., N)."));
  m.def("eigh", &linalg::eigh, nb::arg(), "UPLO"_a = "L", nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("Eigenvalues and eigenvectors of symmetric matrices.",
                   "    UPLO (str, optional): The triangle read, ``'L'`` or ``'U'``. Default:\n"
                   "      ``'L'``.\n",
                   "tuple(array, array): eigenvalues ascending (..., N) and orthonormal\n"
                   "    eigenvectors as columns (..., N, N)."));
  m.def("eigvalsh", &linalg::eigvalsh, nb::arg(), "UPLO"_a = "L", nb::kw_only(),
        "stream"_a = nb::none(),
        LINALG_DOC("Eigenvalues of symmetric matrices.",
                   "    UPLO (str, optional): The triangle read. Default: ``'L'``.\n",
                   "array: Eigenvalues ascending (..., N)."));
  m.def("det", &linalg::det, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The determinant of square matrices (through the LU factorization).", "",
                   "array: The determinants."));
  m.def("slogdet", &linalg::slogdet, nb::arg(), nb::kw_only(), "stream"_a = nb::none(),
        LINALG_DOC("The sign and log of the absolute value of the determinant.", "",
                   "tuple(array, array): ``sign`` (0 for a singular matrix) and ``logabsdet``."));
#undef LINALG_DOC
  parent.attr("matrix_norm") = m.attr("norm");  // as MLX 0.32: the same function
}

}  // namespace tessera::python
