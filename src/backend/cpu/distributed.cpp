// CPU kernels of the collectives: lay the data out row-contiguously (in place when the input
// can be donated), then hand the arrays and the stream to the group's backend. They run on the
// stream worker.
#include <algorithm>
#include <string>

#include "backend/cpu/copy.h"
#include "core/trace.h"
#include "distributed/primitives.h"

namespace tessera::distributed {

namespace {

// `out` gets a row-contiguous buffer holding `in`'s values (the input's own buffer when it is
// row-contiguous and donatable).
void prepare_in_place(const array& in, array& out) {
  if (in.flags().row_contiguous && in.is_donatable()) {
    out.copy_shared_buffer(in);
  } else {
    cpu::copy_contiguous(in, out);
  }
}

detail::GroupImpl& impl(const Group& g) { return *g.raw_group(); }

// A collective's trace slice (when tracing): op, bytes, peer, and the part of its duration spent
// waiting for peers (summed over the threads that wait, at most the duration) versus moving data.
class CollectiveTrace {
 public:
  CollectiveTrace(const char* op, const Group& g, size_t bytes, int peer = -1)
      : op_(op), bytes_(bytes), peer_(peer) {
    if (trace::on()) {
      rank_ = g.rank();
      size_ = g.size();
      t0_ = trace::now_ns();
      w0_ = trace::wait_ns();
    }
  }
  CollectiveTrace(const CollectiveTrace&) = delete;
  CollectiveTrace& operator=(const CollectiveTrace&) = delete;
  ~CollectiveTrace() {
    if (!t0_) return;
    const int64_t t1 = trace::now_ns();
    const int64_t wait = std::min(trace::wait_ns() - w0_, t1 - t0_);
    std::string args = "\"bytes\":" + std::to_string(bytes_) + ",\"rank\":" +
                       std::to_string(rank_) + ",\"group_size\":" + std::to_string(size_);
    if (peer_ >= 0) args += ",\"peer\":" + std::to_string(peer_);
    args += ",\"wait_us\":" + std::to_string(wait / 1000) +
            ",\"move_us\":" + std::to_string((t1 - t0_ - wait) / 1000);
    trace::slice("collective", op_, t0_, t1, args);
  }

 private:
  const char* op_;
  size_t bytes_;
  int peer_, rank_ = 0, size_ = 0;
  int64_t t0_ = 0, w0_ = 0;
};

}  // namespace

void AllReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const char* op = mean_                           ? "all_mean"
                   : op_ == detail::ReduceOp::sum ? "all_sum"
                   : op_ == detail::ReduceOp::max ? "all_max"
                                                  : "all_min";
  auto run = [&](const array& src) {
    CollectiveTrace t(op, group(), in.nbytes());
    if (mean_) {
      impl(group()).all_mean(src, out, stream());
    } else {
      impl(group()).all_reduce(src, out, op_, stream());
    }
  };
  if (in.flags().row_contiguous && !in.is_donatable()) {
    out.set_data(allocator::malloc(out.nbytes()));
    run(in);
    return;
  }
  prepare_in_place(in, out);
  run(out);
}

void AllGather::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  CollectiveTrace t("all_gather", group(), out.nbytes());
  impl(group()).all_gather(in, out, stream());
}

void ReduceScatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  CollectiveTrace t("sum_scatter", group(), in.nbytes());
  impl(group()).reduce_scatter(in, out, detail::ReduceOp::sum, stream());
}

void Send::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  CollectiveTrace t("send", group(), in.nbytes(), dst_);
  impl(group()).send(in, dst_, stream());
  out.copy_shared_buffer(in);
}

void Recv::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  CollectiveTrace t("recv", group(), out.nbytes(), src_);
  impl(group()).recv(out, src_, stream());
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, array& out) {
  prepare_in_place(inputs[0], out);
  CollectiveTrace t("broadcast", group(), out.nbytes(), root_);
  impl(group()).broadcast(out, root_, stream());
}

void AllToAll::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  CollectiveTrace t("all_to_all", group(), in.nbytes());
  impl(group()).all_to_all(in, out, stream());
}

void Barrier::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(0));
  CollectiveTrace t("barrier", group(), 0);
  impl(group()).barrier(stream());
}

}  // namespace tessera::distributed
