// tessera.core.fast: include/tessera/fast.h with MLX's mlx.core.fast signatures.
#include "convert.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::python {

void init_fast(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("fast", "Fused neural-network operations.");

  m.def(
      "rms_norm",
      [](const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
        return fast::rms_norm(x, weight, eps, s);
      },
      "x"_a, "weight"_a.none(), "eps"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Root-mean-square normalisation over the last axis.\n\n"
      "Args:\n"
      "    x (array): Input array.\n"
      "    weight (array or None): Per-feature scale (``x.shape[-1]`` values),\n"
      "      or ``None`` for none.\n"
      "    eps (float): Added to the mean square for stability.\n\n"
      "Returns:\n"
      "    array: The normalised array.\n");
  m.def(
      "layer_norm",
      [](const array& x, const std::optional<array>& weight, const std::optional<array>& bias,
         float eps, StreamOrDevice s) { return fast::layer_norm(x, weight, bias, eps, s); },
      "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Layer normalisation over the last axis.\n\n"
      "Args:\n"
      "    x (array): Input array.\n"
      "    weight (array or None): Per-feature scale, or ``None``.\n"
      "    bias (array or None): Per-feature offset, or ``None``.\n"
      "    eps (float): Added to the variance for stability.\n\n"
      "Returns:\n"
      "    array: The normalised array.\n");
  m.def(
      "rope",
      [](const array& a, int dims, bool traditional, std::optional<float> base, float scale,
         const std::variant<int, array>& offset, const std::optional<array>& freqs,
         StreamOrDevice s) {
        if (auto* n = std::get_if<int>(&offset)) {
          return fast::rope(a, dims, traditional, base, scale, *n, freqs, s);
        }
        return fast::rope(a, dims, traditional, base, scale, std::get<array>(offset), freqs, s);
      },
      "a"_a, "dims"_a, nb::kw_only(), "traditional"_a, "base"_a.none(), "scale"_a, "offset"_a,
      "freqs"_a = nb::none(), "stream"_a = nb::none(),
      "Rotary positional embedding of the first ``dims`` features.\n\n"
      "Args:\n"
      "    a (array): Input array, ``(..., T, D)``.\n"
      "    dims (int): Number of features to rotate.\n"
      "    traditional (bool): Rotate adjacent pairs instead of the two halves.\n"
      "    base (float or None): Base of the frequencies; ``None`` when\n"
      "      ``freqs`` is given.\n"
      "    scale (float): Scale of the positions.\n"
      "    offset (int or array): Position of the first token.\n"
      "    freqs (array, optional): Explicit frequencies (``dims // 2`` values).\n\n"
      "Returns:\n"
      "    array: The embedded array.\n");
  m.def(
      "scaled_dot_product_attention",
      [](const array& q, const array& k, const array& v, float scale,
         const std::variant<std::monostate, std::string, array>& mask,
         const std::optional<array>& sinks, bool force_fused, StreamOrDevice s) {
        if (auto* mode = std::get_if<std::string>(&mask)) {
          if (*mode != "causal") {
            throw std::invalid_argument(
                "[scaled_dot_product_attention] mask string must be "
                "'causal', not '" +
                *mode + "'.");
          }
          return fast::scaled_dot_product_attention(q, k, v, scale, *mode, std::nullopt, sinks,
                                                    force_fused, s);
        }
        if (auto* arr = std::get_if<array>(&mask)) {
          return fast::scaled_dot_product_attention(q, k, v, scale, "", *arr, sinks, force_fused,
                                                    s);
        }
        return fast::scaled_dot_product_attention(q, k, v, scale, "", std::nullopt, sinks,
                                                  force_fused, s);
      },
      "q"_a, "k"_a, "v"_a, nb::kw_only(), "scale"_a, "mask"_a = nb::none(), "sinks"_a = nb::none(),
      "force_fused"_a = false, "stream"_a = nb::none(),
      "Multi-head attention, ``softmax(scale * q @ k.T + mask) @ v``.\n\n"
      "Keys and values may have fewer heads than the queries (grouped-query\n"
      "attention).\n\n"
      "Args:\n"
      "    q (array): Queries, ``(B, N_q, T_q, D)``.\n"
      "    k (array): Keys, ``(B, N_kv, T_kv, D)``.\n"
      "    v (array): Values, ``(B, N_kv, T_kv, D)``.\n"
      "    scale (float): Scale of the scores.\n"
      "    mask (str or array, optional): ``'causal'``, or a boolean mask\n"
      "      (False excludes) or an additive one. Default: ``None``.\n"
      "    sinks (array, optional): One extra logit per query head that enters\n"
      "      the softmax but carries no value.\n"
      "    force_fused (bool, optional): Accepted for MLX compatibility; unused\n"
      "      (the one kernel is always used). Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The attention output.\n");

  m.def(
      "cross_entropy",
      [](const array& logits, const array& targets, StreamOrDevice s) {
        return fast::cross_entropy(logits, targets, s);
      },
      "logits"_a, "targets"_a, nb::kw_only(), "stream"_a = nb::none(),
      "Cross entropy loss with class indices as targets: ``logsumexp(logits, axis=-1) - "
      "logits[..., target]``, in float32, with the shape of ``targets`` (the shape of ``logits`` "
      "without its last axis). Targets in ``[-C, C)``; negative ones count from the end, others "
      "give NaN. One kernel, forward and gradient, without an (N, C) temporary.");
  m.def(
      "gated_delta_update",
      [](const array& q, const array& k, const array& v, const array& gamma, const array& beta,
         const std::optional<array>& initial_state, const std::optional<array>& mask,
         StreamOrDevice s) {
        if (q.ndim() != 4 || k.shape() != q.shape() || v.ndim() != 4) {
          throw std::invalid_argument(
              "[gated_delta_update] q and k must be [B, T, Hk, Dk] and v [B, T, Hv, Dv]; got q " +
              shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " +
              shape_str(v.shape()));
        }
        const int B = q.shape(0), T = q.shape(1), Hk = q.shape(2), Dk = q.shape(3);
        const int Hv = v.shape(2), Dv = v.shape(3);
        if (v.shape(0) != B || v.shape(1) != T || Hv % Hk != 0) {
          throw std::invalid_argument("[gated_delta_update] v " + shape_str(v.shape()) +
                                      " must be [B, T, Hv, Dv] with Hv a multiple of q's " +
                                      std::to_string(Hk) + " heads");
        }
        const Shape per_head{B, T, Hv};
        if (beta.shape() != per_head || (gamma.shape() != per_head &&
                                         gamma.shape() != Shape{B, T, Hv, Dk})) {
          throw std::invalid_argument(
              "[gated_delta_update] gamma must be [B, T, Hv] or [B, T, Hv, Dk] and beta "
              "[B, T, Hv]; got " + shape_str(gamma.shape()) + " and " +
              shape_str(beta.shape()));
        }
        const Shape state_shape{B, Hv, Dv, Dk};
        if (initial_state && initial_state->shape() != state_shape) {
          throw std::invalid_argument(
              "[gated_delta_update] initial_state must be [B, Hv, Dv, Dk] = " +
              shape_str(state_shape) + ", got " +
              shape_str(initial_state->shape()));
        }
        if (mask && mask->shape() != Shape{B, T}) {
          throw std::invalid_argument("[gated_delta_update] mask must be [B, T], got " +
                                      shape_str(mask->shape()));
        }
        // The recurrence step by step in float32 (composed for now): with each head's state S
        // (Dv x Dk), S = S * g; S += outer(beta * (v - S k), k); y = S q.
        const int rep = Hv / Hk;
        auto heads = [&](const array& x) {
          const array f = astype(x, float32, s);
          return rep == 1 ? f : repeat(f, rep, 2, s);
        };
        const array qf = heads(q), kf = heads(k), vf = astype(v, float32, s);
        const array gf = astype(gamma, float32, s), bf = astype(beta, float32, s);
        array S = initial_state ? astype(*initial_state, float32, s)
                                : zeros(state_shape, float32, s);
        std::vector<array> ys;
        for (int t = 0; t < T; ++t) {
          const array qt = take(qf, t, 1, s), kt = take(kf, t, 1, s);   // [B, Hv, Dk]
          array g = take(gf, t, 1, s);                                   // [B, Hv(, Dk)]
          g = gamma.ndim() == 3 ? expand_dims(g, {2, 3}, s) : expand_dims(g, 2, s);
          array next = multiply(S, g, s);
          const array kv = squeeze(matmul(next, expand_dims(kt, -1, s), s), -1, s);  // [B, Hv, Dv]
          const array delta = multiply(subtract(take(vf, t, 1, s), kv, s),
                                       expand_dims(take(bf, t, 1, s), -1, s), s);
          next = add(next, multiply(expand_dims(delta, -1, s), expand_dims(kt, 2, s), s), s);
          array y = squeeze(matmul(next, expand_dims(qt, -1, s), s), -1, s);
          if (mask) {
            const array keep =
                reshape(not_equal(take(*mask, t, 1, s), array(0), s), {B, 1, 1, 1}, s);
            next = where(keep, next, S, s);
            y = where(squeeze(keep, -1, s), y, zeros_like(y, s), s);
          }
          S = next;
          ys.push_back(y);
        }
        Dtype out = promote_types(q.dtype(), k.dtype());
        if (out == float64) out = float32;
        const array y = T > 0 ? astype(stack(ys, 1, s), out, s) : zeros({B, 0, Hv, Dv}, out, s);
        return std::vector<array>{y, S};
      },
      "q"_a, "k"_a, "v"_a, "gamma"_a, "beta"_a, "initial_state"_a = nb::none(),
      "mask"_a = nb::none(), "stream"_a = nb::none(),
      "Gated delta network forward pass. q, k: [B, T, Hk, Dk]; v: [B, T, Hv, Dv] (Hv a multiple "
      "of Hk; q and k heads are repeated); gamma: decay in linear space, [B, T, Hv] or "
      "[B, T, Hv, Dk]; beta: update rates [B, T, Hv]; initial_state: [B, Hv, Dv, Dk]; mask: "
      "[B, T], nonzero where a step counts (a masked step keeps the state and outputs 0). "
      "Returns [y, state]: y [B, T, Hv, Dv] and the final state [B, Hv, Dv, Dk] in float32.");

  // Custom GPU kernels: MLX's CPU build has them and says there is no back-end to run them
  // (a Metal kernel when it is called, a CUDA kernel when it is made), as here.
  m.def(
      "metal_kernel",
      [](const std::string& name, const std::vector<std::string>&,
         const std::vector<std::string>&, const std::string&, const std::string&, bool, bool,
         std::optional<nb::dict> options) {
        for (auto [key, value] : options.value_or(nb::dict())) {
          const std::string k = nb::cast<std::string>(nb::str(key));
          if (k != "math_mode") {
            throw std::invalid_argument("[metal_kernel] Unknown compile option `" + k +
                                        "`; the one option is math_mode");
          }
          const std::string mode = nb::cast<std::string>(nb::str(value));
          if (mode != "safe" && mode != "relaxed" && mode != "fast") {
            throw std::invalid_argument("[metal_kernel] Expected math_mode to be 'safe', "
                                        "'relaxed', or 'fast', got '" + mode + "'");
          }
        }
        return nb::cpp_function(
            [name](nb::kwargs) -> nb::object {
              throw std::runtime_error("[metal_kernel] No Metal back-end: the kernel '" + name +
                                       "' cannot run in Tessera (a CPU build); write it with "
                                       "tessera.core ops (compile fuses elementwise chains)");
            },
            nb::name("metal_kernel"));
      },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a, "header"_a = "",
      "ensure_row_contiguous"_a = true, "atomic_outputs"_a = false,
      "compile_options"_a = nb::none(),
      "A jit-compiled custom Metal kernel defined from a source string. Made as MLX makes it; "
      "calling it raises RuntimeError: there is no Metal back-end here.");
  auto no_cuda = [](const char* what) {
    throw std::runtime_error(std::string("[") + what + "] No CUDA back-end: Tessera's CUDA "
                             "back-end is not built; write the kernel with tessera.core ops");
  };
  m.def(
      "cuda_kernel",
      [no_cuda](const std::string&, const std::vector<std::string>&,
                const std::vector<std::string>&, const std::string&, const std::string&, bool,
                int) -> nb::object { no_cuda("cuda_kernel"); return nb::none(); },
      "name"_a, "input_names"_a, "output_names"_a, "source"_a, "header"_a = "",
      "ensure_row_contiguous"_a = true, "shared_memory"_a = 0,
      "A jit-compiled custom CUDA kernel defined from a source string: raises RuntimeError here "
      "(no CUDA back-end), as MLX's CPU build.");
  m.def(
      "precompiled_cuda_kernel",
      [no_cuda](nb::kwargs) -> nb::object { no_cuda("cuda_kernel"); return nb::none(); },
      "Run a precompiled CUDA kernel defined from PTX or cubin: raises RuntimeError here (no "
      "CUDA back-end), as MLX's CPU build.");
}

}  // namespace tessera::python
