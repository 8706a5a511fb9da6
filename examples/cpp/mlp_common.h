// The model and data shared by the examples: Gaussian blobs drawn from a fixed key and a
// 2-layer MLP (ReLU) with a cross-entropy loss.
#pragma once

#include <cmath>
#include <vector>

#include "tessera/tessera.h"

namespace example {

namespace mx = tessera;
using mx::array;

constexpr int kFeatures = 16;
constexpr int kHidden = 64;
constexpr int kClasses = 4;

struct Dataset {
  array x, y;
};

// Class c is centred at centers[c]; the noise has unit variance.
inline Dataset make_blobs(const array& centers, int n, const array& key) {
  auto [k_labels, k_noise] = mx::random::split(key);
  auto y = mx::random::randint(0, kClasses, {n}, mx::int32, k_labels);
  auto noise = mx::random::normal({n, kFeatures}, mx::float32, k_noise);
  auto x = mx::take(centers, y, 0) + noise;
  mx::eval(x, y);
  return {x, y};
}

inline array forward(const std::vector<array>& p, const array& x) {
  auto h = mx::maximum(mx::matmul(x, p[0]) + p[1], array(0.0f));
  return mx::matmul(h, p[2]) + p[3];
}

inline array cross_entropy(const array& logits, const array& y) {
  auto picked = mx::take_along_axis(logits, mx::expand_dims(y, -1), -1);
  return mx::mean(mx::logsumexp(logits, -1, true) - picked);
}

inline float accuracy(const std::vector<array>& p, const Dataset& d) {
  auto pred = mx::argmax(forward(p, d.x), -1);
  return mx::mean(mx::astype(mx::equal(pred, mx::astype(d.y, mx::uint32)), mx::float32))
      .item<float>();
}

// He-style initialisation from two keys.
inline std::vector<array> init_params(const array& k1, const array& k2) {
  std::vector<array> p = {
      mx::random::normal({kFeatures, kHidden}, mx::float32, k1) *
          array(std::sqrt(2.0f / kFeatures)),
      mx::zeros({kHidden}),
      mx::random::normal({kHidden, kClasses}, mx::float32, k2) * array(std::sqrt(2.0f / kHidden)),
      mx::zeros({kClasses}),
  };
  mx::eval(p);
  return p;
}

}  // namespace example
