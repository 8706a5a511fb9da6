// CPU kernels of the collectives: lay the data out row-contiguously (in place when the input
// can be donated), then let the group's backend move the bytes. They run on the stream worker.
#include "backend/cpu/copy.h"
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

}  // namespace

void AllReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous && !in.is_donatable()) {
    out.set_data(allocator::malloc(out.nbytes()));
    impl(group()).all_reduce(in.raw_data(), out.raw_data(), in.size(), in.dtype(), op_);
    return;
  }
  prepare_in_place(in, out);
  impl(group()).all_reduce(out.raw_data(), out.raw_data(), out.size(), out.dtype(), op_);
}

void AllGather::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  impl(group()).all_gather(in.raw_data(), out.raw_data(), in.nbytes());
}

void ReduceScatter::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  impl(group()).reduce_scatter(in.raw_data(), out.raw_data(), out.size(), out.dtype(),
                               detail::ReduceOp::sum);
}

void Send::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  impl(group()).send(in.raw_data(), in.nbytes(), in.dtype(), dst_);
  out.copy_shared_buffer(in);
}

void Recv::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  impl(group()).recv(out.raw_data(), out.nbytes(), out.dtype(), src_);
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, array& out) {
  prepare_in_place(inputs[0], out);
  impl(group()).broadcast(out.raw_data(), out.nbytes(), root_);
}

void AllToAll::eval_cpu(const std::vector<array>& inputs, array& out) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  out.set_data(allocator::malloc(out.nbytes()));
  impl(group()).all_to_all(in.raw_data(), out.raw_data(), in.nbytes() / group().size());
}

void Barrier::eval_cpu(const std::vector<array>&, array& out) {
  out.set_data(allocator::malloc(0));
  impl(group()).barrier();
}

}  // namespace tessera::distributed
