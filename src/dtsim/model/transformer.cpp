#include "dtsim/model/transformer.hpp"

namespace dtsim::model {
namespace {

using core::Bytes;
using core::Flops;

// Forward and backward figures of one GEMM. Backward runs two GEMMs of the
// same size (input gradient and weight gradient), hence twice the work.
Op gemm_op(std::string name, TensorSplit split, GemmShape shape) {
  Op op;
  op.name = std::move(name);
  op.kind = OpKind::kGemm;
  op.split = split;
  op.gemm = shape;
  // In doubles: the largest shapes a file may give overflow a 64-bit product.
  const double b = static_cast<double>(shape.batch), m = static_cast<double>(shape.m), n = static_cast<double>(shape.n),
               k = static_cast<double>(shape.k);
  double flops = 2.0 * b * m * n * k;
  op.forward_flops = Flops(flops);
  op.backward_flops = Flops(2 * flops);
  // Activations in and out per sample; the weight (k x n) once per micro-batch.
  const double moved = b * (m * k + m * n);
  op.forward_elements_moved = moved;
  op.backward_elements_moved = 2 * moved;
  op.weight_elements_moved = b * k * n;
  return op;
}

Op memory_op(std::string name, OpKind kind, TensorSplit split, double forward_moved) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.split = split;
  op.forward_elements_moved = forward_moved;
  op.backward_elements_moved = 2 * forward_moved;
  return op;
}

Op norm_op(std::string name, const TransformerConfig& c) {
  double sh = static_cast<double>(c.seq_len * c.hidden);
  Op op = memory_op(std::move(name), OpKind::kNorm, TensorSplit::kReplicated, 2 * sh);
  op.params = !c.norm_params ? 0.0 : static_cast<double>(c.norm == NormKind::kLayerNorm ? 2 * c.hidden : c.hidden);
  if (c.norm == NormKind::kRmsNorm) op.pattern = Op::Pattern::kRmsNorm;
  op.saved.replicated_elements = sh;
  return op;
}

double bias(const TransformerConfig& c, std::int64_t width) {
  return c.linear_bias ? static_cast<double>(width) : 0.0;
}

// The s x s scores of unfused attention, all heads of a sample: what its
// passes move and what its backward keeps (the softmax output; with
// dropout also the dropped-out probabilities and their 1-byte mask, which
// Korthikanti et al.'s 5as^2b counts). Without dropout the softmax output
// serves both backward GEMMs.
void set_scores(Op& core, const TransformerConfig& c, double scores) {
  const bool dropout = c.attention_dropout > 0;
  core.score_elements = scores;
  core.score_dropout = dropout;
  core.saved.score_elements = (dropout ? 2 : 1) * scores;
  core.saved.score_mask = Bytes(dropout ? scores : 0);
}

// The residual's dropout and add, after the output projection's bias where
// the linear layers have one: one fused kernel under Megatron-LM.
Op::Pattern residual_pattern(const TransformerConfig& c) {
  return c.linear_bias ? Op::Pattern::kBiasDropoutAdd : Op::Pattern::kDropoutAdd;
}

// Multi-head latent attention (DeepSeek-V2/V3): queries through an optional
// low-rank bottleneck, keys and values from one compressed latent of
// kv_lora_rank (plus a shared rotary key of qk_rope_dim), both normalised.
// The down projections are replicated over tp ranks (Megatron-Core's MLA),
// the up projections column-parallel.
void add_latent_projections(Layer& layer, const TransformerConfig& c) {
  const std::int64_t s = c.seq_len, h = c.hidden, a = c.heads, qk = c.head_size();
  const double sh = static_cast<double>(s * h);
  if (c.q_lora_rank > 0) {
    Op down = gemm_op("attn.q_down", TensorSplit::kReplicated, {s, c.q_lora_rank, h, 1});
    down.params = static_cast<double>(h * c.q_lora_rank + c.q_lora_rank);  // and its norm
    down.saved.replicated_elements = sh;
    down.tp_gather_before = true;
    layer.ops.push_back(down);
    Op up = gemm_op("attn.q_up", TensorSplit::kSharded, {s, a * qk, c.q_lora_rank, 1});
    up.params = static_cast<double>(c.q_lora_rank * a * qk);
    up.saved.replicated_elements = static_cast<double>(s * c.q_lora_rank);
    layer.ops.push_back(up);
  } else {
    Op q = gemm_op("attn.q", TensorSplit::kSharded, {s, a * qk, h, 1});
    q.params = static_cast<double>(h * a * qk);
    q.saved.replicated_elements = sh;
    q.tp_gather_before = true;
    layer.ops.push_back(q);
  }
  const std::int64_t latent = c.kv_lora_rank + c.qk_rope_dim;
  Op kv_down = gemm_op("attn.kv_down", TensorSplit::kReplicated, {s, latent, h, 1});
  kv_down.params = static_cast<double>(h * latent + c.kv_lora_rank);  // and its norm
  kv_down.saved.replicated_elements = c.q_lora_rank > 0 ? sh : 0.0;
  layer.ops.push_back(kv_down);
  const std::int64_t nope = qk - c.qk_rope_dim;
  Op kv_up = gemm_op("attn.kv_up", TensorSplit::kSharded, {s, a * (nope + c.v_head_dim), c.kv_lora_rank, 1});
  kv_up.params = static_cast<double>(c.kv_lora_rank * a * (nope + c.v_head_dim));
  kv_up.saved.replicated_elements = static_cast<double>(s * c.kv_lora_rank);
  layer.ops.push_back(kv_up);
}

void add_attention(Layer& layer, const TransformerConfig& c, std::int64_t window) {
  const bool latent = c.kv_lora_rank > 0;
  const std::int64_t s = c.seq_len, h = c.hidden, a = c.heads;
  const std::int64_t head_dim = c.head_size();
  const std::int64_t q_width = a * head_dim;  // hidden, unless the model sets its own head size
  // Keys and values: GQA's shared heads, or MLA's per-head keys and values of their own sizes.
  const std::int64_t kv_width = latent ? a * (head_dim + c.v_head_dim) : 2 * c.kv_heads * head_dim;
  const std::int64_t out_width = latent ? a * c.v_head_dim : q_width;
  const double sh = static_cast<double>(s * h), sq = static_cast<double>(s * q_width);

  layer.ops.push_back(norm_op("attn.norm", c));

  if (latent) {
    add_latent_projections(layer, c);
  } else {
    Op qkv = gemm_op("attn.qkv", TensorSplit::kSharded, {s, q_width + kv_width, h, 1});
    qkv.params = static_cast<double>(h * (q_width + kv_width)) +
                 (c.linear_bias || c.qkv_bias ? static_cast<double>(q_width + kv_width) : 0.0);
    qkv.saved.replicated_elements = sh;
    qkv.tp_gather_before = true;
    qkv.linear_widths = {q_width, kv_width / 2, kv_width / 2};
    layer.ops.push_back(qkv);
  }

  if (c.qk_norm_params > 0) {
    Op qk_norm = memory_op("attn.qk_norm", OpKind::kNorm, TensorSplit::kSharded,
                           2.0 * static_cast<double>(s * (q_width + kv_width / 2)));
    qk_norm.params = static_cast<double>(c.qk_norm_params);
    qk_norm.saved.sharded_elements = static_cast<double>(s * (q_width + kv_width / 2));
    layer.ops.push_back(qk_norm);
  }

  if (c.rotary && !c.learned_positions) {
    // Rotary embedding of the queries and keys: as one fused kernel, each
    // element read and written once; the planner scales it for frameworks
    // that run it as separate element-wise kernels. MLA rotates only its
    // rope part: qk_rope_dim per query head and one shared key.
    const double rotated = latent ? static_cast<double>(s * (a + 1) * c.qk_rope_dim)
                                  : static_cast<double>(s * (q_width + kv_width / 2));
    Op rope = memory_op("attn.rope", OpKind::kElementwise, TensorSplit::kSharded, 2 * rotated);
    rope.pattern = Op::Pattern::kRotary;
    layer.ops.push_back(rope);
  }

  // Q·K^T and scores·V: two batched GEMMs per head (GQA shares K and V, not
  // FLOPs). MLA's are of its query-key and value head sizes: their mean
  // gives the same FLOPs.
  const std::int64_t core_dim = latent ? (head_dim + c.v_head_dim) / 2 : head_dim;
  Op core = gemm_op("attn.core", TensorSplit::kSharded, {s, s, core_dim, 2 * a});
  core.kind = OpKind::kAttention;
  core.causal = c.causal;
  core.window = window;
  const double scores = static_cast<double>(a) * static_cast<double>(s) * static_cast<double>(s);
  // Q, K, V in and the output out; the per-head "weights" of gemm_op are activations here.
  core.forward_elements_moved = 4.0 * sq;
  core.backward_elements_moved = 8.0 * sq;
  core.weight_elements_moved = 0;
  core.saved.sharded_elements = sq + static_cast<double>(s * kv_width);  // Q, K, V
  core.saved.output_elements = static_cast<double>(s * out_width);
  set_scores(core, c, scores);
  layer.ops.push_back(core);

  Op proj = gemm_op("attn.proj", TensorSplit::kSharded, {s, h, out_width, 1});
  proj.params = static_cast<double>(out_width * h) + bias(c, h);
  proj.saved.sharded_elements = static_cast<double>(s * out_width);
  proj.tp_reduce_after = true;
  layer.ops.push_back(proj);
  if (c.post_norms) layer.ops.push_back(norm_op("attn.post_norm", c));

  Op residual = memory_op("attn.dropout_add", OpKind::kElementwise, TensorSplit::kReplicated, 3 * sh);
  residual.saved.replicated_mask = Bytes(sh);
  residual.pattern = residual_pattern(c);
  layer.ops.push_back(residual);
}

// Cross-attention of an encoder-decoder's decoder block (T5): queries from the
// decoder's tokens, keys and values projected from the encoder's output. The
// encoder's output is one tensor every decoder block reads; it is saved once,
// by the encoder's final norm, not per block.
void add_cross_attention(Layer& layer, const TransformerConfig& c, std::int64_t encoder_tokens) {
  const std::int64_t s = c.seq_len, e = encoder_tokens, h = c.hidden, a = c.heads, d = c.head_size();
  const std::int64_t width = a * d;
  const double sw = static_cast<double>(s * width), ew = static_cast<double>(e * width);
  layer.ops.push_back(norm_op("xattn.norm", c));
  Op q = gemm_op("xattn.q", TensorSplit::kSharded, {s, width, h, 1});
  q.params = static_cast<double>(h * width);
  q.saved.replicated_elements = static_cast<double>(s * h);
  q.tp_gather_before = true;
  layer.ops.push_back(q);
  Op kv = gemm_op("xattn.kv", TensorSplit::kSharded, {e, 2 * width, h, 1});
  kv.params = static_cast<double>(2 * h * width);
  kv.tp_gather_before = true;
  kv.tokens = e;
  layer.ops.push_back(kv);
  // Not square: every decoder query sees every encoder key, none masked.
  Op core = gemm_op("xattn.core", TensorSplit::kSharded, {s, e, d, 2 * a});
  core.kind = OpKind::kAttention;
  core.causal = false;
  const double scores = static_cast<double>(a) * static_cast<double>(s) * static_cast<double>(e);
  core.forward_elements_moved = 2.0 * sw + 2.0 * ew;  // Q and K, V in; the output out
  core.backward_elements_moved = 2.0 * core.forward_elements_moved;
  core.weight_elements_moved = 0;
  core.saved.sharded_elements = sw + 2.0 * ew;
  core.saved.output_elements = sw;
  set_scores(core, c, scores);
  layer.ops.push_back(core);
  Op proj = gemm_op("xattn.proj", TensorSplit::kSharded, {s, h, width, 1});
  proj.params = static_cast<double>(width * h);
  proj.saved.sharded_elements = sw;
  proj.tp_reduce_after = true;
  layer.ops.push_back(proj);
  const double sh = static_cast<double>(s * h);
  Op residual = memory_op("xattn.dropout_add", OpKind::kElementwise, TensorSplit::kReplicated, 3 * sh);
  residual.saved.replicated_mask = Bytes(sh);
  residual.pattern = residual_pattern(c);
  layer.ops.push_back(residual);
}

// T5's relative position bias: the buckets x heads table expanded into a
// heads x queries x keys bias, once per stack, that every block adds to its scores.
Op position_bias(const TransformerConfig& c) {
  const double bias = static_cast<double>(c.heads) * static_cast<double>(c.seq_len) * static_cast<double>(c.seq_len);
  Op op = memory_op("attn.position_bias", OpKind::kElementwise, TensorSplit::kSharded, bias);
  op.params = static_cast<double>(c.position_buckets * c.heads);
  return op;
}

// An MLP of width f: a dense one, a routed expert (`expert`: its parameters
// counted once per expert, its work `copies` times, once per expert a token
// goes to) or the shared experts.
void add_mlp(Layer& layer, const TransformerConfig& c, std::int64_t f, bool expert, double copies,
             const std::string& prefix = "mlp") {
  const std::int64_t s = c.seq_len, h = c.hidden;
  const double sh = static_cast<double>(s * h), sf = static_cast<double>(s * f);
  const bool swiglu = c.mlp == MlpKind::kSwiGlu;
  const std::int64_t up_width = swiglu ? 2 * f : f;
  const double param_copies = expert ? static_cast<double>(c.experts) : 1.0;

  auto scaled = [copies](Op op) {
    op.forward_flops = op.forward_flops * copies;
    op.backward_flops = op.backward_flops * copies;
    op.forward_elements_moved *= copies;
    op.backward_elements_moved *= copies;
    op.saved.sharded_elements *= copies;
    op.saved.replicated_elements *= copies;
    return op;
  };

  Op up = gemm_op(prefix + (swiglu ? ".gate_up" : ".fc1"), TensorSplit::kSharded, {s, up_width, h, 1});
  up.params = (static_cast<double>(h * up_width) + bias(c, up_width)) * param_copies;
  up.saved.replicated_elements = sh;
  up.tp_gather_before = true;
  up.expert = expert;
  if (swiglu) up.linear_widths = {f, f};
  layer.ops.push_back(scaled(up));

  Op act = memory_op(prefix + (swiglu ? ".swiglu" : ".gelu"), OpKind::kElementwise, TensorSplit::kSharded,
                     swiglu ? 3 * sf : 2 * sf);
  act.saved.sharded_elements = swiglu ? 2 * sf : sf;
  act.expert = expert;
  if (c.linear_bias) act.pattern = Op::Pattern::kBiasActivation;
  layer.ops.push_back(scaled(act));

  Op down = gemm_op(prefix + (swiglu ? ".down" : ".fc2"), TensorSplit::kSharded, {s, h, f, 1});
  down.params = (static_cast<double>(f * h) + bias(c, h)) * param_copies;
  down.saved.sharded_elements = sf;
  down.tp_reduce_after = true;
  down.expert = expert;
  layer.ops.push_back(scaled(down));
}

// A block; with encoder_tokens > 0, a decoder block that also attends to the encoder's output.
Layer block(const TransformerConfig& c, std::int64_t index, std::int64_t encoder_tokens = 0) {
  Layer layer;
  layer.name = "block." + std::to_string(index);
  layer.role = LayerRole::kBlock;
  const bool global = c.global_every > 0 && (index + 1) % c.global_every == 0;
  // Each stack computes its bias in its first block: the encoder's block 0, the decoder's block `layers`.
  if (c.position_buckets > 0 && (index == 0 || index == c.layers)) layer.ops.push_back(position_bias(c));
  add_attention(layer, c, c.window > 0 && !global ? c.window : 0);
  if (encoder_tokens > 0) add_cross_attention(layer, c, encoder_tokens);
  if (!c.shared_norm) layer.ops.push_back(norm_op("mlp.norm", c));
  if (c.experts > 0 && index < c.first_dense) {
    add_mlp(layer, c, c.dense_ffn, false, 1.0);  // DeepSeek's first blocks keep a dense MLP
  } else if (c.experts > 0) {
    Op router = gemm_op("moe.router", TensorSplit::kReplicated, {c.seq_len, c.experts, c.hidden, 1});
    router.params = static_cast<double>(c.hidden * c.experts);
    layer.ops.push_back(router);
    add_mlp(layer, c, c.ffn_hidden, true, static_cast<double>(c.top_k));
    if (c.shared_ffn > 0) add_mlp(layer, c, c.shared_ffn, false, 1.0, "moe.shared");
  } else {
    add_mlp(layer, c, c.ffn_hidden, false, 1.0);
  }
  if (c.post_norms) layer.ops.push_back(norm_op("mlp.post_norm", c));
  Op residual = memory_op("mlp.dropout_add", OpKind::kElementwise, TensorSplit::kReplicated,
                          3.0 * static_cast<double>(c.seq_len * c.hidden));
  residual.saved.replicated_mask = Bytes(static_cast<double>(c.seq_len * c.hidden));
  residual.pattern = residual_pattern(c);
  layer.ops.push_back(residual);
  return layer;
}

Layer embedding(const TransformerConfig& c) {
  const double sh = static_cast<double>(c.seq_len * c.hidden);
  Layer layer{"embedding", LayerRole::kEmbedding, {}};
  // Vocab-parallel lookup: each tp rank holds vocab/tp rows and the partial results are summed.
  Op lookup = memory_op("embedding.lookup", OpKind::kEmbedding, TensorSplit::kSharded, 2 * sh);
  lookup.params = static_cast<double>(c.vocab * c.hidden);
  lookup.tp_reduce_after = true;
  layer.ops.push_back(lookup);
  if (c.learned_positions) {
    Op positions = memory_op("embedding.positions", OpKind::kElementwise, TensorSplit::kReplicated, 3 * sh);
    positions.params = sh + static_cast<double>(c.type_vocab * c.hidden);  // BERT adds its segments here too
    layer.ops.push_back(positions);
  }
  if (c.mlm_head) layer.ops.push_back(norm_op("embedding.norm", c));  // BERT normalises its embeddings
  return layer;
}

Layer head(const TransformerConfig& c) {
  const std::int64_t s = c.seq_len;
  Layer layer{"head", LayerRole::kHead, {}};
  if (c.mlm_head) {
    // BERT: post-norm blocks end in their own norm; the masked-LM head
    // transforms (dense, GeLU, norm) before the tied decoder and its bias.
    Op transform = gemm_op("head.transform", TensorSplit::kReplicated, {s, c.hidden, c.hidden, 1});
    transform.params = static_cast<double>(c.hidden * c.hidden + c.hidden + c.vocab);
    transform.saved.replicated_elements = static_cast<double>(s * c.hidden);
    layer.ops.push_back(transform);
  }
  layer.ops.push_back(norm_op("head.norm", c));
  Op logits = gemm_op("head.logits", TensorSplit::kSharded, {s, c.vocab, c.hidden, 1});
  // Tied embeddings share the lookup table's parameters; they are counted once, there.
  logits.params = c.tied_embeddings ? 0.0 : static_cast<double>(c.vocab * c.hidden);
  logits.saved.replicated_elements = static_cast<double>(s * c.hidden);
  logits.tp_gather_before = true;
  layer.ops.push_back(logits);
  // Cross entropy as Megatron-LM (vocab_parallel_cross_entropy(logits.float()))
  // and Hugging Face (logits.float()) run it: in fp32 over every logit. Its
  // elements are the logits, which the planner turns into bytes for each
  // pass (plan/layer_steps.cpp, bytes_moved); the
  // fp32 softmax kept for the backward is 4 bytes a logit, two 16-bit elements.
  Op loss = memory_op("head.cross_entropy", OpKind::kLoss, TensorSplit::kSharded, static_cast<double>(s * c.vocab));
  loss.saved.sharded_elements = 2.0 * static_cast<double>(s * c.vocab);
  layer.ops.push_back(loss);
  return layer;
}

// The decoder of an encoder-decoder: its own tokens, a causal mask, and its
// ops sized by its tokens where the model's seq_len (the encoder's) would be wrong.
TransformerConfig decoder_of(const TransformerConfig& encoder) {
  TransformerConfig d = encoder;
  d.seq_len = encoder.decoder_seq_len;
  d.causal = true;
  return d;
}

void mark_tokens(Layer& layer, std::int64_t tokens) {
  layer.tokens = tokens;
  for (Op& op : layer.ops) {
    if (op.tokens == 0) op.tokens = tokens;
  }
}

void add_encoder_decoder(Graph& graph, const TransformerConfig& encoder) {
  const TransformerConfig decoder = decoder_of(encoder);
  Layer& embed = graph.layers.back();
  Op lookup = memory_op("embedding.decoder_lookup", OpKind::kEmbedding, TensorSplit::kSharded,
                        2.0 * static_cast<double>(decoder.seq_len * decoder.hidden));
  lookup.tp_reduce_after = true;  // the same vocab-parallel table: no parameters of its own
  lookup.tokens = decoder.seq_len;
  embed.ops.push_back(lookup);
  for (std::int64_t i = 0; i < encoder.layers; ++i) graph.layers.push_back(block(encoder, i));
  graph.layers.back().ops.push_back(norm_op("encoder.final_norm", encoder));
  for (std::int64_t i = encoder.layers; i < encoder.layers + encoder.decoder_layers; ++i) {
    graph.layers.push_back(block(decoder, i, encoder.seq_len));
    mark_tokens(graph.layers.back(), decoder.seq_len);
  }
  graph.layers.push_back(head(decoder));
  mark_tokens(graph.layers.back(), decoder.seq_len);
}

}  // namespace

Graph build_transformer(const TransformerConfig& config) {
  Graph graph;
  graph.name = config.name;
  graph.source = config.source;
  graph.seq_len = config.seq_len;
  graph.seq_len_source = config.seq_len_source;
  graph.transformer = TransformerShape{config.layers + config.decoder_layers,
                                       config.hidden,
                                       config.heads,
                                       config.kv_heads,
                                       config.ffn_hidden,
                                       config.vocab,
                                       config.experts,
                                       config.top_k,
                                       config.head_size(),
                                       config.decoder_layers,
                                       config.decoder_seq_len,
                                       config.attention_dropout,
                                       config.expert_groups,
                                       config.group_top_k};
  graph.layers.reserve(static_cast<std::size_t>(config.layers + config.decoder_layers) + 2);
  graph.layers.push_back(embedding(config));
  if (config.decoder_layers > 0) {
    add_encoder_decoder(graph, config);
    return graph;
  }
  for (std::int64_t i = 0; i < config.layers; ++i) graph.layers.push_back(block(config, i));
  graph.layers.push_back(head(config));
  return graph;
}

}  // namespace dtsim::model
