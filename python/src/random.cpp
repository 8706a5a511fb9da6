// tessera.core.random: include/tessera/random.h with MLX's mlx.core.random signatures.
#include "convert.h"

#include <cstdint>

namespace tessera::python {

void init_random(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("random", "Random number generation.");
  using Key = std::optional<array>;

  m.def(
      "seed", [](uint64_t seed) { random::seed(seed); }, "seed"_a,
      "Reseed this thread's implicit key sequence.\n\n"
      "Args:\n"
      "    seed (int): The seed.\n");
  m.def(
      "key", [](uint64_t seed) { return random::key(seed); }, "seed"_a,
      "A PRNG key from a seed.\n\n"
      "Args:\n"
      "    seed (int): The seed.\n\n"
      "Returns:\n"
      "    array: The key (two uint32 values).\n");
  m.def(
      "split",
      [](const array& key, int num, StreamOrDevice s) { return random::split(key, num, s); },
      "key"_a, "num"_a = 2, "stream"_a = nb::none(),
      "Split a key into new keys.\n\n"
      "Args:\n"
      "    key (array): The key to split.\n"
      "    num (int, optional): How many keys. Default: ``2``.\n\n"
      "Returns:\n"
      "    array: The keys, one per row.\n");
  m.def(
      "uniform",
      [](const ArrayLike& low, const ArrayLike& high, const Shape& shape,
         std::optional<Dtype> dtype, const Key& key, StreamOrDevice s) {
        return random::uniform(to_array(low), to_array(high), shape, dtype.value_or(float32), key,
                               s);
      },
      "low"_a = 0, "high"_a = 1, "shape"_a = Shape{}, "dtype"_a.none() = float32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Samples uniform in the half-open interval ``[low, high)``.\n\n"
      "Args:\n"
      "    low (scalar or array, optional): Lower bound. Default: ``0``.\n"
      "    high (scalar or array, optional): Upper bound. Default: ``1``.\n"
      "    shape (list(int), optional): Output shape (``low`` and ``high``\n"
      "      broadcast to it). Default: ``()``.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``float32``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "normal",
      [](const Shape& shape, std::optional<Dtype> dtype, const std::optional<ArrayLike>& loc,
         const std::optional<ArrayLike>& scale, const Key& key, StreamOrDevice s) {
        Dtype t = dtype.value_or(float32);
        std::optional<array> mu, sigma;
        if (loc) mu = to_array(loc->obj, t);
        if (scale) sigma = to_array(scale->obj, t);
        return random::normal(shape, t, mu, sigma, key, s);
      },
      "shape"_a = Shape{}, "dtype"_a.none() = float32, "loc"_a = nb::none(), "scale"_a = nb::none(),
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Normally distributed samples, ``scale * N(0, 1) + loc``.\n\n"
      "Args:\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``float32``.\n"
      "    loc (scalar or array, optional): Mean. Default: ``0``.\n"
      "    scale (scalar or array, optional): Standard deviation. Default: ``1``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "randint",
      [](const ArrayLike& low, const ArrayLike& high, const Shape& shape,
         std::optional<Dtype> dtype, const Key& key, StreamOrDevice s) {
        return random::randint(to_array(low), to_array(high), shape, dtype.value_or(int32), key, s);
      },
      "low"_a, "high"_a, "shape"_a = Shape{}, "dtype"_a.none() = int32, "key"_a = nb::none(),
      "stream"_a = nb::none(),
      "Random integers uniform in ``[low, high)``.\n\n"
      "Args:\n"
      "    low (scalar or array): Lower bound (included).\n"
      "    high (scalar or array): Upper bound (excluded).\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``int32``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "bernoulli",
      [](const ArrayLike& p, const std::optional<Shape>& shape, const Key& key, StreamOrDevice s) {
        array prob = to_array(p);
        return shape ? random::bernoulli(prob, *shape, key, s) : random::bernoulli(prob, key, s);
      },
      "p"_a = 0.5, "shape"_a = nb::none(), "key"_a = nb::none(), "stream"_a = nb::none(),
      "Booleans that are true with probability ``p``.\n\n"
      "Args:\n"
      "    p (scalar or array, optional): The probability. Default: ``0.5``.\n"
      "    shape (list(int), optional): Output shape; by default ``p``'s.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "truncated_normal",
      [](const ArrayLike& lower, const ArrayLike& upper, const std::optional<Shape>& shape,
         std::optional<Dtype> dtype, const Key& key, StreamOrDevice s) {
        array lo = to_array(lower), hi = to_array(upper);
        Dtype t = dtype.value_or(float32);
        return shape ? random::truncated_normal(lo, hi, *shape, t, key, s)
                     : random::truncated_normal(lo, hi, t, key, s);
      },
      "lower"_a, "upper"_a, "shape"_a = nb::none(), "dtype"_a.none() = float32,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Standard normal samples restricted to ``[lower, upper]``.\n\n"
      "Args:\n"
      "    lower (scalar or array): Lower bound.\n"
      "    upper (scalar or array): Upper bound.\n"
      "    shape (list(int), optional): Output shape; by default the broadcast\n"
      "      of the bounds.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``float32``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "gumbel",
      [](const Shape& shape, std::optional<Dtype> dtype, const Key& key, StreamOrDevice s) {
        return random::gumbel(shape, dtype.value_or(float32), key, s);
      },
      "shape"_a = Shape{}, "dtype"_a.none() = float32, "key"_a = nb::none(),
      "stream"_a = nb::none(),
      "Samples of the standard Gumbel distribution.\n\n"
      "Args:\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``float32``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "categorical",
      [](const array& logits, int axis, const std::optional<Shape>& shape,
         std::optional<int> num_samples, const Key& key, StreamOrDevice s) {
        if (shape && num_samples) {
          throw std::invalid_argument("[categorical] Give shape or num_samples, not both.");
        }
        if (shape) return random::categorical(logits, axis, *shape, key, s);
        if (num_samples) return random::categorical(logits, axis, *num_samples, key, s);
        return random::categorical(logits, axis, key, s);
      },
      "logits"_a, "axis"_a = -1, "shape"_a = nb::none(), "num_samples"_a = nb::none(),
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Sample indices from unnormalised log-probabilities.\n\n"
      "Args:\n"
      "    logits (array): The log-probabilities (up to a constant).\n"
      "    axis (int, optional): The axis of the categories. Default: ``-1``.\n"
      "    shape (list(int), optional): Output shape (broadcast-compatible with\n"
      "      ``logits`` without ``axis``).\n"
      "    num_samples (int, optional): Samples per distribution (instead of\n"
      "      ``shape``).\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The uint32 indices.\n");
  m.def(
      "laplace",
      [](const Shape& shape, std::optional<Dtype> dtype, float loc, float scale, const Key& key,
         StreamOrDevice s) {
        return random::laplace(shape, dtype.value_or(float32), loc, scale, key, s);
      },
      "shape"_a = Shape{}, "dtype"_a.none() = float32, "loc"_a = 0.0, "scale"_a = 1.0,
      "key"_a = nb::none(), "stream"_a = nb::none(),
      "Laplace-distributed samples, ``scale * L(0, 1) + loc``.\n\n"
      "Args:\n"
      "    shape (list(int), optional): Output shape. Default: ``()``.\n"
      "    dtype (Dtype, optional): Output dtype. Default: ``float32``.\n"
      "    loc (float, optional): Location. Default: ``0.0``.\n"
      "    scale (float, optional): Scale. Default: ``1.0``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples.\n");
  m.def(
      "permutation",
      [](const std::variant<int, array>& x, int axis, const Key& key, StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&x)) return random::permutation(*n, key, s);
        return random::permutation(std::get<array>(x), axis, key, s);
      },
      "x"_a, "axis"_a = 0, "key"_a = nb::none(), "stream"_a = nb::none(),
      "A random permutation of ``arange(x)``, or ``x`` shuffled along an axis.\n\n"
      "Args:\n"
      "    x (int or array): A length, or the array to shuffle.\n"
      "    axis (int, optional): The axis to shuffle. Default: ``0``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The permutation.\n");
}

}  // namespace tessera::python
