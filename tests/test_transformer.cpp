#include <cmath>

#include <gtest/gtest.h>

#include "dtsim/hw/kernel_calls.hpp"
#include "dtsim/model/transformer.hpp"
#include "dtsim/model/workload_loader.hpp"
#include "dtsim/plan/layer_steps.hpp"
#include "dtsim/plan/memory.hpp"

#include <nlohmann/json.hpp>

using namespace dtsim;

namespace {

model::TransformerConfig gpt(std::int64_t h, std::int64_t a, std::int64_t s) {
  model::TransformerConfig c;
  c.name = "gpt";
  c.layers = 2;
  c.hidden = h;
  c.heads = a;
  c.kv_heads = a;
  c.ffn_hidden = 4 * h;
  c.vocab = 51200;
  c.seq_len = s;
  return c;
}

const model::Layer& first_block(const model::Graph& g) { return g.layers.at(1); }

plan::ResolvedStrategy strategy(int tp, bool flash) {
  plan::ResolvedStrategy r;
  r.s.tp = tp;
  r.s.mbs = 1;
  r.s.dtype = hw::Dtype::kFp16;
  r.s.flash_attention = flash;
  r.s.autocast = false;  // activations alone, without autocast's weight copies
  return r;
}

}  // namespace

// Narayanan et al. 2021: forward FLOPs of one GPT layer are 24·b·s·h² + 4·b·s²·h.
TEST(Transformer, GptLayerForwardFlopsMatchClosedForm) {
  const double h = 2048, s = 1024;
  model::Graph g = model::build_transformer(gpt(2048, 16, 1024));
  double flops = 0;
  for (const model::Op& op : first_block(g).ops) flops += op.forward_flops.value();
  EXPECT_DOUBLE_EQ(flops, 24 * s * h * h + 4 * s * s * h);
}

// Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h) bytes per layer, no parallelism, no recomputation.
TEST(Transformer, ActivationBytesPerLayerMatchKorthikanti) {
  const double h = 4096, a = 32, s = 2048;
  model::Graph g = model::build_transformer(gpt(4096, 32, 2048));
  double bytes = plan::saved_activation_bytes(first_block(g), strategy(1, false)).value();
  EXPECT_DOUBLE_EQ(bytes, s * h * (34 + 5 * a * s / h));
}

// With tensor parallelism t and no sequence parallelism: s·b·h·(10 + 24/t + 5·a·s/(h·t)).
TEST(Transformer, ActivationBytesUnderTensorParallelism) {
  const double h = 4096, a = 32, s = 2048, t = 8;
  model::Graph g = model::build_transformer(gpt(4096, 32, 2048));
  double bytes = plan::saved_activation_bytes(first_block(g), strategy(8, false)).value();
  EXPECT_DOUBLE_EQ(bytes, s * h * (10 + 24 / t + 5 * a * s / (h * t)));
}

TEST(Transformer, FlashAttentionKeepsNoScores) {
  const double h = 4096, s = 2048;
  model::Graph g = model::build_transformer(gpt(4096, 32, 2048));
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(first_block(g), strategy(1, true)).value(), 34 * s * h);
}

TEST(Transformer, Llama2SevenBillionParameters) {
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/llama2-7b.json");
  EXPECT_NEAR(g.parameter_count(), 6.738e9, 0.002e9);  // 6,738,415,616 in the released checkpoint
}

TEST(Transformer, MixtralCountsAllExpertsInParametersAndTopKInFlops) {
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/mixtral-8x7b.json");
  EXPECT_NEAR(g.parameter_count(), 46.70e9, 0.05e9);  // Mistral AI: 46.7B total
  double expert_flops = 0, attention_flops = 0;
  for (const model::Op& op : g.layers.at(1).ops) (op.expert ? expert_flops : attention_flops) += op.forward_flops.value();
  // top-2 of SwiGLU 4096 -> 14336: 2 experts x 3 GEMMs x 2·s·h·f
  EXPECT_DOUBLE_EQ(expert_flops, 2 * 3 * 2.0 * 4096 * 4096 * 14336);
}

// Qwen's model cards: Qwen3-30B-A3B 30.5B parameters, Qwen3-235B-A22B 235B
// (query heads of 128 wider than hidden/heads on both).
TEST(Transformer, Qwen3MoeWorkloadsHaveTheirPublishedSizes) {
  const std::string dir = std::string(DTSIM_SOURCE_DIR) + "/workloads/";
  EXPECT_NEAR(model::load_workload(dir + "qwen3-30b-a3b.json").parameter_count(), 30.5e9, 0.05e9);
  EXPECT_NEAR(model::load_workload(dir + "qwen3-235b-a22b.json").parameter_count(), 235.0e9, 0.5e9);
}

TEST(Transformer, ResNet50HasItsPublishedSize) {
  model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/resnet50.json");
  EXPECT_NEAR(g.parameter_count(), 25.56e6, 0.1e6);              // torchvision: 25,557,032
  EXPECT_NEAR(g.forward_flops_per_sample().value(), 8.2e9, 0.2e9);  // 4.1 GMACs
}

// With tensor and sequence parallelism and selective recomputation: s·b·h·34/t.
TEST(Transformer, ActivationBytesWithSequenceParallelAndSelectiveRecompute) {
  const double h = 4096, s = 2048, t = 8;
  model::Graph g = model::build_transformer(gpt(4096, 32, 2048));
  plan::ResolvedStrategy r = strategy(8, false);
  r.s.sp = true;
  r.s.recompute = plan::Recompute::kSelective;
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(first_block(g), r).value(), s * h * 34 / t);
  r.s.recompute = plan::Recompute::kNone;  // sequence parallel alone: s·b·h·(34 + 5·a·s/h)/t
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(first_block(g), r).value(), s * h * (34 + 5 * 32 * s / h) / t);
}

namespace {

// A linear layer of a layer graph reads its weights once per micro-batch,
// not once per sample (which made every MLP and CNN layer HBM-bound).
TEST(LayerGraph, LinearReadsItsWeightsOncePerMicroBatch) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"name": "one", "kind": "graph", "layers": [
      {"name": "fc", "ops": [{"name": "fc", "type": "linear", "in_features": 1024, "out_features": 4096}]}]})");
  const model::Graph g = model::load_workload_json(doc, "one.json", {});
  plan::ResolvedStrategy r;
  r.s.mbs = 64;
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps steps(g, r, kernels);
  const hw::OpWork forward = steps.work(g.layers[0].ops[0], false);
  EXPECT_DOUBLE_EQ(forward.bytes_moved.value(), (64.0 * (1024 + 4096) + 1024.0 * 4096) * 2);
  const hw::OpWork backward = steps.work(g.layers[0].ops[0], true);  // the weights again, and their gradient
  EXPECT_DOUBLE_EQ(backward.bytes_moved.value(), (2 * 64.0 * (1024 + 4096) + 2 * 1024.0 * 4096) * 2);
}

// One block of 8 heads over 2048 tokens (hidden 1024), for the attention tests.
model::Graph one_block(double attention_dropout) {
  model::TransformerConfig c;
  c.name = "t";
  c.layers = 1;
  c.hidden = 1024;
  c.heads = 8;
  c.kv_heads = 8;
  c.ffn_hidden = 4096;
  c.vocab = 1000;
  c.seq_len = 2048;
  c.attention_dropout = attention_dropout;
  return model::build_transformer(c);
}

// The block's attention op (QK^T, softmax, scores V).
const model::Op* attention_core(const model::Graph& g) {
  const model::Op* core = nullptr;
  for (const model::Op& op : g.layers[1].ops) core = op.kind == model::OpKind::kAttention ? &op : core;
  return core;
}

// The causal mask reaches the attention op, and fused attention's backward
// is 2.5x its forward; unfused attention streams its scores as the
// framework does: Megatron's fused softmax in fewer passes than PyTorch eager,
// with dropout's 1-byte mask written forward and read backward. Under the
// causal mask Megatron's softmax is its upper-triangular kernel: it reads a
// row up to the diagonal and writes it whole (1.5 passes), and its backward
// reads probabilities and gradient up to the diagonal (2 passes). Megatron
// with its fusions also copies the context into [s, b, h]
// (permute(2, 0, 1, 3).contiguous(): the output read and written) and,
// backward, joins the Q, K and V gradients in split's backward (a cat: all
// three read and written).
TEST(Transformer, AttentionCarriesTheMaskAndTheFrameworksPasses) {
  const model::Graph g = one_block(0.1);
  const model::Op* core = attention_core(g);
  ASSERT_NE(core, nullptr);
  EXPECT_TRUE(core->causal);
  plan::ResolvedStrategy pytorch_eager, megatron_core;  // LayerSteps keeps a reference: one each
  pytorch_eager.s.flash_attention = megatron_core.s.flash_attention = false;
  megatron_core.s.framework = plan::Framework::kMegatron;
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps eager(g, pytorch_eager, kernels);
  plan::LayerSteps megatron(g, megatron_core, kernels);
  const double scores = 8.0 * 2048 * 2048;
  const double scores_bytes = scores * 2, mask_bytes = scores;
  const double context = 2048.0 * 1024, context_copy = 2 * context * 2, qkv_cat = 2 * 3 * context * 2;
  EXPECT_DOUBLE_EQ(core->saved.output_elements, context);
  EXPECT_DOUBLE_EQ(core->saved.sharded_elements, 3 * context);
  EXPECT_DOUBLE_EQ(eager.work(*core, false).bytes_moved.value(), 8 * scores_bytes + mask_bytes);
  EXPECT_DOUBLE_EQ(megatron.work(*core, false).bytes_moved.value(), 3.5 * scores_bytes + mask_bytes + context_copy);
  // Megatron-LM without its fusions (2020): a masked_fill_ and PyTorch's softmax.
  plan::ResolvedStrategy unfused_megatron = megatron_core;
  unfused_megatron.s.fusions = false;
  plan::LayerSteps megatron_2020(g, unfused_megatron, kernels);
  EXPECT_DOUBLE_EQ(megatron_2020.work(*core, false).bytes_moved.value(), 6 * scores_bytes + mask_bytes);
  EXPECT_DOUBLE_EQ(megatron_2020.work(*core, true).bytes_moved.value(), 7 * scores_bytes + mask_bytes);
  EXPECT_DOUBLE_EQ(megatron.work(*core, true).bytes_moved.value(), 4 * scores_bytes + mask_bytes + qkv_cat);
  // The backward keeps the softmax output, the dropped-out probabilities and the mask.
  EXPECT_DOUBLE_EQ(core->saved.score_elements, 2 * scores);
  EXPECT_DOUBLE_EQ(core->saved.score_mask.value(), mask_bytes);
}

// Without attention dropout (Llama's attention_dropout 0.0) unfused attention
// runs no dropout: two passes fewer each way, no mask to stream or keep, and
// the softmax output serves both backward GEMMs.
TEST(Transformer, AttentionWithoutDropoutSkipsItsPassesAndMask) {
  const model::Graph g = one_block(0.0);
  const model::Op* core = attention_core(g);
  ASSERT_NE(core, nullptr);
  EXPECT_FALSE(core->score_dropout);
  plan::ResolvedStrategy pytorch_eager, megatron_core;
  pytorch_eager.s.flash_attention = megatron_core.s.flash_attention = false;
  megatron_core.s.framework = plan::Framework::kMegatron;
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps eager(g, pytorch_eager, kernels);
  plan::LayerSteps megatron(g, megatron_core, kernels);
  const double scores = 8.0 * 2048 * 2048;
  EXPECT_DOUBLE_EQ(eager.work(*core, false).bytes_moved.value(), 6 * 2 * scores);
  EXPECT_DOUBLE_EQ(eager.work(*core, true).bytes_moved.value(), 7 * 2 * scores);
  // The fused causal softmax alone: half the row read, all of it written;
  // backward, half of two rows read, all of one written (and the layout's
  // copies, which do not depend on dropout).
  const double context = 2048.0 * 1024;
  EXPECT_DOUBLE_EQ(megatron.work(*core, false).bytes_moved.value(), 1.5 * 2 * scores + 2 * context * 2);
  EXPECT_DOUBLE_EQ(megatron.work(*core, true).bytes_moved.value(), 2 * 2 * scores + 2 * 3 * context * 2);
  EXPECT_DOUBLE_EQ(core->saved.score_elements, scores);
  EXPECT_DOUBLE_EQ(core->saved.score_mask.value(), 0.0);
}

// Megatron-LM's bias+GeLU and bias+dropout+add kernels, and the chains of
// PyTorch kernels they replace (fusions=off): a bias add before the GeLU;
// bias, dropout and add as three kernels, or two without a bias.
TEST(Transformer, MegatronWithoutItsFusionsRunsTheirChains) {
  auto build = [](bool bias) {
    nlohmann::json doc = {{"name", "t"},  {"kind", "transformer"}, {"layers", 1},     {"hidden", 1024},
                          {"heads", 8},   {"vocab", 1000},         {"seq_len", 2048}, {"positions", "learned"}};
    doc["bias"] = bias;
    return model::load_workload_json(doc, "t.json", {});
  };
  auto find = [](const model::Graph& g, const std::string& name) -> const model::Op& {
    for (const model::Op& op : g.layers[1].ops) {
      if (op.name == name) return op;
    }
    throw std::runtime_error("no op " + name);
  };
  plan::ResolvedStrategy fused, unfused, eager;
  fused.s.framework = unfused.s.framework = plan::Framework::kMegatron;
  unfused.s.fusions = false;
  eager.s.fusions = false;  // PyTorch's own model: the key is Megatron-LM's
  std::vector<plan::Kernel> kernels;
  const model::Graph gpt = build(true), no_bias = build(false);
  for (const model::Graph* g : {&gpt, &no_bias}) {
    plan::LayerSteps with(*g, fused, kernels), without(*g, unfused, kernels), pytorch(*g, eager, kernels);
    const bool bias = g == &gpt;
    const model::Op& gelu = find(*g, "mlp.gelu");
    const model::Op& residual = find(*g, "mlp.dropout_add");
    for (bool backward : {false, true}) {
      const double gelu_fused = with.work(gelu, backward).bytes_moved.value();
      const double residual_fused = with.work(residual, backward).bytes_moved.value();
      // Forward only: the backwards move what the fused ones do.
      const double gelu_factor = backward || !bias ? 1.0 : 2.0;
      const double residual_factor = backward ? 1.0 : (bias ? 7.0 : 5.0) / 3.0;
      EXPECT_DOUBLE_EQ(without.work(gelu, backward).bytes_moved.value(), gelu_factor * gelu_fused);
      EXPECT_DOUBLE_EQ(without.work(residual, backward).bytes_moved.value(), residual_factor * residual_fused);
      EXPECT_DOUBLE_EQ(pytorch.work(residual, backward).bytes_moved.value(), residual_fused);
    }
    EXPECT_EQ(without.work(residual, false).eager_launches, bias ? 3 : 2);
  }
}

}  // namespace

namespace {

// PyTorch eager runs RMSNorm and RoPE as chains of element-wise kernels;
// Transformer Engine fuses each into one. ALiBi and learned positions rotate nothing.
TEST(Transformer, EagerRmsNormAndRotaryMoveMoreThanFusedOnes) {
  auto build = [](const char* positions) {
    const nlohmann::json doc = {{"name", "t"},   {"kind", "transformer"}, {"layers", 1},      {"hidden", 1024},
                                {"heads", 8},    {"vocab", 1000},         {"seq_len", 2048},  {"norm", "rmsnorm"},
                                {"mlp", "swiglu"}, {"positions", positions}};
    return model::load_workload_json(doc, "t.json", {});
  };
  auto find = [](const model::Graph& g, const std::string& name) -> const model::Op* {
    for (const model::Op& op : g.layers[1].ops) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  const model::Graph rope = build("rope");
  ASSERT_NE(find(rope, "attn.rope"), nullptr);
  EXPECT_EQ(find(build("alibi"), "attn.rope"), nullptr);
  EXPECT_EQ(find(build("learned"), "attn.rope"), nullptr);
  plan::ResolvedStrategy eager, fused;
  fused.s.framework = plan::Framework::kMegatron;
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps pytorch(rope, eager, kernels), megatron(rope, fused, kernels);
  const model::Op& norm = *find(rope, "attn.norm");
  const model::Op& rotary = *find(rope, "attn.rope");
  EXPECT_DOUBLE_EQ(pytorch.work(norm, false).bytes_moved.value(), 9 * megatron.work(norm, false).bytes_moved.value());
  EXPECT_DOUBLE_EQ(pytorch.work(rotary, true).bytes_moved.value(), 5 * megatron.work(rotary, true).bytes_moved.value());
}

}  // namespace

namespace {

// Transformer Engine's fused cross entropy reads the 16-bit logits twice and
// writes the gradient over them (3 elements a logit), scales it in place in
// the backward (2), and keeps that gradient (1 element) for the backward;
// the fp32 one moves 38 and 14 bytes a logit and keeps its fp32 softmax.
TEST(Transformer, FusedCrossEntropyMovesAndKeepsLessThanTheFp32One) {
  const nlohmann::json doc = {{"name", "t"}, {"kind", "transformer"}, {"layers", 1}, {"hidden", 1024},
                              {"heads", 8},  {"vocab", 1024},         {"seq_len", 2048}};
  const model::Graph g = model::load_workload_json(doc, "t.json", {});
  const model::Layer& head = g.layers.back();
  const model::Op* loss = nullptr;
  for (const model::Op& op : head.ops) loss = op.kind == model::OpKind::kLoss ? &op : loss;
  ASSERT_NE(loss, nullptr);
  plan::ResolvedStrategy unfused, fused;
  fused.s = plan::parse_strategy("loss=fused");
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps fp32(g, unfused, kernels), te(g, fused, kernels);
  const double logits = 2048.0 * 1024;
  EXPECT_DOUBLE_EQ(fp32.work(*loss, false).bytes_moved.value(), 38 * logits);
  EXPECT_DOUBLE_EQ(fp32.work(*loss, true).bytes_moved.value(), 14 * logits);
  EXPECT_DOUBLE_EQ(te.work(*loss, false).bytes_moved.value(), 6 * logits);
  EXPECT_DOUBLE_EQ(te.work(*loss, true).bytes_moved.value(), 4 * logits);
  const double kept_fp32 = plan::saved_activation_bytes(head, unfused).value();
  const double kept_fused = plan::saved_activation_bytes(head, fused).value();
  EXPECT_DOUBLE_EQ(kept_fp32 - kept_fused, 2 * logits);
}

}  // namespace

// A context-parallel rank runs seq_len/cp tokens through every GEMM: the
// shape's rows divide by cp as its FLOPs do, so that a forward is one GEMM
// and a backward the data and weight gradients' two (with the full sequence
// as rows, a cp = 2 forward was costed as one GEMM twice its size and the
// backward as a single forward-shaped one).
TEST(Transformer, ContextParallelGemmsRunTheRanksShareOfTheTokens) {
  const model::Graph g = model::build_transformer(gpt(4096, 32, 8192));
  for (int cp : {1, 2, 4}) {
    plan::ResolvedStrategy r = strategy(2, true);
    r.s.cp = cp;
    r.s.sp = true;
    r.s.mbs = 2;
    std::vector<plan::Kernel> kernels;
    plan::LayerSteps steps(g, r, kernels);
    for (const model::Op& op : first_block(g).ops) {
      if (op.kind != model::OpKind::kGemm) continue;
      const hw::OpWork forward = steps.work(op, false), backward = steps.work(op, true);
      EXPECT_EQ(forward.gemm.m, 2 * 8192 / cp) << op.name << " cp=" << cp;
      auto gemms = [](const hw::OpWork& w) {
        int n = 0;
        for (const hw::KernelCall& c : hw::kernel_calls(w)) n += c.family == hw::KernelFamily::kGemm ? 1 : 0;
        return n;
      };
      EXPECT_EQ(gemms(forward), 1) << op.name << " cp=" << cp;
      EXPECT_EQ(gemms(backward), 2) << op.name << " cp=" << cp;
    }
  }
}

// A rank's experts run one GEMM each over the tokens routed to them (the
// rank's tokens times top_k over its experts), under Megatron launched one
// by one over Transformer Engine's 4 streams: Qwen3-30B-A3B's 128 experts
// over ep 8 leave 16 a rank, 4096 x 8 / 16 = 2048 tokens each, in 4 groups
// of 4. An eager model's loop runs them one after another.
TEST(Transformer, ExpertsRunOneGemmEachOverTheirRoutedTokens) {
  const model::Graph g = model::load_workload(std::string(DTSIM_SOURCE_DIR) + "/workloads/qwen3-30b-a3b.json");
  plan::ResolvedStrategy r;
  r.s.framework = plan::Framework::kMegatron;
  r.s.ep = 8;
  r.s.mbs = 1;
  std::vector<plan::Kernel> kernels;
  plan::LayerSteps steps(g, r, kernels);
  int checked = 0;
  for (const model::Op& op : g.layers.at(1).ops) {
    if (!op.expert || op.kind != model::OpKind::kGemm) continue;
    const hw::OpWork forward = steps.work(op, false), backward = steps.work(op, true);
    EXPECT_EQ(forward.gemm.batch, 16) << op.name;
    EXPECT_EQ(forward.gemm.m, g.seq_len * 8 / 16) << op.name;
    // The same FLOPs as top_k GEMMs over the whole sequence.
    EXPECT_DOUBLE_EQ(2.0 * static_cast<double>(forward.gemm.m * forward.gemm.n * forward.gemm.k * forward.gemm.batch),
                     forward.flops.value());
    EXPECT_EQ(hw::kernel_calls(forward).size(), 4U) << op.name;
    EXPECT_EQ(hw::kernel_calls(backward).size(), 8U) << op.name;  // data and weight gradients
    EXPECT_EQ(hw::host_launches(forward), 16) << op.name;
    EXPECT_EQ(hw::host_launches(backward), 32) << op.name;
    ++checked;
  }
  EXPECT_EQ(checked, 2);  // gate_up and down
  plan::ResolvedStrategy eager = r;
  eager.s.framework = plan::Framework::kPytorch;
  std::vector<plan::Kernel> eager_kernels;
  plan::LayerSteps eager_steps(g, eager, eager_kernels);
  for (const model::Op& op : g.layers.at(1).ops) {
    if (op.expert && op.kind == model::OpKind::kGemm) {
      EXPECT_EQ(hw::kernel_calls(eager_steps.work(op, false)).size(), 16U);
    }
  }
}

// Transformer Engine under FP8 keeps each linear layer's input as its FP8
// cast (1 byte): of Korthikanti et al.'s 34·s·h, the QKV, projection and
// fc1 inputs (2 each) become 1 and fc2's (8) 4; FlashAttention's output
// (2·s·h), which the 16-bit projection kept as its input, is kept apart.
TEST(Transformer, Fp8KeepsTheLinearLayersInputsInOneByte) {
  const double h = 4096, a = 32, s = 2048;
  model::Graph g = model::build_transformer(gpt(4096, 32, 2048));
  plan::ResolvedStrategy flash = strategy(1, true), unfused = strategy(1, false);
  flash.s.dtype = unfused.s.dtype = hw::Dtype::kFp8;
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(first_block(g), flash).value(), 29 * s * h);
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(first_block(g), unfused).value(), s * h * (27 + 5 * a * s / h));
  // The output layer is Megatron's own, in 16 bits.
  plan::ResolvedStrategy bf16 = strategy(1, true);
  bf16.s.dtype = hw::Dtype::kBf16;
  EXPECT_DOUBLE_EQ(plan::saved_activation_bytes(g.layers.back(), flash).value(),
                   plan::saved_activation_bytes(g.layers.back(), bf16).value());
}
