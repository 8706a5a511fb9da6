// Function transforms (DESIGN.md section 3): vjp, jvp, value_and_grad, grad, vmap,
// custom_function / custom_vjp and checkpoint. Each one traces the user's function on stand-ins
// for its inputs, orders the traced graph iteratively (graphs can be deep), then applies every
// primitive's vjp / jvp / vmap rule along that order.
#include "tessera/transforms.h"

#include <algorithm>
#include <set>
#include <typeinfo>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tessera/primitive.h"
#include "core/shape_checks.h"
#include "ops/transform_primitives.h"
#include "core/transforms_impl.h"
#include "ops/creation.h"  // Copy: the tracers' primitive
#include "tessera/ops.h"

namespace tessera {

namespace {

using IdSet = std::unordered_set<std::uintptr_t>;

bool is_stop_gradient(const array& a) {
  return a.has_primitive() && std::string_view(a.primitive().name()) == "StopGradient";
}

// How many leading inputs of `a`'s node the transforms flow through: all of them, except the
// forwarded outputs at the end of a CustomTransforms node.
size_t traced_inputs(const array& a) {
  if (!a.has_primitive()) return 0;
  if (auto* ct = dynamic_cast<const CustomTransforms*>(&a.primitive())) {
    return a.inputs().size() - static_cast<size_t>(ct->num_outputs());
  }
  return a.inputs().size();
}

// Where a transform's own ops on `a` run (its copies, casts, zeros, sums): on a's stream, so a
// transform of a function on one stream never waits for another (MLX places them so too).
Stream stream_of(const array& a) {
  return a.has_primitive() ? a.primitive().stream() : to_stream({});
}

// A fresh array equal to `p` whose id belongs to this transform alone. A primal that is a
// tracer left by an earlier call (a closure kept `inputs[0]` and passes it back in) is peeled
// first, so a loop that feeds a transform's inputs back does not grow a chain of copies.
array make_tracer(const array& p) {
  const bool stale = !p.is_tracer() && p.has_primitive() && p.inputs().size() == 1 &&
                     typeid(p.primitive()) == typeid(Copy);
  const array& src = stale ? p.inputs()[0] : p;
  // It shares the primal's buffer (no copy of every parameter on every step).
  array t(src.shape(), src.dtype(), std::make_shared<Copy>(stream_of(p), true), {src});
  t.set_tracer(true);
  return t;
}

struct Tape {
  std::vector<array> nodes;  // one output per node; every node comes after the nodes it reads
  std::vector<array> keep;   // outputs fetched during the walk, held so their ids stay unique
};

// Post-order walk (iterative) of the graph above `outputs`, not entering the arrays in `seen`.
// A node joins the tape when one of its traced inputs is `active`; its outputs then become
// active. With `stop_gradients`, StopGradient nodes never join (nothing flows through them).
// With `follow_sources` (vmap), a node's shape sources (Primitive::shape_sources, kept while
// compile traces) count as inputs too: a broadcast of an unbatched array that follows a batched
// one must be batched for a shapeless replay.
Tape build_tape(const std::vector<array>& outputs, IdSet& active, IdSet seen, bool stop_gradients,
                bool follow_sources = false) {
  Tape tape;
  std::vector<std::pair<array, size_t>> stack;
  auto visit = [&](const array& a) {
    if (!seen.insert(a.id()).second) return;
    for (auto& s : a.siblings()) {
      seen.insert(s.id());
      tape.keep.push_back(s);
    }
    stack.emplace_back(a, 0);
  };
  auto sources = [&](const array& a) {
    return follow_sources && a.has_primitive() ? a.primitive().shape_sources()
                                               : std::vector<array>{};
  };
  for (const auto& o : outputs) {
    visit(o);
    while (!stack.empty()) {
      const array& top = stack.back().first;
      size_t n = traced_inputs(top);
      size_t& next = stack.back().second;
      if (next < n) {
        array in = top.inputs()[next++];
        visit(in);
        continue;
      }
      if (follow_sources) {
        std::vector<array> srcs = sources(top);
        if (next < n + srcs.size()) {
          visit(srcs[next++ - n]);
          continue;
        }
      }
      array a = std::move(stack.back().first);
      stack.pop_back();
      if (stop_gradients && is_stop_gradient(a)) continue;
      bool depends = false;
      for (size_t k = 0; k < n && !depends; ++k) depends = active.count(a.inputs()[k].id()) > 0;
      for (const array& src : sources(a)) depends = depends || active.count(src.id()) > 0;
      if (!depends) continue;
      for (auto& out : a.outputs()) {
        active.insert(out.id());
        tape.keep.push_back(out);
      }
      tape.nodes.push_back(std::move(a));
    }
  }
  return tape;
}

// Once the outermost transform is done, arrays built while tracing become ordinary arrays again,
// so eval frees their graphs as usual.
void clear_tracers(const std::vector<array>& roots) {
  if (detail::in_tracing()) return;
  detail::InTracing reading;  // is_tracer() reports an array's mark only while tracing
  IdSet seen;
  std::vector<array> stack;
  for (const auto& r : roots) {
    if (r.is_tracer()) stack.push_back(r);
  }
  while (!stack.empty()) {
    array a = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(a.id()).second) continue;
    a.set_tracer(false);
    for (auto& s : a.siblings()) s.set_tracer(false);
    for (const auto& in : a.inputs()) {
      if (in.is_tracer()) stack.push_back(in);
    }
  }
}

std::string shape_text(const Shape& s) { return detail::shape_str(s); }

// Given the traced outputs, the (output index, cotangent) pairs to start the backward pass from.
using CotangentPicker =
    std::function<std::vector<std::pair<int, array>>(const std::vector<array>& outputs)>;

// Reverse mode over the primals named in `argnums` (sorted, unique, in range).
std::pair<std::vector<array>, std::vector<array>> vjp_impl(const VecFn& fun,
                                                           const std::vector<array>& primals,
                                                           const std::vector<int>& argnums,
                                                           const CotangentPicker& pick) {
  std::vector<array> outputs;
  std::vector<array> grads;
  std::vector<array> roots;  // where clear_tracers starts: the tracers made here, the results
  {
    detail::InTracing tracing;
    std::vector<array> args = primals;
    IdSet active;
    for (int i : argnums) {
      args[i] = make_tracer(primals[i]);
      active.insert(args[i].id());
      roots.push_back(args[i]);
    }
    IdSet seeds = active;
    outputs = fun(args);
    auto cots = pick(outputs);
    Tape tape = build_tape(outputs, active, std::move(seeds), true);

    std::unordered_map<std::uintptr_t, array> cmap;
    auto accumulate = [&cmap](const array& target, array c, const Stream& s) {
      auto it = cmap.find(target.id());
      if (it == cmap.end()) {
        cmap.emplace(target.id(), std::move(c));
      } else {
        it->second = add(it->second, c, s);
      }
    };
    for (auto& [i, c] : cots) {
      const array& o = outputs[i];
      if (!active.count(o.id())) continue;  // no path back to a primal
      const Stream s = stream_of(o);
      accumulate(o, c.dtype() == o.dtype() ? c : astype(c, o.dtype(), s), s);
    }

    for (auto it = tape.nodes.rbegin(); it != tape.nodes.rend(); ++it) {
      const array& a = *it;
      auto outs = a.outputs();
      bool any = false;
      for (auto& o : outs) any = any || cmap.count(o.id()) > 0;
      if (!any) continue;
      const Stream s = a.primitive().stream();
      std::vector<array> cotangents;
      cotangents.reserve(outs.size());
      for (auto& o : outs) {
        auto f = cmap.find(o.id());
        if (f == cmap.end()) {
          cotangents.push_back(zeros_like(o, s));
        } else {
          cotangents.push_back(std::move(f->second));
          cmap.erase(f);
        }
      }
      std::vector<int> an;
      size_t n = traced_inputs(a);
      for (size_t k = 0; k < n; ++k) {
        if (active.count(a.inputs()[k].id())) an.push_back(static_cast<int>(k));
      }
      auto vjps = a.primitive().vjp(a.inputs(), cotangents, an, outs);
      if (vjps.size() != an.size()) {
        std::ostringstream msg;
        msg << "[vjp] the vjp of " << a.primitive().name() << " returned " << vjps.size()
            << " cotangents for " << an.size() << " inputs";
        throw std::logic_error(msg.str());
      }
      for (size_t j = 0; j < an.size(); ++j) {
        const array& in = a.inputs()[an[j]];
        if (vjps[j].shape() != in.shape()) {
          std::ostringstream msg;
          msg << "[vjp] the vjp of " << a.primitive().name() << " returned shape "
              << shape_text(vjps[j].shape()) << " for input " << an[j] << " of shape "
              << shape_text(in.shape());
          throw std::logic_error(msg.str());
        }
        accumulate(in, std::move(vjps[j]), s);
      }
    }

    for (int i : argnums) {
      auto f = cmap.find(args[i].id());
      grads.push_back(f != cmap.end() ? f->second : zeros_like(primals[i], stream_of(args[i])));
    }
  }
  roots.insert(roots.end(), outputs.begin(), outputs.end());
  roots.insert(roots.end(), grads.begin(), grads.end());
  clear_tracers(roots);
  return {std::move(outputs), std::move(grads)};
}

// Moves axis `from` of `a` to position `to`.
array move_axis(const array& a, int from, int to) {
  std::vector<int> perm;
  for (int i = 0; i < static_cast<int>(a.ndim()); ++i) {
    if (i != from) perm.push_back(i);
  }
  perm.insert(perm.begin() + to, from);
  return transpose(a, perm);
}

std::vector<array> vmap_impl(const VecFn& fun, const std::vector<array>& inputs,
                             std::vector<int> in_axes, std::vector<int> out_axes) {
  const size_t n = inputs.size();
  if (in_axes.empty()) in_axes.assign(n, 0);
  if (in_axes.size() != n) {
    std::ostringstream msg;
    msg << "[vmap] " << in_axes.size() << " in_axes were given for a function of " << n
        << " inputs";
    throw std::invalid_argument(msg.str());
  }
  int batch = -1;
  size_t batch_input = 0;
  for (size_t i = 0; i < n; ++i) {
    int ax = in_axes[i];
    if (ax == -1) continue;
    int nd = static_cast<int>(inputs[i].ndim());
    if (ax < 0 || ax >= nd) {
      std::ostringstream msg;
      msg << "[vmap] in_axes[" << i << "] = " << ax << " is out of range for input " << i
          << " of shape " << shape_text(inputs[i].shape())
          << (nd == 0 ? " (a 0-d input cannot be batched; use -1)" : "");
      throw std::invalid_argument(msg.str());
    }
    int b = inputs[i].shape(ax);
    if (batch == -1) {
      batch = b;
      batch_input = i;
    } else if (b != batch) {
      std::ostringstream msg;
      msg << "[vmap] the batch axes have different sizes: input " << batch_input << " has "
          << batch << " along axis " << in_axes[batch_input] << " but input " << i << " has "
          << b << " along axis " << ax;
      throw std::invalid_argument(msg.str());
    }
  }
  if (batch == -1) {
    throw std::invalid_argument("[vmap] at least one input must be batched (every in_axis is -1)");
  }

  std::vector<array> outputs;
  {
    detail::InTracing tracing;
    std::unordered_map<std::uintptr_t, std::pair<array, int>> bmap;
    IdSet active;
    std::vector<array> stand_ins = inputs;
    for (size_t i = 0; i < n; ++i) {
      if (in_axes[i] == -1) continue;
      Shape shape = inputs[i].shape();
      shape.erase(shape.begin() + in_axes[i]);
      Dtype dtype = inputs[i].dtype();
      stand_ins[i] = array(std::move(shape), dtype,
                           std::make_shared<VmapPlaceholder>(to_stream({}), in_axes[i]),
                           {inputs[i]});
      stand_ins[i].set_tracer(true);
      bmap.emplace(stand_ins[i].id(), std::make_pair(inputs[i], in_axes[i]));
      active.insert(stand_ins[i].id());
    }
    IdSet seeds = active;
    auto traced = fun(stand_ins);
    if (out_axes.empty()) out_axes.assign(traced.size(), 0);
    if (out_axes.size() != traced.size()) {
      std::ostringstream msg;
      msg << "[vmap] " << out_axes.size() << " out_axes were given for a function of "
          << traced.size() << " outputs";
      throw std::invalid_argument(msg.str());
    }
    Tape tape = build_tape(traced, active, std::move(seeds), false, true);

    for (const auto& a : tape.nodes) {
      const auto& ins = a.inputs();
      size_t nt = traced_inputs(a);
      std::vector<array> v_in;
      std::vector<int> v_ax;
      for (size_t k = 0; k < ins.size(); ++k) {
        auto f = k < nt ? bmap.find(ins[k].id()) : bmap.end();
        if (f != bmap.end()) {
          v_in.push_back(f->second.first);
          v_ax.push_back(f->second.second);
        } else {
          v_in.push_back(ins[k]);
          v_ax.push_back(-1);
        }
      }
      // Shape sources (while compile traces) as batched as the inputs, for the rule.
      detail::VmappedSources v_src;
      for (const array& src : a.primitive().shape_sources()) {
        auto f = bmap.find(src.id());
        v_src.push_back(f != bmap.end() ? f->second : std::make_pair(src, -1));
      }
      detail::VmappedSourcesScope src_scope(v_src.empty() ? nullptr : &v_src);
      auto [v_out, v_out_ax] = a.primitive().vmap(v_in, v_ax);
      auto outs = a.outputs();
      if (v_out.size() != outs.size() || v_out_ax.size() != outs.size()) {
        std::ostringstream msg;
        msg << "[vmap] the vmap of " << a.primitive().name() << " returned " << v_out.size()
            << " outputs and " << v_out_ax.size() << " axes for " << outs.size() << " outputs";
        throw std::logic_error(msg.str());
      }
      for (size_t i = 0; i < outs.size(); ++i) {
        bmap.emplace(outs[i].id(), std::make_pair(v_out[i], v_out_ax[i]));
      }
    }

    for (size_t i = 0; i < traced.size(); ++i) {
      int oa = out_axes[i];
      auto f = bmap.find(traced[i].id());
      if (f != bmap.end() && f->second.second >= 0) {
        const array& o = f->second.first;
        int ax = f->second.second;
        if (oa < 0 || oa >= static_cast<int>(o.ndim())) {
          std::ostringstream msg;
          msg << "[vmap] out_axes[" << i << "] = " << oa << " is out of range for output " << i
              << " of batched shape " << shape_text(o.shape());
          throw std::invalid_argument(msg.str());
        }
        outputs.push_back(ax == oa ? o : move_axis(o, ax, oa));
        continue;
      }
      // Not batched (no dependence on a batched input): repeat it along the new axis.
      const array& o = f != bmap.end() ? f->second.first : traced[i];
      if (oa < 0 || oa > static_cast<int>(o.ndim())) {
        std::ostringstream msg;
        msg << "[vmap] out_axes[" << i << "] = " << oa << " is out of range for output " << i
            << " of shape " << shape_text(o.shape()) << " with a batch axis added";
        throw std::invalid_argument(msg.str());
      }
      Shape one = o.shape();
      one.insert(one.begin() + oa, 1);
      Shape full_shape = o.shape();
      full_shape.insert(full_shape.begin() + oa, batch);
      outputs.push_back(broadcast_to(reshape(o, one), full_shape));
    }
  }
  clear_tracers(outputs);
  return outputs;
}

}  // namespace

// ---- reverse and forward mode ----

std::pair<std::vector<array>, std::vector<array>> vjp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents) {
  std::vector<int> argnums(primals.size());
  for (size_t i = 0; i < primals.size(); ++i) argnums[i] = static_cast<int>(i);
  auto pick = [&cotangents](const std::vector<array>& outputs) {
    std::vector<std::pair<int, array>> pairs;
    size_t c = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (is_stop_gradient(outputs[i])) continue;
      if (c < cotangents.size()) {
        if (outputs[i].shape() != cotangents[c].shape()) {
          std::ostringstream msg;
          msg << "[vjp] output " << i << " has shape " << shape_text(outputs[i].shape())
              << " but its cotangent (cotangents[" << c << "]) has shape "
              << shape_text(cotangents[c].shape());
          throw std::invalid_argument(msg.str());
        }
        pairs.emplace_back(static_cast<int>(i), cotangents[c]);
      }
      ++c;
    }
    // As MLX: cotangents go to the outputs that are not stop_gradient's, in order; one given
    // for every output (stopped ones included) is fine too, the surplus is unused.
    if (c > cotangents.size() || cotangents.size() > outputs.size()) {
      std::ostringstream msg;
      msg << "[vjp] the function returned " << outputs.size() << " outputs (" << c
          << " to differentiate) but " << cotangents.size()
          << " cotangents were given; pass one cotangent per output";
      throw std::invalid_argument(msg.str());
    }
    return pairs;
  };
  return vjp_impl(fun, primals, argnums, pick);
}

std::pair<array, array> vjp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& cotangent) {
  auto vec_fun = [&fun](const std::vector<array>& in) { return std::vector<array>{fun(in[0])}; };
  auto [outs, grads] = vjp(vec_fun, {primal}, {cotangent});
  return {outs[0], grads[0]};
}

std::pair<std::vector<array>, std::vector<array>> jvp(const VecFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents) {
  if (primals.size() != tangents.size()) {
    std::ostringstream msg;
    msg << "[jvp] " << primals.size() << " primals but " << tangents.size()
        << " tangents were given; pass one tangent per primal";
    throw std::invalid_argument(msg.str());
  }
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].shape() != tangents[i].shape()) {
      std::ostringstream msg;
      msg << "[jvp] primal " << i << " has shape " << shape_text(primals[i].shape())
          << " but its tangent has shape " << shape_text(tangents[i].shape());
      throw std::invalid_argument(msg.str());
    }
  }
  std::vector<array> outputs;
  std::vector<array> result;
  std::vector<array> roots;  // where clear_tracers starts: the tracers made here, the results
  {
    detail::InTracing tracing;
    std::vector<array> args;
    IdSet active;
    std::unordered_map<std::uintptr_t, array> tmap;
    for (size_t i = 0; i < primals.size(); ++i) {
      args.push_back(make_tracer(primals[i]));
      roots.push_back(args.back());
      active.insert(args.back().id());
      const array& t = tangents[i];
      tmap.emplace(args.back().id(),
                   t.dtype() == primals[i].dtype()
                       ? t
                       : astype(t, primals[i].dtype(), stream_of(args.back())));
    }
    IdSet seeds = active;
    outputs = fun(args);
    Tape tape = build_tape(outputs, active, std::move(seeds), true);
    for (const auto& a : tape.nodes) {
      std::vector<int> an;
      std::vector<array> tans;
      size_t n = traced_inputs(a);
      for (size_t k = 0; k < n; ++k) {
        auto f = tmap.find(a.inputs()[k].id());
        if (f != tmap.end()) {
          an.push_back(static_cast<int>(k));
          tans.push_back(f->second);
        }
      }
      auto jvps = a.primitive().jvp(a.inputs(), tans, an);
      auto outs = a.outputs();
      if (jvps.size() != outs.size()) {
        std::ostringstream msg;
        msg << "[jvp] the jvp of " << a.primitive().name() << " returned " << jvps.size()
            << " tangents for " << outs.size() << " outputs";
        throw std::logic_error(msg.str());
      }
      for (size_t i = 0; i < outs.size(); ++i) tmap.emplace(outs[i].id(), std::move(jvps[i]));
    }
    for (const auto& o : outputs) {
      auto f = tmap.find(o.id());
      result.push_back(f != tmap.end() ? f->second : zeros_like(o, stream_of(o)));
    }
  }
  roots.insert(roots.end(), outputs.begin(), outputs.end());
  roots.insert(roots.end(), result.begin(), result.end());
  clear_tracers(roots);
  return {std::move(outputs), std::move(result)};
}

std::pair<array, array> jvp(const std::function<array(const array&)>& fun, const array& primal,
                            const array& tangent) {
  auto vec_fun = [&fun](const std::vector<array>& in) { return std::vector<array>{fun(in[0])}; };
  auto [outs, tans] = jvp(vec_fun, {primal}, {tangent});
  return {outs[0], tans[0]};
}

// ---- gradients ----

ValueAndGradFn value_and_grad(const VecFn& fun, const std::vector<int>& argnums) {
  if (argnums.empty()) {
    throw std::invalid_argument("[value_and_grad] argnums is empty; name at least one input");
  }
  return [fun, argnums](const std::vector<array>& inputs) {
    const int n = static_cast<int>(inputs.size());
    std::set<int> args;
    for (int a : argnums) {
      int b = a < 0 ? a + n : a;
      if (b < 0 || b >= n) {
        std::ostringstream msg;
        msg << "[value_and_grad] argnum " << a << " is out of range for a function called with "
            << n << " inputs";
        throw std::invalid_argument(msg.str());
      }
      if (!args.insert(b).second) {
        std::ostringstream msg;
        msg << "[value_and_grad] argnum " << a << " is repeated in argnums (";
        for (size_t i = 0; i < argnums.size(); ++i) msg << (i ? "," : "") << argnums[i];
        msg << ")";
        throw std::invalid_argument(msg.str());
      }
    }
    std::vector<int> sorted(args.begin(), args.end());
    auto pick = [](const std::vector<array>& outputs) {
      if (outputs.empty()) {
        throw std::invalid_argument(
            "[value_and_grad] the function returned no outputs; it must return a scalar first");
      }
      const array& o = outputs[0];
      if (o.ndim() != 0) {
        throw std::invalid_argument(
            "[value_and_grad] the function's first output must be a scalar (0-d) to take its "
            "gradient, but it has shape " +
            shape_text(o.shape()));
      }
      return std::vector<std::pair<int, array>>{{0, array(1.0f, o.dtype())}};
    };
    return vjp_impl(fun, inputs, sorted, pick);
  };
}

std::function<std::pair<array, array>(const array&)> value_and_grad(
    const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& in) { return std::vector<array>{fun(in[0])}; }, 0);
  return [vg](const array& x) {
    auto [outs, grads] = vg({x});
    return std::make_pair(outs[0], grads[0]);
  };
}

SimpleValueAndGradFn value_and_grad(const std::function<array(const std::vector<array>&)>& fun,
                                    const std::vector<int>& argnums) {
  auto vg = value_and_grad(
      [fun](const std::vector<array>& in) { return std::vector<array>{fun(in)}; }, argnums);
  return [vg](const std::vector<array>& inputs) {
    auto [outs, grads] = vg(inputs);
    return std::make_pair(outs[0], std::move(grads));
  };
}

VecFn grad(const std::function<array(const std::vector<array>&)>& fun,
           const std::vector<int>& argnums) {
  auto vg = value_and_grad(fun, argnums);
  return [vg](const std::vector<array>& inputs) { return vg(inputs).second; };
}

std::function<array(const array&)> grad(const std::function<array(const array&)>& fun) {
  auto vg = value_and_grad(fun);
  return [vg](const array& x) { return vg(x).second; };
}

// ---- vectorising ----

namespace {

// As MLX, checked when the vmapped function is made: every output gets a batch axis, so out
// axes that are all -1 (not batched) pair only with in axes that are all -1, which no call can
// accept; a mix of the two is a mistake in the axes, reported before any call.
void check_axes_agree(const std::vector<int>& in_axes, const std::vector<int>& out_axes) {
  auto none = [](const std::vector<int>& axes) {
    return !axes.empty() && std::all_of(axes.begin(), axes.end(), [](int ax) { return ax < 0; });
  };
  if (none(in_axes) != none(out_axes)) {
    std::ostringstream msg;
    msg << "[vmap] " << (none(in_axes) ? "no input" : "no output") << " is batched (every "
        << (none(in_axes) ? "in_axis" : "out_axis") << " is -1) but "
        << (none(in_axes) ? "out_axes" : "in_axes")
        << " name batch axes: give in_axes and out_axes that both batch something";
    throw std::invalid_argument(msg.str());
  }
}

}  // namespace

std::function<array(const array&)> vmap(const std::function<array(const array&)>& fun,
                                        int in_axis, int out_axis) {
  check_axes_agree({in_axis}, {out_axis});
  auto vec_fun = [fun](const std::vector<array>& in) { return std::vector<array>{fun(in[0])}; };
  return [vec_fun, in_axis, out_axis](const array& x) {
    return vmap_impl(vec_fun, {x}, {in_axis}, {out_axis})[0];
  };
}

std::function<array(const array&, const array&)> vmap(
    const std::function<array(const array&, const array&)>& fun, int in_axis_a, int in_axis_b,
    int out_axis) {
  check_axes_agree({in_axis_a, in_axis_b}, {out_axis});
  auto vec_fun = [fun](const std::vector<array>& in) {
    return std::vector<array>{fun(in[0], in[1])};
  };
  return [vec_fun, in_axis_a, in_axis_b, out_axis](const array& a, const array& b) {
    return vmap_impl(vec_fun, {a, b}, {in_axis_a, in_axis_b}, {out_axis})[0];
  };
}

VecFn vmap(const VecFn& fun, const std::vector<int>& in_axes, const std::vector<int>& out_axes) {
  check_axes_agree(in_axes, out_axes);
  return [fun, in_axes, out_axes](const std::vector<array>& inputs) {
    return vmap_impl(fun, inputs, in_axes, out_axes);
  };
}

// ---- custom rules ----

VecFn custom_function(VecFn fun, std::optional<CustomVjpFn> fun_vjp,
                      std::optional<CustomJvpFn> fun_jvp, std::optional<CustomVmapFn> fun_vmap) {
  if (!fun_vjp && !fun_jvp && !fun_vmap) return fun;
  // Rules not given fall back on transforming `fun` itself.
  CustomVjpFn vjp_rule = fun_vjp ? std::move(*fun_vjp)
                                 : CustomVjpFn([fun](const std::vector<array>& primals,
                                                     const std::vector<array>& cotangents,
                                                     const std::vector<array>&) {
                                     return vjp(fun, primals, cotangents).second;
                                   });
  CustomJvpFn jvp_rule = fun_jvp ? std::move(*fun_jvp)
                                 : CustomJvpFn([fun](const std::vector<array>& primals,
                                                     const std::vector<array>& tangents,
                                                     const std::vector<int>& argnums) {
                                     std::vector<array> all;
                                     for (size_t i = 0, j = 0; i < primals.size(); ++i) {
                                       if (j < argnums.size() && argnums[j] == static_cast<int>(i)) {
                                         all.push_back(tangents[j++]);
                                       } else {
                                         all.push_back(zeros_like(primals[i]));
                                       }
                                     }
                                     return jvp(fun, primals, all).second;
                                   });
  CustomVmapFn vmap_rule =
      fun_vmap ? std::move(*fun_vmap)
               : CustomVmapFn([fun](const std::vector<array>& inputs, const std::vector<int>& axes) {
                   auto outs = vmap_impl(fun, inputs, axes, {});
                   return std::make_pair(outs, std::vector<int>(outs.size(), 0));
                 });
  return [fun, vjp_rule, jvp_rule, vmap_rule](const std::vector<array>& args) {
    auto outputs = fun(args);
    if (outputs.empty()) {
      throw std::invalid_argument("[custom_function] the function returned no outputs");
    }
    std::vector<array> inputs = args;
    inputs.insert(inputs.end(), outputs.begin(), outputs.end());
    std::vector<Shape> shapes;
    std::vector<Dtype> dtypes;
    for (const auto& o : outputs) {
      shapes.push_back(o.shape());
      dtypes.push_back(o.dtype());
    }
    auto prim = std::make_shared<CustomTransforms>(
        to_stream({}), static_cast<int>(outputs.size()), vjp_rule, jvp_rule, vmap_rule);
    return array::make_arrays(std::move(shapes), dtypes, prim, inputs);
  };
}

VecFn custom_vjp(VecFn fun, CustomVjpFn fun_vjp) {
  return custom_function(std::move(fun), std::move(fun_vjp), std::nullopt, std::nullopt);
}

VecFn checkpoint(VecFn fun) {
  // The backward pass traces `fun` again, so only the inputs and outputs are kept from the
  // forward pass, not its intermediates.
  auto rule = [fun](const std::vector<array>& primals, const std::vector<array>& cotangents,
                    const std::vector<array>&) { return vjp(fun, primals, cotangents).second; };
  return custom_vjp(fun, rule);
}

}  // namespace tessera
