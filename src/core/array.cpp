// array and its descriptor: construction, views of buffers, detaching the graph, and the
// iterative teardown that frees a million-node chain without recursion.
#include "tessera/array.h"

#include <algorithm>
#include <cstring>

#include "backend/device.h"
#include "core/object_pool.h"
#include "tessera/primitive.h"
#include "core/transforms_impl.h"
#include "tessera/eval.h"

namespace tessera {

namespace detail {

namespace {

// row_strides(shape) into `s`, reusing its storage (no allocation when it was as long already).
void set_row_strides(Strides& s, const Shape& shape) {
  s.assign(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
}

}  // namespace

Strides row_strides(const Shape& shape) {
  Strides s;
  set_row_strides(s, shape);
  return s;
}

size_t shape_size(const Shape& shape) {
  // No elements whatever the other dimensions (the product must not overflow on the way to 0).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (auto d : shape) {
    if (__builtin_mul_overflow(n, static_cast<int64_t>(d), &n)) {
      std::string s = "(";
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
      throw std::overflow_error("[array] shape " + s +
                                ") has more elements than 64 bits count (2^63 - 1)");
    }
  }
  return static_cast<size_t>(n);
}

void throw_item_not_scalar(size_t size) {
  throw std::invalid_argument("[item] only an array of one element can be converted to a scalar; "
                              "this one has " + std::to_string(size) + " elements");
}

ArrayDesc::ArrayDesc(Shape s, Strides st, Dtype t)
    : shape(std::move(s)), strides(std::move(st)), size(shape_size(shape)), dtype(t) {}

ArrayDesc::ArrayDesc(Shape s, Dtype t) : shape(std::move(s)), dtype(t) {
  for (auto d : shape) {
    if (d < 0) {
      throw std::invalid_argument("[array] negative dimension " + std::to_string(d) +
                                  " in shape");
    }
  }
  size = shape_size(shape);
  if (size > 0 && dtype.size() > static_cast<size_t>(INT64_MAX) / size) {
    throw std::overflow_error("[array] " + std::to_string(size) + " elements of " +
                              std::to_string(dtype.size()) + " bytes are more bytes than 64 bits "
                              "count");
  }
  strides = row_strides(shape);
}

std::shared_ptr<ArrayDesc> make_desc(Shape shape, Dtype dtype) {
  return make_pooled<ArrayDesc>(std::move(shape), dtype);
}

// Tear down the graph above this node iteratively: an input whose descriptor and node would die
// with us gives up its own inputs first, so no destructor recurses (a million-node chain is fine).
Node::~Node() {
  std::vector<array> pending = std::move(inputs);
  while (!pending.empty()) {
    array a = std::move(pending.back());
    pending.pop_back();
    auto& d = a.desc_;
    if (d.use_count() == 1 && d->node && d->node.use_count() == 1) {
      for (auto& in : d->node->inputs) pending.push_back(std::move(in));
      d->node->inputs.clear();
      d->node.reset();
    }
  }
}

}  // namespace detail

array::ArrayIterator::ArrayIterator(const array& arr, int idx) : arr_(arr), idx_(idx) {
  if (arr.ndim() == 0) throw std::invalid_argument("[array] a 0-d array cannot be iterated");
}

array::array(const complex64_t& val, Dtype dtype)
    : desc_(detail::make_desc(Shape{}, dtype)) {
  init(&val);
}

array::array(std::initializer_list<float> data)
    : desc_(detail::make_desc(Shape{static_cast<int32_t>(data.size())}, float32)) {
  init(data.begin());
}

array::array(std::initializer_list<int> data, Dtype dtype)
    : desc_(detail::make_desc(Shape{static_cast<int32_t>(data.size())}, dtype)) {
  init(data.begin());
}

array::array(void* data, Shape shape, Dtype dtype, const std::function<void(void*)>& deleter)
    : desc_(detail::make_desc(std::move(shape), dtype)) {
  auto d = deleter;
  set_data(allocator::Buffer(data, size() * itemsize()),
           [d](allocator::Buffer b) { d(b.raw_ptr()); });
  set_status(Status::available);
}

array::array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter deleter)
    : desc_(detail::make_desc(std::move(shape), dtype)) {
  set_data(data, std::move(deleter));
  set_status(Status::available);
}

array::array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive,
             std::vector<array> inputs)
    : desc_(detail::make_desc(std::move(shape), dtype)) {
  auto node = detail::make_pooled<detail::Node>();
  node->primitive = std::move(primitive);
  node->inputs = std::move(inputs);
  desc_->node = std::move(node);
  desc_->is_tracer = std::any_of(desc_->node->inputs.begin(), desc_->node->inputs.end(),
                                 [](const array& a) { return a.is_tracer(); }) ||
                     detail::in_tracing();
}

std::vector<array> array::make_arrays(std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
                                      const std::shared_ptr<Primitive>& primitive,
                                      const std::vector<array>& inputs) {
  auto node = detail::make_pooled<detail::Node>();
  node->primitive = primitive;
  node->inputs = inputs;
  node->output_dtypes = dtypes;
  bool tracer = detail::in_tracing() || std::any_of(inputs.begin(), inputs.end(),
                                                     [](const array& a) { return a.is_tracer(); });
  std::vector<array> outs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto d = detail::make_desc(shapes[i], dtypes[i]);
    d->node = node;
    d->position = static_cast<uint32_t>(i);
    d->is_tracer = tracer;
    node->outputs.push_back(d);
    outs.push_back(array(std::move(d)));
  }
  node->output_shapes = std::move(shapes);
  return outs;
}

size_t array::size() const { return desc_->size; }
const Shape& array::shape() const { return desc_->shape; }
int array::shape(int dim) const {
  int n = static_cast<int>(ndim());
  int d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    throw std::out_of_range("[array::shape] dimension " + std::to_string(dim) +
                            " is out of range for an array with " + std::to_string(n) + " dims");
  }
  return desc_->shape[d];
}
const Strides& array::strides() const { return desc_->strides; }
int64_t array::strides(int dim) const {
  int n = static_cast<int>(ndim());
  int d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) throw std::out_of_range("[array::strides] dimension out of range");
  return desc_->strides[d];
}
Dtype array::dtype() const { return desc_->dtype; }

void array::eval() {
  if (status() == Status::available) {
    if (desc_->error) std::rethrow_exception(desc_->error);
    return;
  }
  tessera::eval({*this});
}

bool array::has_primitive() const { return desc_->node != nullptr; }
Primitive& array::primitive() const {
  if (!desc_->node) {
    throw std::invalid_argument(
        "[array::primitive] this array has no primitive: it holds data (created from values, or "
        "already evaluated, which detaches the graph); check has_primitive() first");
  }
  return *desc_->node->primitive;
}
std::shared_ptr<Primitive> array::primitive_ptr() const {
  return desc_->node ? desc_->node->primitive : nullptr;
}
std::uintptr_t array::primitive_id() const {
  return reinterpret_cast<std::uintptr_t>(desc_->node ? desc_->node->primitive.get() : nullptr);
}

const std::vector<array>& array::inputs() const {
  static const std::vector<array> kNone;
  return desc_->node ? desc_->node->inputs : kNone;
}

std::vector<array> array::outputs() const {
  if (!desc_->node || desc_->node->outputs.empty()) return {*this};
  auto& node = *desc_->node;
  std::vector<array> outs;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    auto d = node.outputs[i].lock();
    if (!d) {  // a sibling nobody holds any more: recreate it against the same node
      d = detail::make_desc(node.output_shapes[i], node.output_dtypes[i]);
      d->node = desc_->node;
      d->position = static_cast<uint32_t>(i);
      d->is_tracer = desc_->is_tracer;
      node.outputs[i] = d;
    }
    outs.push_back(array(std::move(d)));
  }
  return outs;
}

std::vector<array> array::siblings() const {
  if (!desc_->node || desc_->node->outputs.size() <= 1) return {};
  auto outs = outputs();
  outs.erase(outs.begin() + desc_->position);
  return outs;
}

int array::sibling_position() const { return static_cast<int>(desc_->position); }

void array::detach() {
  if (!desc_->node) return;
  auto node = std::move(desc_->node);
  for (auto& w : node->outputs) {
    if (auto d = w.lock()) d->node.reset();
  }
}

const array::Flags& array::flags() const { return desc_->flags; }
size_t array::data_size() const { return desc_->data_size; }
std::shared_ptr<array::Data> array::data_shared_ptr() const { return desc_->data; }

const allocator::Buffer& array::buffer() const {
  static const allocator::Buffer kEmpty;
  return desc_->data ? desc_->data->buffer : kEmpty;
}
size_t array::buffer_size() const { return desc_->data ? desc_->data->buffer.size() : 0; }
void* array::raw_data() const { return desc_->data_ptr; }
int64_t array::offset() const { return desc_->offset; }

bool array::is_donatable() const {
  return desc_.use_count() == 1 && desc_->data && desc_->data.use_count() == 1 &&
         desc_->flags.row_contiguous;
}

array::Status array::status() const {
  return static_cast<Status>(desc_->status.load(std::memory_order_acquire));
}

array array::view_of(const array& src, Shape shape, Strides strides, Flags flags,
                     size_t data_size, int64_t offset) {
  const auto& s = *src.desc_;
  auto d = detail::make_pooled<detail::ArrayDesc>(std::move(shape), std::move(strides), s.dtype);
  d->data = s.data;
  d->data_size = data_size;
  d->offset = offset;
  d->flags = flags;
  auto* base = s.data ? static_cast<char*>(s.data->buffer.raw_ptr()) : nullptr;
  d->data_ptr = base ? base + offset * static_cast<int64_t>(s.dtype.size()) : nullptr;
  d->status.store(static_cast<int>(Status::available), std::memory_order_relaxed);
  return array(std::move(d));
}

void array::set_status(Status s) const {
  desc_->status.store(static_cast<int>(s), std::memory_order_release);
  if (s == Status::available) desc_->status.notify_all();
}

void array::wait() {
  Status s = status();
  if (s == Status::unscheduled) {
    eval();
    return;
  }
  while (s != Status::available) {
    desc_->status.wait(static_cast<int>(s), std::memory_order_acquire);
    s = status();
  }
  if (desc_->error) std::rethrow_exception(desc_->error);
  backend::wait_for(*this, std::nullopt);  // a device's queued work is done before the host reads
}

void array::wait_until_available() const {
  Status s = status();
  while (s == Status::scheduled) {
    desc_->status.wait(static_cast<int>(s), std::memory_order_acquire);
    s = status();
  }
}

void array::set_error(std::exception_ptr e) const { desc_->error = std::move(e); }
std::exception_ptr array::error() const { return desc_->error; }
const std::shared_ptr<detail::Node>& array::node() const { return desc_->node; }
// As MLX: a tracer only while some transform is tracing, so graphs built by a transform are
// detached by eval afterwards.
bool array::is_tracer() const { return desc_->is_tracer && detail::in_tracing(); }
void array::set_tracer(bool t) { desc_->is_tracer = t; }

void array::set_data(allocator::Buffer buffer, Deleter d) {
  desc_->data = detail::make_pooled<detail::Data>(buffer, std::move(d));
  desc_->data_ptr = buffer.raw_ptr();
  desc_->offset = 0;
  desc_->data_size = size();
  detail::set_row_strides(desc_->strides, shape());
  bool col = ndim() <= 1 || size() <= 1;
  if (!col) {  // a row-contiguous array is also column-contiguous when at most one dim > 1
    int big = 0;
    for (auto s : shape()) big += s > 1;
    col = big <= 1;
  }
  desc_->flags = Flags{true, true, col};
}

void array::set_data(allocator::Buffer buffer, size_t data_size, Strides strides, Flags flags,
                     Deleter d) {
  desc_->data = detail::make_pooled<detail::Data>(buffer, std::move(d));
  desc_->data_ptr = buffer.raw_ptr();
  desc_->offset = 0;
  desc_->data_size = data_size;
  desc_->strides = std::move(strides);
  desc_->flags = flags;
}

void array::copy_shared_buffer(const array& other, const Strides& strides, Flags flags,
                               size_t data_size, int64_t offset) {
  desc_->data = other.desc_->data;
  desc_->strides = strides;
  desc_->flags = flags;
  desc_->data_size = data_size;
  desc_->offset = offset;
  auto* base = desc_->data ? static_cast<char*>(desc_->data->buffer.raw_ptr()) : nullptr;
  desc_->data_ptr = base ? base + offset * static_cast<int64_t>(itemsize()) : nullptr;
}

void array::copy_shared_buffer(const array& other) {
  copy_shared_buffer(other, other.strides(), other.flags(), other.data_size(), other.offset());
}

void array::move_shared_buffer(array other, const Strides& strides, Flags flags, size_t data_size,
                               int64_t offset) {
  desc_->data = std::move(other.desc_->data);
  desc_->strides = strides;
  desc_->flags = flags;
  desc_->data_size = data_size;
  desc_->offset = offset;
  auto* base = desc_->data ? static_cast<char*>(desc_->data->buffer.raw_ptr()) : nullptr;
  desc_->data_ptr = base ? base + offset * static_cast<int64_t>(itemsize()) : nullptr;
}

void array::move_shared_buffer(array other) {
  auto strides = other.strides();
  auto flags = other.flags();
  auto ds = other.data_size();
  auto off = other.offset();
  move_shared_buffer(std::move(other), strides, flags, ds, off);
}

}  // namespace tessera
