// The main demo: a 2-layer MLP trained with value_and_grad and SGD on a synthetic
// classification set drawn with a fixed key. Prints the loss per epoch and the final accuracy.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tessera/tessera.h"

namespace mx = tessera;
using mx::array;

namespace {

constexpr int kFeatures = 16;
constexpr int kHidden = 64;
constexpr int kClasses = 4;
constexpr int kTrain = 4096;
constexpr int kTest = 1024;
constexpr int kBatch = 128;
constexpr int kEpochs = 10;
constexpr float kLearningRate = 0.1f;

struct Dataset {
  array x, y;
};

// Gaussian blobs: class c is centred at a fixed random point; noise has unit variance.
Dataset make_blobs(const array& centers, int n, const array& key) {
  auto [k_labels, k_noise] = mx::random::split(key);
  auto y = mx::random::randint(0, kClasses, {n}, mx::int32, k_labels);
  auto noise = mx::random::normal({n, kFeatures}, mx::float32, k_noise);
  auto x = mx::take(centers, y, 0) + noise;
  mx::eval(x, y);
  return {x, y};
}

array forward(const std::vector<array>& p, const array& x) {
  auto h = mx::maximum(mx::matmul(x, p[0]) + p[1], array(0.0f));
  return mx::matmul(h, p[2]) + p[3];
}

array cross_entropy(const array& logits, const array& y) {
  auto picked = mx::take_along_axis(logits, mx::expand_dims(y, -1), -1);
  return mx::mean(mx::logsumexp(logits, -1, true) - picked);
}

float accuracy(const std::vector<array>& p, const Dataset& d) {
  auto pred = mx::argmax(forward(p, d.x), -1);
  return mx::mean(mx::astype(mx::equal(pred, mx::astype(d.y, mx::uint32)), mx::float32))
      .item<float>();
}

}  // namespace

int main() {
  auto t0 = std::chrono::steady_clock::now();
  auto root = mx::random::key(42);
  auto k = mx::random::split(root, 6);
  // take(k, i, 0) is the i-th key of the split.
  auto key_of = [&](int i) { return mx::take(k, i, 0); };
  auto centers = mx::random::normal({kClasses, kFeatures}, mx::float32, key_of(0)) * array(3.0f);
  Dataset train = make_blobs(centers, kTrain, key_of(1));
  Dataset test = make_blobs(centers, kTest, key_of(2));

  // He-style initialisation.
  std::vector<array> params = {
      mx::random::normal({kFeatures, kHidden}, mx::float32, key_of(3)) *
          array(std::sqrt(2.0f / kFeatures)),
      mx::zeros({kHidden}),
      mx::random::normal({kHidden, kClasses}, mx::float32, key_of(4)) *
          array(std::sqrt(2.0f / kHidden)),
      mx::zeros({kClasses}),
  };
  mx::eval(params);

  std::printf("MLP %d-%d-%d, %d training / %d test samples, batch %d, SGD lr %.2f\n", kFeatures,
              kHidden, kClasses, kTrain, kTest, kBatch, kLearningRate);
  auto epoch_keys = mx::random::split(key_of(5), kEpochs);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    auto perm = mx::random::permutation(kTrain, mx::take(epoch_keys, epoch, 0));
    double loss_sum = 0;
    int steps = 0;
    for (int start = 0; start < kTrain; start += kBatch) {
      auto idx = mx::slice(perm, {start}, {start + kBatch});
      auto xb = mx::take(train.x, idx, 0);
      auto yb = mx::take(train.y, idx, 0);
      auto loss_fn = [&](const std::vector<array>& p) { return cross_entropy(forward(p, xb), yb); };
      auto [loss, grads] = mx::value_and_grad(loss_fn, std::vector<int>{0, 1, 2, 3})(params);
      for (size_t i = 0; i < params.size(); ++i) {
        params[i] = params[i] - array(kLearningRate) * grads[i];
      }
      mx::eval(params);
      loss_sum += loss.item<float>();
      ++steps;
    }
    std::printf("epoch %2d  loss %.4f\n", epoch + 1, loss_sum / steps);
  }
  float acc = accuracy(params, test);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("test accuracy %.2f%% (%.1f s)\n", 100.0 * acc, secs);
  if (acc < 0.95f) {
    std::fprintf(stderr, "accuracy %.2f%% is below the expected 95%%\n", 100.0 * acc);
    return 1;
  }
  return 0;
}
