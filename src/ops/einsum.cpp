// einsum and einsum_path: subscripts parsed NumPy's way (implicit output, "..." broadcast dims,
// repeated labels as diagonals), a contraction order chosen by NumPy's greedy rule (so
// einsum_path returns the path numpy.einsum_path does), and each pairwise contraction run as one
// batched matmul (or, for integer operands, a broadcast product and a sum). Composite: no
// primitive of its own.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ops/utils.h"
#include "tessera/einsum.h"
#include "tessera/linalg.h"
#include "tessera/ops.h"

namespace tessera {

namespace {

using Labels = std::string;
using LabelSet = std::set<char>;

struct Parsed {
  std::vector<Labels> inputs;
  Labels output;
  std::map<char, int64_t> sizes;
};

// Ellipsis dims become the characters 1, 2, ... (never letters), right-aligned.
Parsed parse(const std::string& subscripts, const std::vector<array>& operands) {
  std::string spec;
  for (char c : subscripts) {
    if (c != ' ') spec += c;
  }
  const size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    size_t q = lhs.find(',', p);
    terms.push_back(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (terms.size() != operands.size()) {
    throw std::invalid_argument("[einsum] the subscripts name " + std::to_string(terms.size()) +
                                " operands but " + std::to_string(operands.size()) +
                                " were given");
  }
  Parsed r;
  int ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string& t = terms[i];
    const size_t dots = t.find("...");
    Labels labels;
    const int named = static_cast<int>(t.size()) - (dots == std::string::npos ? 0 : 3);
    const int nd = static_cast<int>(operands[i].ndim());
    if (dots == std::string::npos ? named != nd : named > nd) {
      throw std::invalid_argument("[einsum] operand " + std::to_string(i) + " has " +
                                  std::to_string(nd) + " dims but subscripts '" + t + "'");
    }
    const int broadcast = nd - named;
    ellipsis_dims = std::max(ellipsis_dims, dots == std::string::npos ? 0 : broadcast);
    for (size_t k = 0; k < t.size(); ++k) {
      if (k == dots) {
        for (int e = broadcast; e > 0; --e) labels += static_cast<char>(e);
        k += 2;
        continue;
      }
      const char c = t[k];
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        throw std::invalid_argument(std::string("[einsum] invalid subscript character '") + c +
                                    "' in '" + subscripts + "'");
      }
      labels += c;
    }
    for (int d = 0; d < nd; ++d) {
      const char c = labels[d];
      const int64_t n = operands[i].shape(d);
      auto [it, fresh] = r.sizes.emplace(c, n);
      if (!fresh && it->second != n) {
        if (it->second == 1) {
          it->second = n;
        } else if (n != 1) {
          throw std::invalid_argument(std::string("[einsum] subscript '") +
                                      (c < 32 ? std::string("...") : std::string(1, c)) +
                                      "' has sizes " + std::to_string(it->second) + " and " +
                                      std::to_string(n));
        }
      }
    }
    r.inputs.push_back(labels);
  }
  if (arrow != std::string::npos) {
    const std::string out = spec.substr(arrow + 2);
    for (size_t k = 0; k < out.size(); ++k) {
      if (out.compare(k, 3, "...") == 0) {
        for (int e = ellipsis_dims; e > 0; --e) r.output += static_cast<char>(e);
        k += 2;
        continue;
      }
      if (!r.sizes.count(out[k])) {
        throw std::invalid_argument(std::string("[einsum] output subscript '") + out[k] +
                                    "' appears in no input");
      }
      if (r.output.find(out[k]) != std::string::npos) {
        throw std::invalid_argument(std::string("[einsum] output subscript '") + out[k] +
                                    "' appears twice");
      }
      r.output += out[k];
    }
  } else {
    // Implicit: broadcast dims, then the labels seen exactly once, alphabetically.
    for (int e = ellipsis_dims; e > 0; --e) r.output += static_cast<char>(e);
    std::map<char, int> count;
    for (const auto& in : r.inputs) {
      for (char c : in) {
        if (c >= 32) ++count[c];
      }
    }
    for (auto [c, k] : count) {
      if (k == 1) r.output += c;
    }
  }
  return r;
}

int64_t size_of(const LabelSet& s, const std::map<char, int64_t>& sizes) {
  int64_t n = 1;
  for (char c : s) n *= sizes.at(c);
  return n;
}

LabelSet set_of(const Labels& l) { return LabelSet(l.begin(), l.end()); }

struct Contraction {
  std::pair<int64_t, int64_t> sort;  // (-removed size, flops)
  std::vector<int> positions;
  std::vector<LabelSet> sets;  // the operand sets after it (the new one last)
};

// numpy.einsum_path's bookkeeping for contracting `positions` of `sets`.
void find_contraction(const std::vector<int>& positions, const std::vector<LabelSet>& sets,
                      const LabelSet& output, LabelSet* result, std::vector<LabelSet>* remaining,
                      LabelSet* removed, LabelSet* contracted) {
  LabelSet remain = output;
  contracted->clear();
  remaining->clear();
  for (int i = 0; i < static_cast<int>(sets.size()); ++i) {
    if (std::find(positions.begin(), positions.end(), i) != positions.end()) {
      contracted->insert(sets[i].begin(), sets[i].end());
    } else {
      remaining->push_back(sets[i]);
      remain.insert(sets[i].begin(), sets[i].end());
    }
  }
  result->clear();
  std::set_intersection(remain.begin(), remain.end(), contracted->begin(), contracted->end(),
                        std::inserter(*result, result->end()));
  removed->clear();
  std::set_difference(contracted->begin(), contracted->end(), result->begin(), result->end(),
                      std::inserter(*removed, removed->end()));
  remaining->push_back(*result);
}

int64_t flops(const LabelSet& contracted, bool inner, int terms,
              const std::map<char, int64_t>& sizes) {
  return size_of(contracted, sizes) * (std::max(1, terms - 1) + (inner ? 1 : 0));
}

// NumPy's greedy path (numpy/core/einsumfunc.py: _greedy_path), memory limit the largest input
// or output.
std::vector<std::vector<int>> greedy_path(const Parsed& p, int64_t* naive_cost,
                                          int64_t* path_cost) {
  std::vector<LabelSet> sets;
  for (const auto& l : p.inputs) sets.push_back(set_of(l));
  const LabelSet output = set_of(p.output);
  int64_t memory_limit = size_of(output, p.sizes);
  for (const auto& s : sets) memory_limit = std::max(memory_limit, size_of(s, p.sizes));
  LabelSet all;
  for (const auto& s : sets) all.insert(s.begin(), s.end());
  {
    std::vector<int> every(sets.size());
    std::iota(every.begin(), every.end(), 0);
    LabelSet r, rm, con;
    std::vector<LabelSet> rest;
    find_contraction(every, sets, output, &r, &rest, &rm, &con);
    *naive_cost = flops(con, !rm.empty(), static_cast<int>(sets.size()), p.sizes);
  }
  *path_cost = 0;
  const int n = static_cast<int>(sets.size());
  if (n == 1) return {{0}};
  if (n == 2 || all == output) {
    std::vector<int> every(n);
    std::iota(every.begin(), every.end(), 0);
    return {every};
  }
  auto consider = [&](const std::vector<int>& pos, const std::vector<LabelSet>& cur,
                      std::vector<Contraction>* out) {
    LabelSet r, rm, con;
    std::vector<LabelSet> rest;
    find_contraction(pos, cur, output, &r, &rest, &rm, &con);
    const int64_t new_size = size_of(r, p.sizes);
    if (new_size > memory_limit) return;
    int64_t old = 0;
    for (int q : pos) old += size_of(cur[q], p.sizes);
    const int64_t cost = flops(con, !rm.empty(), static_cast<int>(pos.size()), p.sizes);
    if (*path_cost + cost > *naive_cost) return;
    out->push_back({{-(old - new_size), cost}, pos, rest});
  };
  std::vector<std::vector<int>> path;
  std::vector<Contraction> known;
  std::vector<std::vector<int>> candidates;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) candidates.push_back({i, j});
  }
  for (int iteration = 0; iteration < n - 1; ++iteration) {
    for (const auto& pos : candidates) {
      LabelSet common;
      std::set_intersection(sets[pos[0]].begin(), sets[pos[0]].end(), sets[pos[1]].begin(),
                            sets[pos[1]].end(), std::inserter(common, common.end()));
      if (common.empty()) continue;  // outer products only when nothing else is left
      consider(pos, sets, &known);
    }
    if (known.empty()) {
      for (int i = 0; i < static_cast<int>(sets.size()); ++i) {
        for (int j = i + 1; j < static_cast<int>(sets.size()); ++j) consider({i, j}, sets, &known);
      }
      if (known.empty()) {
        std::vector<int> every(sets.size());
        std::iota(every.begin(), every.end(), 0);
        path.push_back(every);
        break;
      }
    }
    const Contraction best = *std::min_element(
        known.begin(), known.end(), [](const Contraction& a, const Contraction& b) { return a.sort < b.sort; });
    // Keep the other candidates that do not involve the contracted pair, renumbered.
    const int bx = best.positions[0], by = best.positions[1];
    std::vector<Contraction> kept;
    for (auto c : known) {
      const int x = c.positions[0], y = c.positions[1];
      if (x == bx || x == by || y == bx || y == by) continue;
      c.sets.erase(c.sets.begin() + (by - (by > x) - (by > y)));
      c.sets.erase(c.sets.begin() + (bx - (bx > x) - (bx > y)));
      c.sets.insert(c.sets.end() - 1, best.sets.back());
      c.positions = {x - (x > bx) - (x > by), y - (y > bx) - (y > by)};
      kept.push_back(std::move(c));
    }
    known = std::move(kept);
    sets = best.sets;
    const int fresh = static_cast<int>(sets.size()) - 1;
    candidates.clear();
    for (int i = 0; i < fresh; ++i) candidates.push_back({i, fresh});
    path.push_back(best.positions);
    *path_cost += best.sort.second;
  }
  return path;
}

// x with its repeated labels reduced to diagonals and the labels in `drop` summed out.
std::pair<array, Labels> simplify(array x, Labels labels, const LabelSet& keep, StreamOrDevice s) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < labels.size() && !again; ++i) {
      const size_t j = labels.find(labels[i], i + 1);
      if (j == std::string::npos) continue;
      x = diagonal(x, 0, static_cast<int>(i), static_cast<int>(j), s);
      const char c = labels[i];
      labels.erase(j, 1);
      labels.erase(i, 1);
      labels += c;
      again = true;
    }
  }
  std::vector<int> axes;
  Labels rest;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (keep.count(labels[i])) {
      rest += labels[i];
    } else {
      axes.push_back(static_cast<int>(i));
    }
  }
  if (!axes.empty()) x = sum(x, axes, false, s);
  return {x, rest};
}

// x's dims in the order of `to` (labels of x, all present), size-1 dims broadcast to `sizes`.
array arrange(const array& x, const Labels& from, const Labels& to,
              const std::map<char, int64_t>& sizes, StreamOrDevice s) {
  std::vector<int> perm;
  for (char c : to) perm.push_back(static_cast<int>(from.find(c)));
  array y = transpose(x, perm, s);
  Shape full;
  for (char c : to) full.push_back(static_cast<int>(sizes.at(c)));
  return y.shape() == full ? y : broadcast_to(y, full, s);
}

// The contraction of two operands into the labels `result` (a set; returned in the order used).
std::pair<array, Labels> contract(const array& a_in, const Labels& la_in, const array& b_in,
                                  const Labels& lb_in, const LabelSet& result,
                                  const std::map<char, int64_t>& sizes, StreamOrDevice s) {
  // Labels only one side has and the result does not are summed first.
  LabelSet keep_a = result, keep_b = result;
  keep_a.insert(lb_in.begin(), lb_in.end());
  keep_b.insert(la_in.begin(), la_in.end());
  auto [a, la] = simplify(a_in, la_in, keep_a, s);
  auto [b, lb] = simplify(b_in, lb_in, keep_b, s);
  Labels batch, contracted, a_free, b_free;
  for (char c : la) {
    const bool in_b = lb.find(c) != std::string::npos, kept = result.count(c) > 0;
    if (in_b && kept) batch += c;
    else if (in_b) contracted += c;
    else a_free += c;
  }
  for (char c : lb) {
    if (la.find(c) == std::string::npos) b_free += c;
  }
  auto prod = [&](const Labels& l) {
    int64_t n = 1;
    for (char c : l) n *= sizes.at(c);
    return static_cast<int>(n);
  };
  array a2 = arrange(a, la, batch + a_free + contracted, sizes, s);
  array b2 = arrange(b, lb, batch + contracted + b_free, sizes, s);
  Shape out_shape;
  for (char c : batch + a_free + b_free) out_shape.push_back(static_cast<int>(sizes.at(c)));
  const Dtype dt = promote_types(a2.dtype(), b2.dtype());
  array out = issubdtype(dt, inexact)
                  ? matmul(reshape(astype(a2, dt, s), {prod(batch), prod(a_free), prod(contracted)}, s),
                           reshape(astype(b2, dt, s), {prod(batch), prod(contracted), prod(b_free)}, s), s)
                  : sum(multiply(reshape(a2, {prod(batch), prod(a_free), prod(contracted), 1}, s),
                                 reshape(b2, {prod(batch), 1, prod(contracted), prod(b_free)}, s), s),
                        2, false, s);
  return {reshape(out, out_shape, s), batch + a_free + b_free};
}

std::string label_text(const Labels& l) {
  std::string out;
  for (char c : l) out += c < 32 ? std::string(".") : std::string(1, c);
  return out;
}

}  // namespace

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands) {
  if (operands.empty()) throw std::invalid_argument("[einsum_path] needs at least one operand");
  Parsed p = parse(subscripts, operands);
  int64_t naive = 0, optimized = 0;
  auto path = greedy_path(p, &naive, &optimized);
  std::ostringstream os;
  os << "  Complete contraction:  ";
  for (size_t i = 0; i < p.inputs.size(); ++i) os << (i ? "," : "") << label_text(p.inputs[i]);
  os << "->" << label_text(p.output) << "\n"
     << "         Naive FLOP count:  " << naive << "\n"
     << "     Optimized FLOP count:  " << (path.size() == 1 ? naive : optimized) << "\n";
  return {path, os.str()};
}

array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s) {
  if (operands.empty()) throw std::invalid_argument("[einsum] needs at least one operand");
  Parsed p = parse(subscripts, operands);
  int64_t naive = 0, optimized = 0;
  auto path = greedy_path(p, &naive, &optimized);
  std::vector<array> ops = operands;
  std::vector<Labels> labels = p.inputs;
  const LabelSet output = set_of(p.output);
  for (const auto& step : path) {
    // The labels still needed after this step: the output's and the other operands'.
    LabelSet needed = output;
    for (int i = 0; i < static_cast<int>(labels.size()); ++i) {
      if (std::find(step.begin(), step.end(), i) == step.end()) {
        needed.insert(labels[i].begin(), labels[i].end());
      }
    }
    array acc = ops[step[0]];
    Labels acc_l = labels[step[0]];
    if (step.size() == 1) {
      std::tie(acc, acc_l) = simplify(acc, acc_l, needed, s);
    }
    for (size_t k = 1; k < step.size(); ++k) {
      // Within a step of several operands, keep what the rest of the step still needs too.
      LabelSet keep = needed;
      for (size_t r = k + 1; r < step.size(); ++r) keep.insert(labels[step[r]].begin(), labels[step[r]].end());
      std::tie(acc, acc_l) = contract(acc, acc_l, ops[step[k]], labels[step[k]], keep, p.sizes, s);
    }
    std::vector<int> sorted = step;
    std::sort(sorted.rbegin(), sorted.rend());
    for (int i : sorted) {
      ops.erase(ops.begin() + i);
      labels.erase(labels.begin() + i);
    }
    ops.push_back(acc);
    labels.push_back(acc_l);
  }
  auto [result, result_l] = simplify(ops.back(), labels.back(), output, s);
  return arrange(result, result_l, p.output, p.sizes, s);
}

}  // namespace tessera
