// The data-parallel demo: `tessera launch -n 4 build/data_parallel`. Each rank trains the MLP of
// mlp_common.h on its shard; gradients are averaged with all_sum in buckets of at least 32 MiB
// (as MLX's average_gradients); rank 0 prints the loss per epoch; every rank checks that its
// final weights equal everyone's; the run ends with the measured communication throughput.
// `--steps N` trains for N steps instead of 6 epochs and, for the soak test (tests/cpp/
// test_soak.cpp), checks that memory stays flat after warm-up: get_active_memory() within
// 1 MiB and the resident set within 16 MiB of their values at step N / 10.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "mlp_common.h"

using namespace example;
namespace dist = tessera::distributed;

namespace {

constexpr size_t kBucketBytes = size_t{32} << 20;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct CommStats {
  double seconds = 0;
  size_t bytes = 0;
  int calls = 0;
};

// Average gradients over the group: flatten into buckets of at least kBucketBytes (one bucket
// when they are smaller), all_sum each bucket, divide by the size, and split back.
std::vector<array> average_gradients(const std::vector<array>& grads, const dist::Group& g,
                                     CommStats& stats) {
  if (g.size() == 1) return grads;
  std::vector<array> out(grads.size(), array(0.0f));
  size_t i = 0;
  while (i < grads.size()) {
    size_t j = i, bytes = 0;
    std::vector<array> flat;
    while (j < grads.size() && (bytes < kBucketBytes || j == i)) {
      flat.push_back(mx::reshape(grads[j], {-1}));
      bytes += grads[j].nbytes();
      ++j;
    }
    auto bucket = mx::concatenate(flat, 0);
    mx::eval(bucket);
    double t = now();
    auto summed = dist::all_sum(bucket, g);
    mx::eval(summed);
    stats.seconds += now() - t;
    stats.bytes += bucket.nbytes();
    stats.calls += 1;
    auto avg = summed / array(static_cast<float>(g.size()));
    int offset = 0;
    for (size_t k = i; k < j; ++k) {
      int n = static_cast<int>(grads[k].size());
      out[k] = mx::reshape(mx::slice(avg, {offset}, {offset + n}), grads[k].shape());
      offset += n;
    }
    i = j;
  }
  return out;
}

// Resident set size of this process in bytes (/proc/self/statm).
size_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * 4096;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int kTrain = 8192, kTest = 1024, kBatch = 128;
  long total_steps = 0;  // 0: kEpochs epochs
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      total_steps = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: data_parallel [--steps N]\n");
      return 2;
    }
  }
  constexpr float kLearningRate = 0.1f;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach the launcher as they are printed
  auto group = dist::init();
  const int rank = group.rank(), size = group.size();
  auto k = mx::random::split(mx::random::key(42), 6);
  auto key_of = [&](int i) { return mx::take(k, i, 0); };
  // Every rank draws the same data and initial weights from the same key, then keeps its shard.
  auto centers = mx::random::normal({kClasses, kFeatures}, mx::float32, key_of(0)) * array(1.0f);
  Dataset all = make_blobs(centers, kTrain, key_of(1));
  Dataset test = make_blobs(centers, kTest, key_of(2));
  const int shard = kTrain / size;
  const int steps_per_epoch = shard / kBatch;
  const int kEpochs = total_steps > 0
                          ? static_cast<int>((total_steps + steps_per_epoch - 1) / steps_per_epoch)
                          : 6;
  if (total_steps == 0) total_steps = static_cast<long>(kEpochs) * steps_per_epoch;
  const long warm_step = std::max(1L, total_steps / 10);
  size_t active_warm = 0, resident_warm = 0;
  long step = 0;
  Dataset train{mx::slice(all.x, {rank * shard, 0}, {(rank + 1) * shard, kFeatures}),
                mx::slice(all.y, {rank * shard}, {(rank + 1) * shard})};
  auto params = init_params(key_of(3), key_of(4));
  if (rank == 0) {
    std::printf("data parallel over %d ranks: %d samples each, batch %d per rank, %d epochs\n",
                size, shard, kBatch, kEpochs);
  }
  CommStats stats;
  auto epoch_keys = mx::random::split(key_of(5), kEpochs);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    auto perm = mx::random::permutation(shard, mx::take(epoch_keys, epoch, 0));
    double loss_sum = 0;
    int steps = 0;
    for (int start = 0; start + kBatch <= shard && step < total_steps; start += kBatch) {
      auto idx = mx::slice(perm, {start}, {start + kBatch});
      auto xb = mx::take(train.x, idx, 0);
      auto yb = mx::take(train.y, idx, 0);
      auto loss_fn = [&](const std::vector<array>& p) { return cross_entropy(forward(p, xb), yb); };
      auto [loss, grads] = mx::value_and_grad(loss_fn, std::vector<int>{0, 1, 2, 3})(params);
      grads = average_gradients(grads, group, stats);
      for (size_t i = 0; i < params.size(); ++i) params[i] = params[i] - array(kLearningRate) * grads[i];
      // The mean loss over ranks; every rank evaluates the collective, rank 0 prints it.
      auto mean_loss = dist::all_sum(loss, group) / array(static_cast<float>(size));
      std::vector<array> outputs = params;
      outputs.push_back(mean_loss);
      mx::eval(outputs);
      loss_sum += mean_loss.item<float>();
      ++steps;
      if (++step == warm_step) {
        active_warm = mx::get_active_memory();
        resident_warm = resident_bytes();
      }
    }
    if (rank == 0 && (kEpochs <= 12 || epoch + 1 == kEpochs)) {
      std::printf("epoch %d  loss %.4f\n", epoch + 1, loss_sum / steps);
    }
  }
  // Memory after warm-up must stay flat: the graph of every step is freed, buffers are reused.
  const size_t active_end = mx::get_active_memory(), resident_end = resident_bytes();
  const double active_growth = (static_cast<double>(active_end) - static_cast<double>(active_warm)) / 1048576.0;
  const double resident_growth =
      (static_cast<double>(resident_end) - static_cast<double>(resident_warm)) / 1048576.0;
  const bool flat = active_growth <= 1.0 && resident_growth <= 16.0;
  std::printf("rank %d: %ld steps; memory from step %ld to the end: active %+.3f MiB, resident "
              "%+.2f MiB (%s)\n", rank, step, warm_step, active_growth, resident_growth,
              flat ? "flat" : "GROWS");
  // Every rank must hold the same weights: compare with the maximum and minimum over ranks.
  bool same = true;
  for (auto& p : params) {
    auto hi = dist::all_max(p, group), lo = dist::all_min(p, group);
    same = same && mx::array_equal(hi, lo).item<bool>() && mx::array_equal(hi, p).item<bool>();
  }
  float acc = accuracy(params, test);
  std::printf("rank %d: weights %s every rank's; test accuracy %.2f%%\n", rank,
              same ? "equal" : "DIFFER from", 100.0 * acc);
  if (rank == 0 && stats.calls > 0) {
    std::printf("communication: %d all_sum calls, %.2f MiB in %.3f s: %.3f GB/s algorithm bandwidth\n",
                stats.calls, stats.bytes / 1048576.0, stats.seconds, stats.bytes / stats.seconds / 1e9);
  }
  return same && acc >= 0.95f && flat ? 0 : 1;
}
