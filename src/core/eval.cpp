// eval / async_eval: order the unscheduled graph behind the outputs (breadth-first from the
// outputs, at most TESSERA_BFS_MAX_WIDTH wide, then depth-first), detach it, and hand each node
// to its stream's worker. Kernel errors travel to every dependent and surface in wait().
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "backend/device.h"
#include "core/scheduler.h"
#include "core/trace.h"
#include "core/transforms_impl.h"
#include "tessera/config.h"
#include "tessera/eval.h"
#include "tessera/interrupt.h"
#include "tessera/memory.h"
#include "tessera/primitive.h"

namespace tessera {

namespace {

constexpr int kMaxActiveTasks = 64;
constexpr size_t kKeptStack = size_t{1} << 15;  // entries of the walk's stack kept per thread

bool needs_eval(const array& a) {
  return a.status() == array::Status::unscheduled && a.has_primitive();
}

// The trace slice of a kernel: its primitive, output shapes and dtypes, bytes written.
void trace_kernel(const detail::Node& node, const std::vector<array>& outputs, int64_t t0) {
  const int64_t t1 = trace::now_ns();
  trace::current_kernel() = nullptr;
  std::ostringstream name, args;
  node.primitive->print(name);
  size_t bytes = 0;
  args << "\"outputs\":[";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const array& o = outputs[i];
    bytes += o.nbytes();
    args << (i ? "," : "") << "\"" << dtype_name(o.dtype()) << '(';
    for (size_t d = 0; d < o.ndim(); ++d) args << (d ? "," : "") << o.shape()[d];
    args << ")\"";
  }
  args << "],\"bytes\":" << bytes;
  trace::slice("kernel", name.str(), t0, t1, args.str());
}

// One node's kernel on its stream's worker thread.
void run_node(const std::shared_ptr<detail::Node>& node, std::vector<array>& outputs) {
  std::exception_ptr error;
  for (auto& in : node->inputs) {
    // Same-stream inputs are done already (queues run in order); others may still run.
    in.wait_until_available();
    if (!error && in.error()) error = in.error();
  }
  if (!error && detail::interrupt_requested()) {
    error = std::make_exception_ptr(std::runtime_error(
        std::string("[eval] interrupted (SIGINT) before ") + node->primitive->name() + " ran"));
  }
  if (!error) {
    const int64_t t0 = trace::on() ? trace::now_ns() : 0;
    if (t0) trace::current_kernel() = node->primitive->name();
    try {
      backend::evaluate(*node->primitive, node->inputs, outputs);
    } catch (...) {
      error = std::current_exception();
    }
    if (t0) trace_kernel(*node, outputs, t0);
  }
  for (auto& o : outputs) {
    if (error) o.set_error(error);
    o.set_status(array::Status::available);
  }
}

// An op still to run whose inputs are all computed (or being computed): a one-node graph.
bool is_lone_op(const array& a) {
  if (!needs_eval(a)) return false;
  for (auto& in : a.node()->inputs)
    if (needs_eval(in)) return false;
  return true;
}

// How many consumers of each node are still to join the tape, by open addressing in one
// array: a graph walk allocates a few times in all, not once per node as a node-based map does.
// The array stays with the thread between walks (only the slots used are cleared): freeing a
// table this big would make glibc's malloc consolidate every small block freed since, and the
// small allocations of the next graph would pay for that.
class ConsumerCounts {
 public:
  ConsumerCounts() : slots_(storage().slots), filled_(storage().filled) {
    if (slots_.empty()) slots_.resize(kInitialSlots);
  }
  ~ConsumerCounts() {
    if (slots_.size() > kKeptSlots) {  // a rare huge graph's table goes back
      std::vector<Slot>(kInitialSlots).swap(slots_);
      std::vector<uint32_t>().swap(filled_);
      return;
    }
    for (uint32_t i : filled_) slots_[i] = Slot{};
    filled_.clear();
  }
  ConsumerCounts(const ConsumerCounts&) = delete;
  ConsumerCounts& operator=(const ConsumerCounts&) = delete;

  // The count of `n`; `inserted` says whether `n` was new (its count then starts at 0).
  int& at(const detail::Node* n, bool& inserted) {
    if (2 * (filled_.size() + 1) > slots_.size()) grow();
    const uint32_t i = probe(slots_, n);
    Slot& s = slots_[i];
    inserted = s.key == nullptr;
    if (inserted) {
      s.key = n;
      filled_.push_back(i);
    }
    return s.count;
  }
  // The count of a node that at() has seen.
  int& operator[](const detail::Node* n) { return slots_[probe(slots_, n)].count; }

 private:
  struct Slot {
    const detail::Node* key = nullptr;
    int count = 0;
  };
  struct Storage {
    std::vector<Slot> slots;  // a power of two long, at most half full
    std::vector<uint32_t> filled;  // the slots in use
  };
  static constexpr size_t kInitialSlots = 64;
  static constexpr size_t kKeptSlots = size_t{1} << 16;  // 1 MiB

  static Storage& storage() {
    thread_local Storage s;
    return s;
  }
  static uint32_t probe(const std::vector<Slot>& slots, const detail::Node* n) {
    const size_t mask = slots.size() - 1;
    size_t i = (reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ull >> 20 & mask;
    while (slots[i].key != nullptr && slots[i].key != n) i = (i + 1) & mask;
    return static_cast<uint32_t>(i);
  }
  void grow() {
    std::vector<Slot> bigger(slots_.size() * 2);
    for (uint32_t& i : filled_) {
      const uint32_t j = probe(bigger, slots_[i].key);
      bigger[j] = slots_[i];
      i = j;
    }
    slots_ = std::move(bigger);
  }
  std::vector<Slot>& slots_;
  std::vector<uint32_t>& filled_;
};

// The nodes to run behind `outputs`, in reverse execution order (consumers first), into the
// empty `tape`.
void build_tape(const std::vector<array>& outputs, std::vector<array>& tape) {
  if (outputs.size() == 1 && is_lone_op(outputs[0])) {  // no graph walk
    tape.push_back(outputs[0]);
    return;
  }
  // 1. Depth-first walk: count, for every node to run, the edges from its consumers.
  ConsumerCounts consumers;
  std::vector<array> roots;
  {
    // Kept with the thread between walks, as the counts' table (empty after each walk). Used
    // through a reference: each use of a thread_local itself is a call in a shared library.
    using Stack = std::vector<std::pair<array, size_t>>;
    thread_local Stack kept;
    Stack& stack = kept;
    struct Trim {
      Stack& s;
      ~Trim() {
        s.clear();
        if (s.capacity() > kKeptStack) Stack().swap(s);
      }
    } trim{stack};
    bool inserted = false;
    for (const auto& o : outputs) {
      if (o.status() == array::Status::unscheduled && !o.has_primitive()) {
        throw std::logic_error("[eval] an array has neither data nor a primitive");
      }
      if (!needs_eval(o)) continue;
      consumers.at(o.node().get(), inserted);
      if (!inserted) continue;
      roots.push_back(o);
      stack.emplace_back(o, 0);
      while (!stack.empty()) {
        auto& [a, i] = stack.back();
        const auto& ins = a.node()->inputs;
        if (i == ins.size()) {
          stack.pop_back();
          continue;
        }
        const array& in = ins[i++];
        if (!needs_eval(in)) continue;
        ++consumers.at(in.node().get(), inserted);
        if (inserted) stack.emplace_back(in, 0);
      }
    }
  }
  // 2. The tape: a node joins once all its consumers have; width-limited breadth first.
  const size_t max_width = static_cast<size_t>(config::get_int("TESSERA_BFS_MAX_WIDTH"));
  for (auto& r : roots)
    if (consumers[r.node().get()] == 0) tape.push_back(r);
  {
    std::vector<std::pair<array, size_t>> deferred;
    size_t i = 0;
    for (;;) {
      std::optional<array> cur;
      size_t j = 0;
      if (i < tape.size()) {
        cur = tape[i++];
      } else if (!deferred.empty()) {
        cur = std::move(deferred.back().first);
        j = deferred.back().second;
        deferred.pop_back();
      } else {
        break;
      }
      const array& a = *cur;
      const auto& ins = a.node()->inputs;
      for (; j < ins.size(); ++j) {
        const array& in = ins[j];
        if (!needs_eval(in)) continue;
        if (tape.size() - i >= max_width) {
          deferred.emplace_back(a, j);
          break;
        }
        if (--consumers[in.node().get()] == 0) tape.push_back(in);
      }
    }
  }
}

// The tape of one eval, kept with the thread (one per nesting level: a kernel may evaluate a
// graph of its own) so that long graphs do not free a big block each time (see ConsumerCounts).
class KeptTape {
 public:
  KeptTape() : kept_(kept()), tape_(level(kept_)) {}
  ~KeptTape() {
    tape_.clear();
    if (tape_.capacity() > kKeptStack) std::vector<array>().swap(tape_);
    --kept_.depth;
  }
  KeptTape(const KeptTape&) = delete;
  KeptTape& operator=(const KeptTape&) = delete;
  std::vector<array>& operator*() { return tape_; }

 private:
  struct Kept {
    std::deque<std::vector<array>> levels;
    size_t depth = 0;
  };
  static Kept& kept() {
    thread_local Kept k;
    return k;
  }
  static std::vector<array>& level(Kept& k) {
    if (k.levels.size() == k.depth) k.levels.emplace_back();
    return k.levels[k.depth++];
  }
  Kept& kept_;
  std::vector<array>& tape_;
};

// Runs one tape entry now, on this thread: what a stream worker does with it.
void run_now(array& a) {
  // The outputs' vector, one per nesting level (a kernel may evaluate a graph of its own),
  // kept between calls so that an op run here allocates nothing for it. Emptied as soon as the
  // kernel ran: a handle left in it would keep the next op from donating the output.
  struct Scratch {
    std::deque<std::vector<array>> levels;
    size_t depth = 0;
  };
  thread_local Scratch kept;
  Scratch& scratch = kept;  // one thread_local lookup (a call in a shared library)
  if (scratch.levels.size() == scratch.depth) scratch.levels.emplace_back();
  struct Level {
    std::vector<array>& outs;
    size_t& depth;
    ~Level() {
      outs.clear();
      --depth;
    }
  } level{scratch.levels[scratch.depth++], scratch.depth};
  std::vector<array>& outs = level.outs;
  std::shared_ptr<detail::Node> node = a.node();
  if (node->outputs.empty()) {
    outs.push_back(a);  // a single-output node's output is `a` itself
  } else {
    outs = a.outputs();
  }
  for (auto& o : outs) o.set_status(array::Status::scheduled);
  if (!a.is_tracer()) a.detach();
  run_node(node, outs);
}

// A lone op on computed inputs on an idle stream (a loop of collectives) runs here; false if
// `a` is not such an op.
bool eval_lone_op(const array& a) {
  if (!is_lone_op(a)) return false;
  scheduler::check_usable(a.node()->primitive->stream());
  array handle = a;
  if (!scheduler::run_inline(a.node()->primitive->stream(), [&] { run_now(handle); })) {
    return false;
  }
  handle.wait();
  return true;
}

// The nodes of one task in the order they run, with their outputs: node i's are outs[ends[i-1],
// ends[i]). The vectors go back to a shared spare after the task (their capacity kept), so a
// steady decode loop allocates none of them: built on the caller's thread and freed on the
// worker's, each big block freed made glibc's malloc consolidate the small blocks freed
// meanwhile, and the caller's next small allocations paid for it.
struct Run {
  std::vector<std::shared_ptr<detail::Node>> nodes;
  std::vector<array> outs;
  std::vector<uint32_t> ends;

  static Run take() {
    std::lock_guard<std::mutex> l(spare_mutex());
    auto& spare = spares();
    if (spare.empty()) return {};
    Run r = std::move(spare.back());
    spare.pop_back();
    return r;
  }
  // Every element is gone already (the task released them as it ran).
  static void give(Run&& r) {
    r.nodes.clear();
    r.outs.clear();
    r.ends.clear();
    std::lock_guard<std::mutex> l(spare_mutex());
    if (spares().size() < kSpareRuns) spares().push_back(std::move(r));
  }
  // The worker's vector of one node's outputs, kept between nodes.
  static std::vector<array>& scratch() {
    thread_local std::vector<array> outs;
    return outs;
  }

 private:
  static constexpr size_t kSpareRuns = 4;
  static std::mutex& spare_mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<Run>& spares() {
    static auto* s = new std::vector<Run>();  // never destroyed: workers may outlive statics
    return *s;
  }
};

void eval_impl(std::vector<array> outputs, bool async) {
  if (!async && outputs.size() == 1 && eval_lone_op(outputs[0])) return;
  KeptTape kept;
  std::vector<array>& tape = *kept;
  build_tape(outputs, tape);
  for (auto& a : tape) scheduler::check_usable(a.node()->primitive->stream());
  // 3a. A blocking eval whose whole graph is on one idle stream runs it on this thread: the
  // same order and the same per-node code, without waking the worker and waiting for it.
  if (!async && !tape.empty()) {
    const Stream s = tape.back().node()->primitive->stream();
    bool one_stream = true;
    for (auto& a : tape) one_stream = one_stream && a.node()->primitive->stream() == s;
    if (one_stream && scheduler::run_inline(s, [&] {
          while (!tape.empty()) {
            array a = std::move(tape.back());
            tape.pop_back();
            run_now(a);
          }
        })) {
      for (auto& o : outputs) o.wait();
      return;
    }
  }
  // 3. Submit in dependency order, each run of consecutive nodes on one stream as one task (a
  // task per node cost a queue lock, a wake-up and an allocation per op: mlx-lm's decode, ~1,450
  // ops per token submitted by async_eval, took 23 ms per token against 13 run inline). Each
  // stream's queue keeps the tape's order, and a node waits only for nodes before it in the tape,
  // so runs on different streams cannot wait for each other in a cycle. Each node is detached
  // and released as soon as it ran, so memory is freed as before.
  while (!tape.empty()) {
    const Stream stream = tape.back().node()->primitive->stream();
    Run run = Run::take();
    while (!tape.empty() && tape.back().node()->primitive->stream() == stream) {
      array& a = tape.back();
      run.nodes.push_back(a.node());
      const size_t first = run.outs.size();
      if (a.node()->outputs.empty()) {
        run.outs.push_back(a);  // a single-output node's output is `a` itself
      } else {
        for (auto& o : a.outputs()) run.outs.push_back(std::move(o));
      }
      run.ends.push_back(static_cast<uint32_t>(run.outs.size()));
      for (size_t i = first; i < run.outs.size(); ++i) {
        run.outs[i].set_status(array::Status::scheduled);
      }
      if (!a.is_tracer()) a.detach();
      tape.pop_back();  // drop our handle: the task owns the outputs now
    }
    scheduler::enqueue(stream, [run = std::move(run), stream, async]() mutable {
      std::vector<array>& outs = Run::scratch();
      uint32_t begin = 0;
      for (size_t i = 0; i < run.nodes.size(); ++i) {
        for (uint32_t j = begin; j < run.ends[i]; ++j) outs.push_back(std::move(run.outs[j]));
        begin = run.ends[i];
        run_node(run.nodes[i], outs);
        // Nobody waits on an async_eval: its stream keeps the first error for synchronize.
        if (async && outs[0].error()) scheduler::record_error(stream, outs[0].error());
        run.nodes[i].reset();
        outs.clear();
      }
      Run::give(std::move(run));
    });
    if (scheduler::n_active_tasks() > kMaxActiveTasks ||
        (get_active_memory() > get_memory_limit() && scheduler::n_active_tasks() > 0)) {
      scheduler::wait_for_one();
    }
  }
  if (!async) {
    for (auto& o : outputs) o.wait();
  }
}

}  // namespace

void eval(std::vector<array> outputs) { eval_impl(std::move(outputs), false); }
void detail::eval_one(const array& a) {
  if (!eval_lone_op(a)) eval_impl({a}, false);
}
void async_eval(std::vector<array> outputs) {
  // As MLX: a transform's trace must see every value it depends on computed in order.
  for (const auto& o : outputs) {
    if (o.is_tracer()) {
      throw std::invalid_argument("[async_eval] not allowed on a value a transform (grad, vjp, "
                                  "jvp, vmap) is tracing; use eval there");
    }
  }
  eval_impl(std::move(outputs), true);
}

}  // namespace tessera
