// `"kind": "graph"`: an explicit layer list, for models that are not
// transformers (CNNs). Each op names its type and shape; FLOPs, parameters,
// traffic and saved activations follow from the shape, so a file cannot state
// FLOPs that disagree with its shapes.
#include <utility>

#include <fmt/format.h>

#include "dtsim/core/json_reader.hpp"
#include "dtsim/model/transformer.hpp"
#include "dtsim/model/workload_loader.hpp"

namespace dtsim::model {
namespace {

using core::Flops;

void set_gemm(Op& op, GemmShape shape) {
  op.kind = OpKind::kGemm;
  op.gemm = shape;
  double flops = 2.0 * static_cast<double>(shape.m * shape.n * shape.k);
  op.forward_flops = Flops(flops);
  op.backward_flops = Flops(2 * flops);
  // Activations per sample; the weights once per micro-batch (reading them per
  // sample made every linear layer HBM-bound).
  const double moved = static_cast<double>(shape.m * shape.k + shape.m * shape.n);
  op.forward_elements_moved = moved;
  op.backward_elements_moved = 2 * moved;
  op.weight_elements_moved = static_cast<double>(shape.k * shape.n);
}

void set_memory(Op& op, OpKind kind, double moved, double saved) {
  op.kind = kind;
  op.forward_elements_moved = moved;
  op.backward_elements_moved = 2 * moved;
  op.saved.replicated_elements = saved;
}

// Bounds that keep every product below (kernel^2 x in x out, channels x
// size^2) exact in 64 bits, far past any published network.
constexpr std::int64_t kMaxChannels = 1 << 20;
constexpr std::int64_t kMaxKernel = 64;
constexpr std::int64_t kMaxImageSize = 1 << 16;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;

// An op as it is read, with the elements per sample it reads and writes
// (what full recomputation keeps of a layer it starts; what a pipeline stage
// ending with it sends on).
struct ReadOp {
  Op op;
  double input_elements = 0;
  double output_elements = 0;
};

ReadOp read_op(core::JsonReader& r) {
  Op op;
  double input_elements = 0, output_elements = 0;
  op.name = r.string("name");
  op.split = TensorSplit::kReplicated;
  std::string type = r.choice("type", {"conv", "linear", "norm", "elementwise", "pool"});
  if (type == "conv") {
    std::int64_t in = r.count("in_channels", kMaxChannels), out = r.count("out_channels", kMaxChannels);
    std::int64_t kernel = r.count("kernel", kMaxKernel), stride = r.count("stride", kMaxKernel);
    std::int64_t size = r.count("input_size", kMaxImageSize);
    std::int64_t out_size = (size + stride - 1) / stride;
    // Convolution as the implicit GEMM cuDNN runs: output pixels x out channels x (kernel^2 x in channels).
    set_gemm(op, {out_size * out_size, out, kernel * kernel * in, 1});
    op.params = static_cast<double>(kernel * kernel * in * out);
    op.saved.replicated_elements = static_cast<double>(in * size * size);
    input_elements = op.saved.replicated_elements;
    output_elements = static_cast<double>(out * out_size * out_size);
  } else if (type == "linear") {
    std::int64_t in = r.count("in_features", kMaxChannels), out = r.count("out_features", kMaxChannels);
    set_gemm(op, {1, out, in, 1});
    op.params = static_cast<double>(in * out + out);
    op.saved.replicated_elements = static_cast<double>(in);
    input_elements = op.saved.replicated_elements;
    output_elements = static_cast<double>(out);
  } else if (type == "norm") {
    std::int64_t channels = r.count("channels", kMaxChannels), size = r.count("input_size", kMaxImageSize);
    double elements = static_cast<double>(channels * size * size);
    set_memory(op, OpKind::kNorm, 2 * elements, elements);
    op.params = static_cast<double>(2 * channels);
    input_elements = output_elements = elements;
  } else if (type == "elementwise") {
    double elements = static_cast<double>(r.count("elements", kMaxElements));
    set_memory(op, OpKind::kElementwise, 3 * elements, 0);
    input_elements = output_elements = elements;
  } else {
    std::int64_t channels = r.count("channels", kMaxChannels), in = r.count("input_size", kMaxImageSize);
    std::int64_t out = r.count("output_size", kMaxImageSize);
    set_memory(op, OpKind::kElementwise, static_cast<double>(channels * (in * in + out * out)), 0);
    input_elements = static_cast<double>(channels * in * in);
    output_elements = static_cast<double>(channels * out * out);
  }
  r.finish();
  return {std::move(op), input_elements, output_elements};
}

}  // namespace

Graph load_layer_graph(const nlohmann::json& document, const std::string& file) {
  core::JsonReader r(document, file);
  r.ignore("kind");
  Graph graph;
  graph.name = r.string("name");
  graph.source = r.string_or("source", "");
  graph.seq_len = 0;
  for (core::JsonReader& layer_reader : r.objects("layers")) {
    Layer layer;
    layer.name = layer_reader.string("name");
    layer.role = LayerRole::kBlock;
    for (core::JsonReader& op_reader : layer_reader.objects("ops")) {
      ReadOp read = read_op(op_reader);
      if (layer.ops.empty()) layer.input_elements = read.input_elements;
      layer.ops.push_back(std::move(read.op));
      layer.output_elements = read.output_elements;
    }
    if (layer.ops.empty()) layer_reader.fail("ops", "expected at least one op (a layer with none takes no time)");
    layer_reader.finish();
    graph.layers.push_back(std::move(layer));
  }
  if (graph.layers.empty()) r.fail("layers", "expected at least one layer");
  if (static_cast<std::int64_t>(graph.layers.size()) > kMaxLayers) {
    r.fail("layers", fmt::format("expected at most {} layers, got {}", kMaxLayers, graph.layers.size()));
  }
  r.finish();
  return graph;
}

}  // namespace dtsim::model
