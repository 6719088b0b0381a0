#pragma once
/// Shape checks shared by the workload JSON and Hugging Face loaders.
#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/transformer.hpp"

namespace dtsim::model {

/// Throws an InputError at the offending field of `reader` when the shape is
/// impossible (heads not dividing hidden, kv_heads not dividing heads, top_k > experts).
void check_transformer(const TransformerConfig& c, const core::JsonReader& reader,
                       const char* heads_key = "heads", const char* kv_heads_key = "kv_heads");

/// A dropout probability at `key` (0 <= p < 1), or `fallback` where the
/// file leaves it out or writes null.
double dropout_or(core::JsonReader& reader, const char* key, double fallback);

}  // namespace dtsim::model
