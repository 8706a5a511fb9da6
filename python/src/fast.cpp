// tessera.core.fast: include/tessera/fast.h with MLX's mlx.core.fast signatures.
#include "convert.h"

#include <string>

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
      "      (there is no fused kernel). Default: ``False``.\n\n"
      "Returns:\n"
      "    array: The attention output.\n");
}

}  // namespace tessera::python
