#pragma once
/// The cluster as a directed Boost.Graph: vertices are GPUs, NICs, switches
/// and hosts; each physical link is two edges, one per direction, carrying
/// that direction's bandwidth. Ranks are placed on GPUs in node-major order.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "dtsim/core/units.hpp"
#include "dtsim/hw/device.hpp"

namespace dtsim::topo {

/// The most GPUs a cluster may have: 2^20, ten times the largest built.
inline constexpr int kMaxGpus = 1 << 20;

enum class VertexKind { kGpu, kNic, kSwitch, kHost };
enum class LinkKind { kNvLink, kPcie, kNetwork };

struct VertexInfo {
  VertexKind kind = VertexKind::kGpu;
  int node = -1;  ///< -1 for switches outside nodes
  std::string name;
};

struct LinkInfo {
  LinkKind kind = LinkKind::kNvLink;
  core::BytesPerSecond bandwidth;  ///< this direction
  core::Seconds latency;
  /// Share of the rate NCCL delivers as bus bandwidth over this link.
  double efficiency = 0.8;
  int id = -1;  ///< index into Cluster::links()
  std::size_t from = 0, to = 0;  // vertex descriptors (vecS: indices)
};

/// What an edge of the fabric carries: its link's id. The link itself lives
/// once in Cluster::links(); copying it into every edge doubled the memory
/// of a 100k-GPU fabric.
struct LinkRef {
  int id = -1;
};

using Fabric = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexInfo, LinkRef>;
using VertexId = Fabric::vertex_descriptor;

/// The links a message crosses from one GPU to another.
struct Route {
  std::vector<int> links;  ///< link ids, in order
  core::BytesPerSecond bottleneck;
  core::Seconds latency;   ///< sum over the links
};

class Cluster {
 public:
  struct Shape {
    std::string name;
    std::string source;
    hw::Device device;
    /// The CPU that launches each GPU's kernels: the file's "host", else its
    /// device's.
    hw::Host host;
    int nodes = 1;
    int gpus_per_node = 1;
    bool torus = false;  ///< chips linked to their neighbours (TPU), no switch
    bool nvls = false;   ///< the NVSwitches reduce in the switch (NVLink SHARP, Hopper and later)
    /// NVLS's rate over that of the NVLink links (their bus efficiency):
    /// nvls_efficiency / bus_efficiency of the cluster file; 1 when not given.
    double nvls_rate_fraction = 1.0;
    /// The channels NCCL runs NVLS on, at every buffer size (its
    /// NVLS_NCHANNELS: 16 on Hopper, as its init logs print).
    int nvls_channels = 16;
    bool sharp = false;  ///< the network switches reduce (InfiniBand SHARP)
    /// NCCL's channels (one thread block each) for a large collective of a
    /// communicator inside one node; small buffers use fewer, which caps
    /// their bandwidth. NCCL sizes them at init from its topology search.
    int channels = 16;
    /// The same for a communicator that spans nodes: NCCL searches one ring
    /// per NIC there and doubles them, so 2 x the NICs a node has.
    int channels_across_nodes = 16;
  };

  explicit Cluster(Shape shape);

  /// Builders add vertices and links; a link adds one edge each way.
  VertexId add_vertex(VertexInfo info);
  void add_link(VertexId a, VertexId b, LinkKind kind, core::BytesPerSecond bandwidth, core::Seconds latency,
                double efficiency);
  void set_gpu_vertex(int gpu, VertexId vertex);
  void set_host_vertex(int node, VertexId vertex);
  [[nodiscard]] VertexId host_vertex(int node) const { return host_vertex_.at(static_cast<std::size_t>(node)); }

  [[nodiscard]] const std::string& name() const { return shape_.name; }
  [[nodiscard]] const std::string& source() const { return shape_.source; }
  [[nodiscard]] const hw::Device& device() const { return shape_.device; }
  [[nodiscard]] const hw::Host& host() const { return shape_.host; }
  /// A calibration profile's measured figures replace the datasheet's (hw::apply_figures).
  void set_device(hw::Device device) { shape_.device = std::move(device); }
  [[nodiscard]] int nodes() const { return shape_.nodes; }
  [[nodiscard]] bool torus() const { return shape_.torus; }
  [[nodiscard]] bool nvls() const { return shape_.nvls; }
  [[nodiscard]] double nvls_rate_fraction() const { return shape_.nvls_rate_fraction; }
  [[nodiscard]] int nvls_channels() const { return shape_.nvls_channels; }
  [[nodiscard]] bool sharp() const { return shape_.sharp; }
  void set_sharp(bool sharp) { shape_.sharp = sharp; }
  /// NCCL's channel count for a large collective of a communicator that
  /// stays in one node, or one that spans nodes.
  [[nodiscard]] int channels(bool across_nodes) const {
    return across_nodes ? shape_.channels_across_nodes : shape_.channels;
  }
  [[nodiscard]] int gpus_per_node() const { return shape_.gpus_per_node; }
  [[nodiscard]] int gpu_count() const { return shape_.nodes * shape_.gpus_per_node; }
  [[nodiscard]] int node_of(int gpu) const { return gpu / shape_.gpus_per_node; }
  [[nodiscard]] const Fabric& fabric() const { return *fabric_; }
  [[nodiscard]] const std::vector<LinkInfo>& links() const { return links_; }
  /// "node0.gpu3 -> node0.nvswitch".
  [[nodiscard]] std::string link_name(int link) const;

  /// Endpoints of routes: GPUs are 0..gpu_count()-1, the host CPU of node n
  /// is gpu_count() + n (where parameter servers live), and a switch that
  /// takes part in a collective (SHARP) is switch_endpoint(vertex) < 0.
  [[nodiscard]] int host_endpoint(int node) const { return gpu_count() + node; }
  [[nodiscard]] int node_of_endpoint(int endpoint) const {
    if (endpoint < 0) return (*fabric_)[endpoint_vertex(endpoint)].node;
    return endpoint >= gpu_count() ? endpoint - gpu_count() : node_of(endpoint);
  }
  [[nodiscard]] static int switch_endpoint(VertexId vertex) { return -1 - static_cast<int>(vertex); }

  /// Fewest-hop route between two endpoints. Where several are equally
  /// short (the spines of a fat tree) a hash of (from, to) picks one at each
  /// hop, as ECMP switches hash a flow's addresses: the flows of a collective
  /// spread over the equal paths. A torus routes in dimension order instead.
  /// A breadth-first search from both ends finds it: a route costs the
  /// vertices within half its length of either end, not the whole fabric.
  [[nodiscard]] Route route(int from, int to) const;
  /// The same with the search's hop counts in `scratch`, which is the
  /// caller's to keep between calls (it comes back all -1) so that routing
  /// many pairs allocates no vertex-sized array per route.
  [[nodiscard]] Route route(int from, int to, std::vector<int>& scratch) const;

 private:
  Shape shape_;
  // Held by pointer so that a Cluster moves without copying the graph.
  std::unique_ptr<Fabric> fabric_;
  std::vector<LinkInfo> links_;
  std::vector<VertexId> gpu_vertex_;
  std::vector<VertexId> host_vertex_;
  [[nodiscard]] VertexId endpoint_vertex(int endpoint) const;
  [[nodiscard]] bool nic_relays_inside_node(VertexId from, VertexId to, VertexId source) const;
  [[nodiscard]] bool may_cross(VertexId a, VertexId b, VertexId source) const;
};

/// Rank r runs on GPU gpu_of_rank[r].
///  - packed (the default): in GPU order, filling a node before the next, so
///    Megatron's tp-innermost order keeps tensor parallelism inside nodes;
///  - spread: round robin over the nodes the job needs, so consecutive ranks
///    sit on different nodes (what a scheduler that ignores locality does);
///  - random: a fixed-seed shuffle of the packed GPUs (a fragmented cluster).
struct Placement {
  std::vector<int> gpu_of_rank;
  static Placement packed(int ranks);
  static Placement spread(int ranks, int gpus_per_node);
  static Placement random(int ranks, std::uint32_t seed = 1);
};

}  // namespace dtsim::topo
