// Front end of Compiled (compiled.h): the program text, and derivatives and batching through the
// unfused steps, so that a fused graph composes with the transforms as the ops it replaced.
#include "tessera/primitives/compiled.h"

#include <sstream>

#include "tessera/ops.h"
#include "tessera/transforms.h"

namespace tessera {

Compiled::Compiled(Stream s, std::vector<Dtype> input_dtypes, std::vector<FusedStep> steps,
                   std::vector<int> outputs)
    : Primitive(s),
      input_dtypes_(std::move(input_dtypes)),
      steps_(std::move(steps)),
      outputs_(std::move(outputs)) {
  std::ostringstream os;
  os << "in";
  for (Dtype d : input_dtypes_) os << ' ' << dtype_name(d);
  for (auto& st : steps_) {
    os << ";" << st.functor << ':' << dtype_name(st.dtype) << '(';
    for (int a : st.args) os << a << ',';
    os << ')';
  }
  os << ";out";
  for (int o : outputs_) os << ' ' << o;
  program_ = os.str();
}

void Compiled::print(std::ostream& os) const {
  os << name() << '(';
  for (size_t i = 0; i < steps_.size(); ++i) os << (i ? "," : "") << steps_[i].primitive->name();
  os << ")";
}

bool Compiled::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const Compiled*>(&other);
  return o && o->program_ == program_;
}

std::vector<Dtype> Compiled::output_dtypes() const {
  std::vector<Dtype> d;
  for (int o : outputs_) d.push_back(steps_[o].dtype);
  return d;
}

// Every input has the outputs' shape (the fused steps are elementwise on one shape).
std::vector<Shape> Compiled::output_shapes(const std::vector<array>& inputs) {
  return std::vector<Shape>(outputs_.size(), inputs.at(0).shape());
}

std::vector<array> Compiled::unfused(const std::vector<array>& inputs) const {
  std::vector<array> values;
  values.reserve(steps_.size());
  for (auto& st : steps_) {
    std::vector<array> args;
    for (int a : st.args) args.push_back(a < 0 ? inputs[-a - 1] : values[a]);
    Shape shape = args[0].shape();
    values.emplace_back(std::move(shape), st.dtype, st.primitive, std::move(args));
  }
  std::vector<array> outs;
  for (int o : outputs_) outs.push_back(values[o]);
  return outs;
}

CompiledReduce::CompiledReduce(Stream s, std::vector<Dtype> input_dtypes,
                               std::vector<FusedStep> steps, int output,
                               std::shared_ptr<Primitive> reduce, FusedReduce op,
                               std::vector<int> axes)
    : Compiled(s, std::move(input_dtypes), std::move(steps), {output}),
      reduce_(std::move(reduce)),
      op_(op),
      axes_(std::move(axes)) {
  program_ += op_ == FusedReduce::sum ? ";reduce sum" : op_ == FusedReduce::max ? ";reduce max"
                                                                                 : ";reduce min";
  for (int a : axes_) program_ += " " + std::to_string(a);
}

void CompiledReduce::print(std::ostream& os) const {
  Compiled::print(os);
  os << "+";
  reduce_->print(os);
}

std::vector<Shape> CompiledReduce::output_shapes(const std::vector<array>& inputs) {
  Shape out = inputs.at(0).shape();
  for (int a : axes_) out[a] = 1;
  return {out};
}

std::vector<array> CompiledReduce::unfused(const std::vector<array>& inputs) const {
  array v = Compiled::unfused(inputs)[0];
  Shape shape = v.shape();
  for (int a : axes_) shape[a] = 1;
  return {array(std::move(shape), v.dtype(), reduce_, {v})};
}

CompiledRows::CompiledRows(Stream s, std::vector<Dtype> input_dtypes, std::vector<FusedStep> steps,
                           std::vector<int> outputs, std::string kinds, std::string levels,
                           std::string roles, std::vector<int> axes)
    : Compiled(s, std::move(input_dtypes), std::move(steps), std::move(outputs)),
      kinds_(std::move(kinds)),
      levels_(std::move(levels)),
      roles_(std::move(roles)),
      axes_(std::move(axes)) {
  program_ += ";rows " + kinds_ + " " + levels_ + " " + roles_ + " axes";
  for (int a : axes_) program_ += " " + std::to_string(a);
}

std::pair<Shape, Shape> CompiledRows::row_shapes(const std::vector<array>& inputs) const {
  Shape row = inputs.at(roles_.find('d')).shape();
  Shape per_row = row;
  for (int a : axes_) per_row.at(static_cast<size_t>(a)) = 1;
  return {std::move(row), std::move(per_row)};
}

std::vector<Shape> CompiledRows::output_shapes(const std::vector<array>& inputs) {
  auto [row, per_row] = row_shapes(inputs);
  std::vector<Shape> shapes;
  for (int o : outputs_) shapes.push_back(levels_[static_cast<size_t>(o)] == 'R' ? row : per_row);
  return shapes;
}

std::vector<array> CompiledRows::unfused(const std::vector<array>& inputs) const {
  auto [row, per_row] = row_shapes(inputs);
  std::vector<array> values;
  values.reserve(steps_.size());
  for (size_t i = 0; i < steps_.size(); ++i) {
    const FusedStep& st = steps_[i];
    std::vector<array> args;
    for (int a : st.args) args.push_back(a < 0 ? inputs[-a - 1] : values[a]);
    const Shape& shape = levels_[i] == 'R' ? row : per_row;
    if (kinds_[i] == 'b') {
      values.push_back(broadcast_to(args[0], shape, st.primitive->stream()));
    } else {
      values.emplace_back(shape, st.dtype, st.primitive, std::move(args));
    }
  }
  std::vector<array> outs;
  for (int o : outputs_) outs.push_back(values[o]);
  return outs;
}

std::vector<array> Compiled::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  auto fn = [this](const std::vector<array>& in) { return unfused(in); };
  auto grads = tessera::vjp(fn, primals, cotangents).second;
  std::vector<array> res;
  for (int a : argnums) res.push_back(grads[a]);
  return res;
}

std::vector<array> Compiled::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums) {
  std::vector<array> all;
  for (auto& p : primals) all.push_back(zeros_like(p));
  for (size_t i = 0; i < argnums.size(); ++i) all[argnums[i]] = tangents[i];
  auto fn = [this](const std::vector<array>& in) { return unfused(in); };
  return tessera::jvp(fn, primals, all).second;
}

std::pair<std::vector<array>, std::vector<int>> Compiled::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  auto fn = [this](const std::vector<array>& in) { return unfused(in); };
  std::vector<int> out_axes(outputs_.size(), 0);
  return {tessera::vmap(fn, axes, out_axes)(inputs), out_axes};
}

}  // namespace tessera
