// `import dtsim`: the commands of the dtsim program, run in the Python
// process, each returning its JSON report as a dict. The module calls the
// same code as the command line (src/cli), so a dict equals what `dtsim
// <command> --json` prints, and bad input raises ValueError with the same
// one line the command line prints.
#include <dlfcn.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "cli/commands.hpp"
#include "cli/interrupt.hpp"
#include "dtsim/core/data_dir.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/core/version.hpp"

namespace py = pybind11;

namespace dtsim::python {
namespace {

/// search and plan install a SIGINT handler that asks them to stop and print
/// what they have; in Python, Ctrl-C must go back to raising
/// KeyboardInterrupt once the call returns.
class PythonSigint {
 public:
  PythonSigint() { sigaction(SIGINT, nullptr, &saved_); }
  PythonSigint(const PythonSigint&) = delete;
  PythonSigint& operator=(const PythonSigint&) = delete;
  ~PythonSigint() {
    sigaction(SIGINT, &saved_, nullptr);
    cli::interrupt_requested() = false;
  }

 private:
  struct sigaction saved_ {};
};

/// Runs one command with its output captured and returns the output parsed
/// as JSON by Python's own json module.
template <class Command>
py::object run_json(Command&& command) {
  std::ostringstream out;
  int code = 0;
  {
    PythonSigint sigint;
    py::gil_scoped_release release;  // other Python threads run while dtsim simulates
    code = command(out);
  }
  if (code == cli::kInterruptedExit) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  if (code != 0 && code != 1) throw std::runtime_error("dtsim: the command failed with exit code " + std::to_string(code));
  return py::module_::import("json").attr("loads")(out.str());
}

/// The one-line command-line message of every error, as a Python exception.
void translate_errors(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const core::InputError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::range_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  }
}

/// An installed module finds the data installed with it (<prefix>/<datadir>/dtsim,
/// wherever the prefix was moved to: a --destdir staging folder, a tarball)
/// unless DTSIM_DATA_DIR says otherwise; one in the build tree has no such
/// folder beside it and uses the source tree, as the dtsim program does.
void use_installed_data_beside_the_module() {
  if (const char* env = std::getenv("DTSIM_DATA_DIR"); env && *env) return;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&use_installed_data_beside_the_module), &info) == 0 || !info.dli_fname) return;
  std::error_code ec;
  std::filesystem::path prefix = std::filesystem::weakly_canonical(info.dli_fname, ec).parent_path();
  const std::filesystem::path module_dir = DTSIM_PYTHON_INSTALL_DIR;  // relative to the prefix
  for (const std::filesystem::path& part : module_dir) {
    if (!part.empty()) prefix = prefix.parent_path();
  }
  const std::filesystem::path data = prefix / DTSIM_INSTALL_DATADIR / "dtsim";
  if (std::filesystem::exists(data / "devices" / "datasheets.json", ec)) setenv("DTSIM_DATA_DIR", data.c_str(), 0);
}

}  // namespace
}  // namespace dtsim::python

PYBIND11_MODULE(dtsim, m) {
  using namespace dtsim;
  using std::optional;
  using std::string;
  python::use_installed_data_beside_the_module();
  py::register_exception_translator(&python::translate_errors);
  m.doc() = "dtsim: predict the step time, throughput, memory and bottlenecks of distributed training. "
            "Each function runs the dtsim command of its name in this process and returns its --json report as a dict.";
  m.attr("__version__") = std::string(core::version());
  m.def("data_dir", [] { return core::data_dir(); }, "Where the bundled workloads, clusters and devices are read from.");

  m.def(
      "simulate",
      [](const string& model, const string& cluster, const string& strategy, optional<int> nodes,
         optional<std::int64_t> seq_len, optional<string> profile, bool full, bool explain, const string& network,
         optional<string> trace, optional<string> report, std::vector<double> worker_speed) {
        cli::SimulateOptions o;
        o.model = model, o.cluster = cluster, o.strategy = strategy, o.nodes = nodes, o.seq_len = seq_len;
        o.profile = profile, o.full = full, o.explain = explain, o.network = network, o.trace = trace, o.html = report;
        o.worker_speed = std::move(worker_speed);
        o.json = true;
        return python::run_json([&](std::ostream& out) { return cli::run_simulate(o, out); });
      },
      "Predict one training step (dtsim simulate). Returns the dtsim.report/1 dict.", py::arg("model"),
      py::arg("cluster"), py::arg("strategy"), py::kw_only(), py::arg("nodes") = py::none(),
      py::arg("seq_len") = py::none(), py::arg("profile") = py::none(), py::arg("full") = false,
      py::arg("explain") = false, py::arg("network") = "analytic", py::arg("trace") = py::none(),
      py::arg("report") = py::none(), py::arg("worker_speed") = std::vector<double>{});

  m.def(
      "search",
      [](const string& model, const string& cluster, int gbs, optional<int> nodes, const string& fix, const string& max,
         int top, int threads, optional<string> profile) {
        cli::SearchOptions o;
        o.model = model, o.cluster = cluster, o.gbs = gbs, o.nodes = nodes, o.fix = fix, o.max = max, o.top = top;
        o.threads = threads, o.profile = profile, o.json = true, o.progress = false;
        return python::run_json([&](std::ostream& out) { return cli::run_search(o, {"dtsim"}, out); });
      },
      "Rank every valid strategy (dtsim search). Returns the dtsim.search/1 dict.", py::arg("model"),
      py::arg("cluster"), py::arg("gbs"), py::kw_only(), py::arg("nodes") = py::none(), py::arg("fix") = "",
      py::arg("max") = "", py::arg("top") = 20, py::arg("threads") = 0, py::arg("profile") = py::none());

  m.def(
      "plan",
      [](const string& model, double tokens, int gbs, const string& devices, const string& gpus, const string& shapes,
         const string& prices, double goodput, optional<string> chart) {
        cli::PlanOptions o;
        o.model = model, o.tokens = tokens, o.gbs = gbs, o.devices = devices, o.gpus = gpus, o.shapes = shapes;
        o.prices = prices, o.goodput = goodput, o.chart = chart, o.json = true, o.progress = false;
        return python::run_json([&](std::ostream& out) { return cli::run_plan(o, {"dtsim"}, out); });
      },
      "Days, GPU-hours and cost to train a number of tokens (dtsim plan). Returns the dtsim.plan/1 dict.",
      py::arg("model"), py::arg("tokens"), py::kw_only(), py::arg("gbs") = 1024,
      py::arg("devices") = cli::PlanOptions{}.devices, py::arg("gpus") = cli::PlanOptions{}.gpus,
      py::arg("shapes") = cli::PlanOptions{}.shapes, py::arg("price") = "", py::arg("goodput") = 0.9,
      py::arg("chart") = py::none());

  m.def(
      "collective",
      [](const string& cluster, const string& op, optional<int> nodes, optional<int> group, optional<string> sizes,
         const string& algorithm, const string& protocol, optional<string> profile) {
        cli::CollectiveOptions o;
        o.cluster = cluster, o.op = op, o.nodes = nodes, o.group = group, o.sizes = sizes, o.algorithm = algorithm;
        o.protocol = protocol, o.profile = profile, o.json = true;
        return python::run_json([&](std::ostream& out) { return cli::run_collective(o, out); });
      },
      "Cost one collective over a range of sizes, like nccl-tests (dtsim collective). Returns the "
      "dtsim.collective/1 dict.",
      py::arg("cluster") = "dgx-h100", py::arg("op") = "all_reduce", py::kw_only(), py::arg("nodes") = py::none(),
      py::arg("group") = py::none(), py::arg("sizes") = py::none(), py::arg("algorithm") = "auto",
      py::arg("protocol") = "auto", py::arg("profile") = py::none());

  m.def(
      "kernel",
      [](const string& kind, const string& device, optional<std::int64_t> m_, optional<std::int64_t> n,
         optional<std::int64_t> k, const string& dtype, std::int64_t batch, optional<std::int64_t> seq,
         optional<std::int64_t> heads, std::int64_t head_dim, optional<std::int64_t> window, bool causal, bool backward,
         const string& kernel, const string& bytes, optional<string> profile) {
        cli::KernelOptions o;
        o.kind = kind, o.device = device, o.m = m_, o.n = n, o.k = k, o.dtype = dtype, o.batch = batch, o.seq = seq;
        o.heads = heads, o.head_dim = head_dim, o.window = window, o.causal = causal, o.backward = backward;
        o.kernel = kernel, o.bytes = bytes, o.profile = profile, o.json = true;
        return python::run_json([&](std::ostream& out) { return cli::run_kernel(o, out); });
      },
      "Cost one GEMM, attention or streaming kernel on a device (dtsim kernel). Returns a dict.", py::arg("kind"),
      py::kw_only(), py::arg("device"), py::arg("m") = py::none(), py::arg("n") = py::none(), py::arg("k") = py::none(),
      py::arg("dtype") = "bf16", py::arg("batch") = 1, py::arg("seq") = py::none(), py::arg("heads") = py::none(),
      py::arg("head_dim") = 128, py::arg("window") = py::none(), py::arg("causal") = false, py::arg("backward") = false,
      py::arg("kernel") = "", py::arg("bytes") = "", py::arg("profile") = py::none());
}
