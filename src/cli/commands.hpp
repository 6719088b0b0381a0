#pragma once
/// Subcommands of the dtsim command line.
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtsim::cli {

struct SimulateOptions {
  std::string model = "llama2-7b";
  std::string cluster = "dgx-h100";
  std::string strategy;
  std::optional<std::string> megatron_args;     ///< the arguments, or @file
  std::optional<std::string> deepspeed_config;  ///< a ds_config.json path
  std::optional<int> nodes;
  std::optional<std::int64_t> seq_len;
  std::optional<std::string> profile;
  std::optional<std::string> trace;
  std::optional<std::string> html;
  std::vector<double> worker_speed;
  std::string network = "analytic";
  bool json = false;
  bool full = false;
  bool explain = false;
};

void add_simulate(CLI::App& app, SimulateOptions& options);
int run_simulate(const SimulateOptions& options, std::ostream& out);

struct CollectiveOptions {
  std::string cluster = "dgx-h100";
  std::optional<int> nodes;
  std::string op = "all_reduce";
  std::optional<int> group;
  std::optional<std::string> sizes;     ///< "8B:8GiB" (the default), doubling; or nccl-tests' -b/-e/-f
  std::optional<std::string> minbytes;  ///< nccl-tests -b: "8", "64K", "8G" (binary), or "8 GiB"
  std::optional<std::string> maxbytes;  ///< nccl-tests -e
  int stepfactor = 2;                   ///< nccl-tests -f: each size is the last times this
  std::string datatype = "float";       ///< nccl-tests -d: the element type the count column counts
  std::string redop = "sum";            ///< nccl-tests -o: printed; every reduction costs the same here
  int root = 0;                         ///< nccl-tests -r: broadcast's and reduce's root
  std::string algorithm = "auto";
  std::string protocol = "auto";
  std::optional<std::string> profile;
  bool json = false;
};

void add_collective(CLI::App& app, CollectiveOptions& options);
int run_collective(const CollectiveOptions& options, std::ostream& out);

struct CompareOptions {
  std::string before;
  std::string after;
  std::string tolerance = "5%";
  std::string fields;                 ///< gated fields, "step_time_s=2%,memory/peak_bytes"; empty: all
  bool json = false;
  std::optional<std::string> markdown;  ///< a file for the Markdown summary ($GITHUB_STEP_SUMMARY)
};

void add_compare(CLI::App& app, CompareOptions& options);
int run_compare(const CompareOptions& options, std::ostream& out);

struct SearchOptions {
  std::string model;
  std::string cluster;
  int gbs = 0;
  std::optional<int> nodes;
  std::string fix;
  std::string max;
  int top = 20;
  int threads = 0;
  std::optional<std::string> profile;
  bool json = false;
  int ranks = 1;  ///< local MPI ranks to start when not under mpirun already
  bool progress = true;  ///< the progress bar on stderr (the Python module turns it off)
};

void add_search(CLI::App& app, SearchOptions& options);
/// `args` is the command line as given, for re-executing under mpirun.
int run_search(const SearchOptions& options, const std::vector<std::string>& args, std::ostream& out);

struct PlanOptions {
  std::string model;
  double tokens = 0;
  int gbs = 1024;
  std::string devices = "A100-SXM-80GB,H100-SXM,H200-SXM,B200,MI300X";
  std::string gpus = "64,256,1024";
  std::string shapes = "nvswitch8-ib";
  std::string prices;
  std::optional<std::string> chart;
  double goodput = 0.9;  ///< search::kDefaultGoodput
  bool json = false;
  int ranks = 1;  ///< local MPI ranks to spread the clusters over
  bool progress = true;  ///< the progress bar on stderr (the Python module turns it off)
};

void add_plan(CLI::App& app, PlanOptions& options);
/// `args` is the command line, to re-execute under mpirun for --ranks.
int run_plan(const PlanOptions& options, const std::vector<std::string>& args, std::ostream& out);

struct RunOptions {
  std::string model = "tiny-gpt";
  std::string cluster = "localhost-cpu";
  std::string strategy = "dp=2,gbs=8,mbs=2,dtype=fp32";
  std::optional<std::string> profile;
  std::optional<std::string> trace;
  int steps = 3;
  int warmup = 1;
  bool json = false;
  std::string backend = "cpu";  ///< cpu (MPI ranks) or cuda (this machine's GPU)
};

void add_run(CLI::App& app, RunOptions& options);
/// `args` is the command line as given, for re-executing under mpirun.
int run_run(const RunOptions& options, const std::vector<std::string>& args, std::ostream& out);

struct ValidateOptions {
  RunOptions run;
  std::optional<std::string> save_profile;
  std::optional<std::string> max_error;
  bool quick_calibration = false;
};

void add_validate(CLI::App& app, ValidateOptions& options);
/// `dtsim run --backend cuda` and `dtsim validate --backend cuda` (gpu_run_command.cpp).
int run_run_on_gpu(const RunOptions& options, std::ostream& out);
int run_validate_on_gpu(const ValidateOptions& options, std::ostream& out);
int run_validate(const ValidateOptions& options, const std::vector<std::string>& args, std::ostream& out);

struct SweepOptions {
  std::string requests;  ///< a .jsonl or .csv file of simulate requests
  int ranks = 1;         ///< local MPI ranks to start when not under mpirun already
};

void add_sweep(CLI::App& app, SweepOptions& options);
/// `args` is the command line as given, for re-executing under mpirun.
int run_sweep(const SweepOptions& options, const std::vector<std::string>& args, std::ostream& out);

struct KernelOptions {
  std::string kind;  ///< gemm, attention, memory
  std::string device;
  std::optional<std::int64_t> m, n, k, seq, heads;
  std::optional<std::int64_t> batch = 1, head_dim = 128;
  std::optional<std::int64_t> window;  ///< sliding-window attention
  std::string dtype = "bf16";
  bool causal = false;
  bool backward = false;
  std::string kernel;  ///< empty: the device's PyTorch default
  std::string bytes;
  std::optional<std::string> profile;
  bool json = false;
};
void add_kernel(CLI::App& app, KernelOptions& options);
int run_kernel(const KernelOptions& options, std::ostream& out);

void add_list(CLI::App& app);
int run_list(std::ostream& out);

}  // namespace dtsim::cli
