// tessera.core.random: include/tessera/random.h with MLX's mlx.core.random signatures.
#include "convert.h"

#include <chrono>
#include <cstdint>
#include <stdexcept>

namespace tessera::python {

namespace {

using Key = std::optional<array>;

// Python's implicit key, as MLX keeps it: the first item of the list `mx.random.state`, one per
// process, so that mx.compile can take it as state (inputs / outputs) and a compiled function
// that draws random numbers advances it. Never destroyed (it may outlive the interpreter).
uint64_t process_seed() {
  static const uint64_t seed = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  return seed;
}

nb::list& random_state() {
  static nb::list* state = [] {
    auto* l = new nb::list();
    l->append(random::key(process_seed()));
    return l;
  }();
  return *state;
}

// `key`, or the next key of the implicit sequence (the state's key split: one half kept).
Key resolve(const Key& key) {
  if (key) return key;
  nb::list& state = random_state();
  if (nb::len(state) != 1 || !nb::isinstance<array>(state[0])) {
    throw std::invalid_argument(
        "[random] mx.random.state must be a list holding one key array; reseed with "
        "mx.random.seed(n)");
  }
  auto [keep, out] = random::split(nb::cast<array>(state[0]));
  state[0] = nb::cast(keep);
  return out;
}

}  // namespace

void reset_random_state() { random_state()[0] = nb::cast(random::key(process_seed())); }

void init_random(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("random", "Random number generation.");
  m.attr("state") = random_state();

  m.def(
      "seed",
      [](uint64_t seed) {
        random_state()[0] = nb::cast(random::key(seed));
        random::seed(seed);  // C++ callers' sequence on this thread too
      },
      "seed"_a,
      "Reseed the implicit key (``mx.random.state``).\n\n"
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
        return random::uniform(to_array(low), to_array(high), shape, dtype.value_or(float32),
                               resolve(key), s);
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
        return random::normal(shape, t, mu, sigma, resolve(key), s);
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
        return random::randint(to_array(low), to_array(high), shape, dtype.value_or(int32),
                               resolve(key), s);
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
        return shape ? random::bernoulli(prob, *shape, resolve(key), s)
                     : random::bernoulli(prob, resolve(key), s);
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
        return shape ? random::truncated_normal(lo, hi, *shape, t, resolve(key), s)
                     : random::truncated_normal(lo, hi, t, resolve(key), s);
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
        return random::gumbel(shape, dtype.value_or(float32), resolve(key), s);
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
        if (shape) return random::categorical(logits, axis, *shape, resolve(key), s);
        if (num_samples) return random::categorical(logits, axis, *num_samples, resolve(key), s);
        return random::categorical(logits, axis, resolve(key), s);
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
      "multivariate_normal",
      [](const array& mean, const array& cov, const Shape& shape, std::optional<Dtype> dtype,
         const Key& key, StreamOrDevice s) {
        return random::multivariate_normal(mean, cov, shape, dtype.value_or(float32),
                                           resolve(key), s);
      },
      "mean"_a, "cov"_a, "shape"_a = Shape{}, "dtype"_a.none() = float32, "key"_a = nb::none(),
      "stream"_a = nb::none(),
      "Samples of a multivariate normal distribution.\n\n"
      "Args:\n"
      "    mean (array): Means (..., n).\n"
      "    cov (array): Covariances (..., n, n), symmetric positive semi-definite.\n"
      "    shape (list(int), optional): Batch shape, broadcast with the inputs'. Default: ``()``.\n"
      "    dtype (Dtype, optional): ``float32`` or ``float64``. Default: ``float32``.\n"
      "    key (array, optional): PRNG key; ``None`` uses the implicit one.\n\n"
      "Returns:\n"
      "    array: The samples, (..., n).\n");
  m.def(
      "laplace",
      [](const Shape& shape, std::optional<Dtype> dtype, float loc, float scale, const Key& key,
         StreamOrDevice s) {
        return random::laplace(shape, dtype.value_or(float32), loc, scale, resolve(key), s);
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
        if (auto* n = std::get_if<int>(&x)) return random::permutation(*n, resolve(key), s);
        return random::permutation(std::get<array>(x), axis, resolve(key), s);
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
