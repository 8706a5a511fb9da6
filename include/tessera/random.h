// Random number generation as in MLX's mlx/random.h: counter-based (Threefry-2x32) keys that
// are split explicitly, or an implicit per-thread key sequence set by seed(). For the same key
// every function returns the same values as MLX (see src/ops/random.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/array.h"
#include "tessera/stream.h"

namespace tessera::random {

// The implicit key state used when a function gets no key: each call to next() splits the
// current key, keeps one half and hands out the other. One sequence per thread.
class KeySequence {
 public:
  explicit KeySequence(uint64_t seed);
  void seed(uint64_t seed);
  array next();
  // This thread's sequence, first seeded from the wall clock (milliseconds).
  static KeySequence& default_();

 private:
  array key_;
};

// A key: the uint32 pair (seed >> 32, seed & 0xffffffff), shape (2).
array key(uint64_t seed);

// Reseed this thread's implicit key sequence.
void seed(uint64_t seed);

// Random bits of `width` bytes per element (1, 2 or 4 -> uint8, uint16, uint32).
array bits(const Shape& shape, int width, const std::optional<array>& key = std::nullopt,
           StreamOrDevice s = {});
inline array bits(const Shape& shape, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {}) {
  return bits(shape, 4, key, s);
}

// Two new keys from `key`.
std::pair<array, array> split(const array& key, StreamOrDevice s = {});
// `num` new keys from `key`, shape (num, 2).
array split(const array& key, int num, StreamOrDevice s = {});

// Uniform samples in [low, high) (float32, float16 or bfloat16); low and high broadcast to
// `shape`. With low > high the samples lie in (high, low], as in MLX.
array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
template <typename T, typename U>
array uniform(T low, U high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return uniform(array(low), array(high), shape, dtype, key, s);
}
// Uniform samples in [0, 1).
array uniform(const Shape& shape, Dtype dtype, const std::optional<array>& key = std::nullopt,
              StreamOrDevice s = {});
inline array uniform(const Shape& shape, const std::optional<array>& key = std::nullopt,
                     StreamOrDevice s = {}) {
  return uniform(shape, float32, key, s);
}

// Normal samples (any floating dtype or complex64), scale * N(0, 1) + loc.
array normal(const Shape& shape, Dtype dtype, const std::optional<array>& loc,
             const std::optional<array>& scale, const std::optional<array>& key,
             StreamOrDevice s = {});
inline array normal(const Shape& shape, Dtype dtype, const float loc, const float scale,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  auto loc_ = loc == 0 ? std::nullopt : std::make_optional(array(loc, dtype));
  auto scale_ = scale == 1 ? std::nullopt : std::make_optional(array(scale, dtype));
  return normal(shape, dtype, loc_, scale_, key, s);
}
inline array normal(const Shape& shape, const float loc, const float scale,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return normal(shape, float32, loc, scale, key, s);
}
inline array normal(const Shape& shape, const Dtype dtype,
                    const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return normal(shape, dtype, std::nullopt, std::nullopt, key, s);
}
inline array normal(const Shape& shape, const std::optional<array>& key = std::nullopt,
                    StreamOrDevice s = {}) {
  return normal(shape, float32, std::nullopt, std::nullopt, key, s);
}

// Integers uniform in [low, high) (any integer dtype or bool); low >= high gives low.
array randint(const array& low, const array& high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
template <typename T, typename U>
array randint(T low, U high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return randint(array(low), array(high), shape, dtype, key, s);
}

// True with probability p (a floating array broadcast to `shape`).
array bernoulli(const array& p, const Shape& shape, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
array bernoulli(const array& p, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {});
template <typename T>
array bernoulli(T p, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return bernoulli(array(p), key, s);
}
template <typename T>
array bernoulli(T p, const Shape& shape, const std::optional<array>& key = std::nullopt,
                StreamOrDevice s = {}) {
  return bernoulli(array(p), shape, key, s);
}
array bernoulli(const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Standard normal samples conditioned on lower <= x <= upper.
array truncated_normal(const array& lower, const array& upper, const Shape& shape,
                       Dtype dtype = float32, const std::optional<array>& key = std::nullopt,
                       StreamOrDevice s = {});
array truncated_normal(const array& lower, const array& upper, Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Standard Gumbel samples, -log(-log(U)).
array gumbel(const Shape& shape, Dtype dtype = float32,
             const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Indices (uint32) drawn from the unnormalised log-probabilities `logits` along `axis`.
array categorical(const array& logits, int axis, const Shape& shape,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array categorical(const array& logits, int axis, int num_samples,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array categorical(const array& logits, int axis = -1,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Laplace samples, scale * L(0, 1) + loc.
array laplace(const Shape& shape, Dtype dtype, const float loc, const float scale,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
inline array laplace(const Shape& shape, const float loc, const float scale,
                     const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return laplace(shape, float32, loc, scale, key, s);
}
inline array laplace(const Shape& shape, const Dtype dtype,
                     const std::optional<array>& key = std::nullopt, StreamOrDevice s = {}) {
  return laplace(shape, dtype, 0.0, 1.0, key, s);
}
inline array laplace(const Shape& shape, const std::optional<array>& key = std::nullopt,
                     StreamOrDevice s = {}) {
  return laplace(shape, float32, 0.0, 1.0, key, s);
}

// `x` shuffled along `axis`.
array permutation(const array& x, int axis = 0, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
// A shuffle of arange(x) (uint32).
array permutation(int x, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Samples of N(mean, cov) (mean (..., n), cov (..., n, n) symmetric positive semi-definite),
// shaped broadcast(cov's batch dims, mean's, shape) + (n,): mean + z @ sqrt(cov) with the square
// root from the SVD (a singular covariance works). float32 (as MLX) or float64.
array multivariate_normal(const array& mean, const array& cov, const Shape& shape = {},
                          Dtype dtype = float32, const std::optional<array>& key = std::nullopt,
                          StreamOrDevice s = {});

}  // namespace tessera::random
