// `dtsim sweep`: many simulate requests from a JSON-lines or CSV file, one
// JSON line of report out per request, in the file's order. Under MPI
// (`mpirun -n 4 dtsim sweep ...`, or `--ranks 4` from a plain shell) request i
// runs on rank i mod n and rank 0 writes every line: the output is
// byte-identical to one process's.
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/mpi_gather.hpp"
#include "dtsim/core/input_error.hpp"
#include "dtsim/driver/simulation.hpp"
#include "dtsim/exec/launch.hpp"
#include "dtsim/report/writers.hpp"

namespace dtsim::cli {
namespace {

struct SweepRequest {
  int line = 0;  ///< in the input file, from 1
  std::optional<std::string> id;
  driver::SimulationRequest request;
};

const std::set<std::string>& request_keys() {
  static const std::set<std::string> keys = {"id", "model", "cluster", "strategy", "nodes", "seq_len"};
  return keys;
}

// One request from its fields as text (CSV) or JSON values (JSON lines).
SweepRequest make_request(const nlohmann::json& fields, const std::string& where, int line) {
  if (!fields.is_object()) throw core::InputError(where, "", "expected a JSON object per line");
  for (const auto& [key, value] : fields.items()) {
    if (!request_keys().count(key)) {
      throw core::InputError(where, "/" + key, "unknown key; valid keys: id, model, cluster, strategy, nodes, seq_len");
    }
  }
  auto text = [&](const char* key, bool required) -> std::optional<std::string> {
    const auto it = fields.find(key);
    if (it == fields.end() || (it->is_string() && it->get<std::string>().empty() && !required)) {
      if (required) throw core::InputError(where, std::string("/") + key, "missing field: expected a string");
      return std::nullopt;
    }
    if (!it->is_string() || it->get<std::string>().empty()) {
      throw core::InputError(where, std::string("/") + key, fmt::format("expected a non-empty string, got {}", it->dump()));
    }
    return it->get<std::string>();
  };
  auto whole = [&](const char* key, std::int64_t max) -> std::optional<std::int64_t> {
    const auto it = fields.find(key);
    if (it == fields.end() || (it->is_string() && it->get<std::string>().empty())) return std::nullopt;
    std::int64_t v = 0;
    if (it->is_number_integer()) {
      v = it->get<std::int64_t>();
    } else if (it->is_string()) {
      std::size_t used = 0;
      try {
        v = std::stoll(it->get<std::string>(), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != it->get<std::string>().size()) v = 0;
    }
    if (v < 1 || v > max) throw core::InputError(where, std::string("/") + key, fmt::format("expected an integer from 1 to {}, got {}", max, it->dump()));
    return v;
  };
  SweepRequest r;
  r.line = line;
  r.id = text("id", false);
  r.request.model = *text("model", true);
  r.request.cluster = *text("cluster", true);
  r.request.strategy = *text("strategy", true);
  if (auto nodes = whole("nodes", 1 << 20)) r.request.nodes = static_cast<int>(*nodes);
  r.request.seq_len = whole("seq_len", std::int64_t{1} << 30);
  return r;
}

// RFC 4180 fields: commas separate, double quotes enclose a field that holds
// commas (a strategy), and "" inside quotes is one quote.
std::vector<std::string> csv_fields(const std::string& line, const std::string& where) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  if (quoted) throw core::InputError(where, "", "a quoted field is not closed");
  return out;
}

std::vector<SweepRequest> read_requests(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw core::InputError(path, "", "cannot read the sweep's requests");
  const bool csv = path.size() >= 4 && path.substr(path.size() - 4) == ".csv";
  std::vector<SweepRequest> out;
  std::vector<std::string> header;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = fmt::format("{}:{}", path, n);
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    if (!csv) {
      nlohmann::json fields;
      try {
        fields = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        throw core::InputError(where, "", std::string("malformed JSON: ") + e.what());
      }
      out.push_back(make_request(fields, where, n));
      continue;
    }
    if (header.empty()) {
      header = csv_fields(line, where);
      continue;
    }
    const std::vector<std::string> values = csv_fields(line, where);
    if (values.size() != header.size()) {
      throw core::InputError(where, "", fmt::format("expected {} fields as the header has, got {}", header.size(), values.size()));
    }
    nlohmann::json fields = nlohmann::json::object();
    for (std::size_t i = 0; i < header.size(); ++i) fields[header[i]] = values[i];
    out.push_back(make_request(fields, where, n));
  }
  if (out.empty()) throw core::InputError(path, "", "no requests (one JSON object per line, or a CSV header and rows)");
  return out;
}

// One output line: the request's report, or the one-line reason it has none.
std::string run_one(const SweepRequest& r, const std::string& path) {
  nlohmann::json row = {{"line", r.line}};
  if (r.id) row["id"] = *r.id;
  try {
    row["report"] = report::to_json(driver::simulate(r.request).report);
  } catch (const core::InputError& e) {
    row["error"] = fmt::format("{}:{}: {}", path, r.line, e.what());
  }
  return row.dump();
}

// Rank 0 receives every rank's lines and puts them back in the file's order
// (rank r ran requests r, r + n, r + 2n, ...).
std::vector<std::string> gather_lines(const std::vector<std::string>& mine, std::size_t total, int size) {
  std::string packed;
  for (const std::string& line : mine) packed += line + '\n';
  const std::vector<std::string> texts = gather_texts(packed);
  std::vector<std::string> ordered(texts.empty() ? 0 : total);
  for (std::size_t r = 0; r < texts.size(); ++r) {
    std::istringstream lines(texts[r]);
    std::string line;
    for (std::size_t i = r; i < total && std::getline(lines, line); i += static_cast<std::size_t>(size)) ordered[i] = line;
  }
  return ordered;
}

}  // namespace

void add_sweep(CLI::App& app, SweepOptions& o) {
  CLI::App* cmd = app.add_subcommand("sweep", "simulate every request of a JSON-lines or CSV file; one JSON line of report per request");
  cmd->add_option("requests", o.requests, "a .jsonl file (one {\"model\", \"cluster\", \"strategy\", \"nodes\", \"seq_len\", \"id\"} "
                                          "per line) or a .csv file with those columns")->required();
  cmd->add_option("--ranks", o.ranks, "run under mpirun on this many local ranks (under mpirun already: its ranks)")->capture_default_str();
}

int run_sweep(const SweepOptions& o, const std::vector<std::string>& args, std::ostream& out) {
  if (o.ranks < 1) throw core::InputError("--ranks", "", fmt::format("expected 1 or more, got {}", o.ranks));
  // Read and checked before any rank starts, so a bad file gives one line.
  const std::vector<SweepRequest> requests = read_requests(o.requests);
  const bool under_mpi = exec::launched_by_mpi();
  if (!under_mpi && o.ranks > 1) exec::relaunch_with_mpirun(o.ranks, args);
  int rank = 0, size = 1;
  if (under_mpi) {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::vector<std::string> lines;
  for (std::size_t i = static_cast<std::size_t>(rank); i < requests.size(); i += static_cast<std::size_t>(size)) {
    lines.push_back(run_one(requests[i], o.requests));
  }
  if (under_mpi) {
    lines = gather_lines(lines, requests.size(), size);
    MPI_Finalize();
  }
  if (rank != 0) return 0;
  int failed = 0;
  for (const std::string& line : lines) {
    out << line << '\n';
    failed += nlohmann::json::parse(line).contains("error") ? 1 : 0;
  }
  out.flush();
  if (failed == 0) return 0;
  throw core::InputError(o.requests, "", fmt::format("{} of {} requests failed (their lines say why)", failed, requests.size()));
}

}  // namespace dtsim::cli
