// The main demo (single process): a 2-layer MLP trained with value_and_grad and SGD on a
// synthetic classification set drawn with a fixed key. Prints the loss per epoch and the final
// accuracy, and fails if the accuracy is below 95%.
#include <chrono>
#include <cstdio>

#include "mlp_common.h"

using namespace example;

int main() {
  constexpr int kTrain = 4096, kTest = 1024, kBatch = 128, kEpochs = 10;
  constexpr float kLearningRate = 0.1f;
  auto t0 = std::chrono::steady_clock::now();
  auto k = mx::random::split(mx::random::key(42), 6);
  auto key_of = [&](int i) { return mx::take(k, i, 0); };  // the i-th key of the split
  auto centers = mx::random::normal({kClasses, kFeatures}, mx::float32, key_of(0)) * array(1.0f);
  Dataset train = make_blobs(centers, kTrain, key_of(1));
  Dataset test = make_blobs(centers, kTest, key_of(2));
  auto params = init_params(key_of(3), key_of(4));

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
