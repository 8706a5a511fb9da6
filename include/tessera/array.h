// The array: a cheap shared handle to shape, strides, dtype, a data buffer and, until it is
// evaluated, the node (primitive + inputs) that produces it.
#pragma once

#include <algorithm>
#include <atomic>
#include <complex>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/allocator.h"
#include "tessera/dtype.h"

namespace tessera {

using Shape = std::vector<int32_t>;
using Strides = std::vector<int64_t>;
using Deleter = std::function<void(allocator::Buffer)>;

class Primitive;
class array;
namespace detail {
struct Node;
struct ArrayDesc;
struct Data;
}  // namespace detail

class array {
 public:
  // A 0-d array holding one value.
  template <HasDtype T>
  explicit array(T val, Dtype dtype = TypeToDtype<T>());
  explicit array(const complex64_t& val, Dtype dtype = complex64);

  // From `size(shape)` values read through an iterator or a raw pointer.
  template <typename It>
  explicit array(It data, Shape shape,
                 Dtype dtype = TypeToDtype<typename std::iterator_traits<It>::value_type>());
  template <typename T>
  explicit array(std::initializer_list<T> data, Dtype dtype = TypeToDtype<T>());
  explicit array(std::initializer_list<float> data);
  explicit array(std::initializer_list<int> data, Dtype dtype);
  template <typename T>
  explicit array(std::initializer_list<T> data, Shape shape, Dtype dtype = TypeToDtype<T>());
  template <typename T>
  explicit array(const std::vector<T>& data, Shape shape, Dtype dtype = TypeToDtype<T>())
      : array(data.begin(), std::move(shape), dtype) {}

  // Wrap memory the caller owns; `deleter(data)` runs when the last view is gone.
  explicit array(void* data, Shape shape, Dtype dtype, const std::function<void(void*)>& deleter);
  // Take a buffer from the allocator (row-contiguous).
  explicit array(allocator::Buffer data, Shape shape, Dtype dtype, Deleter deleter);

  // A lazy output of `primitive` applied to `inputs`.
  array(Shape shape, Dtype dtype, std::shared_ptr<Primitive> primitive, std::vector<array> inputs);
  static std::vector<array> make_arrays(std::vector<Shape> shapes, const std::vector<Dtype>& dtypes,
                                        const std::shared_ptr<Primitive>& primitive,
                                        const std::vector<array>& inputs);

  array(const array& other) = default;
  array(array&& other) = default;
  array& operator=(const array& other) & = default;
  array& operator=(array&& other) & = default;
  array& operator=(const array& other) && = delete;
  array& operator=(array&& other) && = delete;

  size_t itemsize() const { return size_of(dtype()); }
  size_t size() const;
  size_t nbytes() const { return size() * itemsize(); }
  size_t ndim() const { return shape().size(); }
  const Shape& shape() const;
  // Dimension `dim`, negative counts from the end; throws std::out_of_range.
  int shape(int dim) const;
  const Strides& strides() const;
  int64_t strides(int dim) const;
  Dtype dtype() const;

  // Evaluate (blocking) and return the single element.
  void eval();
  template <typename T>
  T item();
  template <typename T>
  T item() const;

  // Identity of the underlying descriptor (stable while any handle lives).
  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(desc_.get()); }
  // --- graph (valid while the array is unscheduled) ---
  bool has_primitive() const;
  Primitive& primitive() const;
  std::shared_ptr<Primitive> primitive_ptr() const;
  std::uintptr_t primitive_id() const;
  const std::vector<array>& inputs() const;
  // Every output of this array's primitive, in order (this one included).
  std::vector<array> outputs() const;
  // The other outputs of this array's primitive.
  std::vector<array> siblings() const;
  int sibling_position() const;
  // Drop the node (primitive and inputs) so the graph behind this array can be freed.
  void detach();

  // --- data (valid once evaluated) ---
  struct Flags {
    bool contiguous : 1;      // elements occupy data_size() slots with no gaps (any order)
    bool row_contiguous : 1;  // C order
    bool col_contiguous : 1;  // Fortran order
  };
  const Flags& flags() const;
  // Number of elements the buffer region spans (== size() when contiguous).
  size_t data_size() const;
  const allocator::Buffer& buffer() const;
  size_t buffer_size() const;
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  void* raw_data() const;
  // Offset of element 0 from the start of the buffer, in elements.
  int64_t offset() const;
  // True when only this handle and no other view refers to the buffer (outputs may reuse it).
  bool is_donatable() const;
  bool is_row_contiguous() const { return flags().row_contiguous; }

  // A buffer and its deleter (MLX's array::Data), shared by every view of it.
  using Data = detail::Data;
  std::shared_ptr<Data> data_shared_ptr() const;

  // Iteration over the first axis, as MLX: *it is the sub-array a[i] (lazy); a 0-d array cannot
  // be iterated (std::invalid_argument).
  struct ArrayIterator {
    using iterator_category = std::random_access_iterator_tag;
    using difference_type = size_t;
    using value_type = const array;
    using reference = value_type;
    explicit ArrayIterator(const array& arr, int idx = 0);
    reference operator*() const;
    ArrayIterator& operator+(difference_type diff) {
      idx_ += static_cast<int>(diff);
      return *this;
    }
    ArrayIterator& operator++() {
      ++idx_;
      return *this;
    }
    friend bool operator==(const ArrayIterator& a, const ArrayIterator& b) {
      return a.arr_.id() == b.arr_.id() && a.idx_ == b.idx_;
    }
    friend bool operator!=(const ArrayIterator& a, const ArrayIterator& b) { return !(a == b); }

   private:
    const array& arr_;
    int idx_;
  };
  ArrayIterator begin() const { return ArrayIterator(*this); }
  ArrayIterator end() const { return ArrayIterator(*this, shape(0)); }

  enum class Status : int { unscheduled = 0, scheduled = 1, available = 2 };
  Status status() const;
  bool is_available() const { return status() == Status::available; }
  // Block until the array is computed; rethrows an error raised by its kernel (or an input's).
  void wait();
  // Block until scheduled work on this array finished (no eval, no rethrow).
  void wait_until_available() const;

  // --- used by kernels ---
  void set_data(allocator::Buffer buffer, Deleter d = allocator::free);
  void set_data(allocator::Buffer buffer, size_t data_size, Strides strides, Flags flags,
                Deleter d = allocator::free);
  // Become a view of `other`'s buffer.
  void copy_shared_buffer(const array& other, const Strides& strides, Flags flags,
                          size_t data_size, int64_t offset = 0);
  void copy_shared_buffer(const array& other);
  // Take `other`'s buffer (donation); `other` must not be used for its data afterwards.
  void move_shared_buffer(array other, const Strides& strides, Flags flags, size_t data_size,
                          int64_t offset = 0);
  void move_shared_buffer(array other);

  // --- engine internals ---
  void set_status(Status s) const;
  void set_error(std::exception_ptr e) const;
  std::exception_ptr error() const;
  const std::shared_ptr<detail::Node>& node() const;
  bool is_tracer() const;
  void set_tracer(bool t);
  // A view of evaluated `src`'s data with its own layout, available at once (no graph node).
  static array view_of(const array& src, Shape shape, Strides strides, Flags flags,
                       size_t data_size, int64_t offset);

 private:
  template <typename It>
  void init(It src);
  explicit array(std::shared_ptr<detail::ArrayDesc> desc) : desc_(std::move(desc)) {}
  std::shared_ptr<detail::ArrayDesc> desc_;
  friend struct detail::Node;
  friend struct detail::ArrayDesc;
};

namespace detail {

struct Data {
  allocator::Buffer buffer;
  Deleter deleter;
  Data(allocator::Buffer b, Deleter d = allocator::free) : buffer(b), deleter(std::move(d)) {}
  Data(const Data&) = delete;
  Data& operator=(const Data&) = delete;
  ~Data() {
    if (deleter) deleter(buffer);
  }
};

// What produced one or more arrays. Outputs are referenced weakly so that a node and its outputs
// form no cycle; an output that died is recreated (shape and dtype kept here) when needed.
struct Node {
  std::shared_ptr<Primitive> primitive;
  std::vector<array> inputs;
  // Multi-output nodes only (a single output is the descriptor holding the node): the outputs,
  // and what recreates one nobody holds any more.
  std::vector<std::weak_ptr<ArrayDesc>> outputs;
  std::vector<Shape> output_shapes;
  std::vector<Dtype> output_dtypes;
  ~Node();
};

struct ArrayDesc {
  Shape shape;
  Strides strides;
  size_t size = 0;
  Dtype dtype;
  std::shared_ptr<Node> node;  // null once evaluated (detached) or for leaf data
  uint32_t position = 0;       // index among the node's outputs
  bool is_tracer = false;
  // Written by the stream worker before `status` becomes available (release), read after.
  std::shared_ptr<Data> data;
  void* data_ptr = nullptr;
  int64_t offset = 0;
  size_t data_size = 0;
  array::Flags flags{true, true, true};
  std::exception_ptr error;
  std::atomic<int> status{0};

  ArrayDesc(Shape s, Dtype t);
  ArrayDesc(Shape s, Strides st, Dtype t);  // for a view: `st` are its strides
};

// A new descriptor, from the engine's pool of them (array.cpp).
std::shared_ptr<ArrayDesc> make_desc(Shape shape, Dtype dtype);
// Row-major strides of `shape`, in elements.
Strides row_strides(const Shape& shape);
// Product of dims as size_t (0 for an empty array, 1 for a scalar).
size_t shape_size(const Shape& shape);
[[noreturn]] void throw_item_not_scalar(size_t size);

}  // namespace detail

// ---- template definitions ----

template <HasDtype T>
array::array(T val, Dtype dtype) : desc_(detail::make_desc(Shape{}, dtype)) {
  init(&val);
}

template <typename It>
array::array(It data, Shape shape, Dtype dtype)
    : desc_(detail::make_desc(std::move(shape), dtype)) {
  init(data);
}

template <typename T>
array::array(std::initializer_list<T> data, Dtype dtype)
    : desc_(detail::make_desc(Shape{static_cast<int32_t>(data.size())}, dtype)) {
  init(data.begin());
}

template <typename T>
array::array(std::initializer_list<T> data, Shape shape, Dtype dtype)
    : desc_(detail::make_desc(std::move(shape), dtype)) {
  if (data.size() != size()) {
    throw std::invalid_argument("[array] data has " + std::to_string(data.size()) +
                                " values but the shape holds " + std::to_string(size()));
  }
  init(data.begin());
}

namespace detail {
// Calls f(T{}) with T the C++ type of `dtype`.
template <typename F>
decltype(auto) dispatch_dtype(Dtype dtype, F&& f) {
  switch (dtype.val()) {
    case Dtype::Val::bool_: return f(bool{});
    case Dtype::Val::uint8: return f(uint8_t{});
    case Dtype::Val::uint16: return f(uint16_t{});
    case Dtype::Val::uint32: return f(uint32_t{});
    case Dtype::Val::uint64: return f(uint64_t{});
    case Dtype::Val::int8: return f(int8_t{});
    case Dtype::Val::int16: return f(int16_t{});
    case Dtype::Val::int32: return f(int32_t{});
    case Dtype::Val::int64: return f(int64_t{});
    case Dtype::Val::float16: return f(float16_t{});
    case Dtype::Val::float32: return f(float{});
    case Dtype::Val::float64: return f(double{});
    case Dtype::Val::bfloat16: return f(bfloat16_t{});
    case Dtype::Val::complex64: return f(complex64_t{});
  }
  throw std::logic_error("unknown dtype");
}
}  // namespace detail

template <typename It>
void array::init(It src) {
  set_data(allocator::malloc(size() * itemsize()));
  using From = typename std::iterator_traits<It>::value_type;
  detail::dispatch_dtype(dtype(), [&](auto tag) {
    using To = decltype(tag);
    To* dst = data<To>();
    It it = src;
    for (size_t i = 0; i < size(); ++i, ++it) dst[i] = detail::cast_scalar<To, From>(*it);
  });
  set_status(Status::available);
}

template <typename T>
T array::item() {
  if (size() != 1) detail::throw_item_not_scalar(size());
  eval();
  return detail::dispatch_dtype(dtype(), [&](auto tag) -> T {
    using S = decltype(tag);
    return detail::cast_scalar<T, S>(*data<S>());
  });
}

template <typename T>
T array::item() const {
  if (size() != 1) detail::throw_item_not_scalar(size());
  if (status() != Status::available) {
    throw std::invalid_argument("[item] the array is not evaluated; call eval() first");
  }
  return detail::dispatch_dtype(dtype(), [&](auto tag) -> T {
    using S = decltype(tag);
    return detail::cast_scalar<T, S>(*data<S>());
  });
}

}  // namespace tessera
