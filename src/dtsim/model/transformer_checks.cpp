#include "dtsim/model/transformer_checks.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace dtsim::model {

void check_transformer(const TransformerConfig& c, const core::JsonReader& r, const char* heads_key,
                       const char* kv_heads_key) {
  if (c.head_dim == 0 && c.hidden % c.heads != 0) {
    r.fail(heads_key, fmt::format("expected a divisor of hidden size {}, got {}", c.hidden, c.heads));
  }
  // A head size of its own may not make the projections wider than any model's (products stay exact).
  if (c.head_dim > 0 && c.heads * std::max(c.head_dim, c.v_head_dim) > kMaxHidden) {
    r.fail(heads_key, fmt::format("expected heads x head size of at most {}, got {} x {}", kMaxHidden, c.heads,
                                  std::max(c.head_dim, c.v_head_dim)));
  }
  if (c.heads % c.kv_heads != 0) {
    r.fail(kv_heads_key, fmt::format("expected a divisor of {} attention heads, got {}", c.heads, c.kv_heads));
  }
  if (c.experts < 0 || c.experts > kMaxExperts) {
    r.fail("experts", fmt::format("expected 0 (dense) to {} experts, got {}", kMaxExperts, c.experts));
  }
  if (c.experts > 0 && (c.top_k < 1 || c.top_k > c.experts)) {
    r.fail("top_k", fmt::format("expected 1 to {} experts per token, got {}", c.experts, c.top_k));
  }
}

double dropout_or(core::JsonReader& r, const char* key, double fallback) {
  if (!r.has(key) || r.raw().at(key).is_null()) return fallback;
  const double p = r.number(key);
  if (!(p >= 0 && p < 1)) r.fail(key, fmt::format("expected a probability from 0 up to 1 (not 1), got {}", p));
  return p;
}

}  // namespace dtsim::model
