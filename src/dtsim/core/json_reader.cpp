#include "dtsim/core/json_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dtsim/core/quantity_parse.hpp"

namespace dtsim::core {
namespace {

const char* type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::object: return "an object";
    default: return "a number";
  }
}

std::string shown(const nlohmann::json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace

namespace {

// Rejects what nlohmann would accept silently or die on: nesting deeper than
// any dtsim file needs (destroying a 100,000-deep array recurses past the
// stack) and a key given twice in one object (nlohmann keeps the last). The
// JSON pointer of the offending place is tracked as the parser goes.
class Limits {
 public:
  explicit Limits(std::string file) : file_(std::move(file)) {}

  bool on_event(int depth, nlohmann::json::parse_event_t event, const nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= kMaxJsonDepth) {
          throw InputError(file_, pointer(), fmt::format("nested deeper than {} levels", kMaxJsonDepth));
        }
        frames_.push_back({event == Event::object_start, {}, 0, ""});
        break;
      case Event::key: {
        Frame& f = frames_.back();
        f.current = parsed.get<std::string>();
        if (!f.keys.insert(f.current).second) throw InputError(file_, pointer(), "the key appears twice in one object");
        break;
      }
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        advance();
        break;
      case Event::value:
        advance();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::size_t index;  // of the next element, in an array
    std::string current;
  };
  void advance() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }
  [[nodiscard]] std::string pointer() const {
    std::string out;
    for (const Frame& f : frames_) out += "/" + (f.object ? f.current : std::to_string(f.index));
    return out.empty() ? "/" : out;
  }
  std::string file_;
  std::vector<Frame> frames_;
};

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& file) {
  Limits limits(file);
  try {
    return nlohmann::json::parse(text, [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      return limits.on_event(depth, event, parsed);
    });
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message starts with "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    throw InputError(file, "", "malformed JSON: " + what);
  }
}

nlohmann::json load_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), "", "cannot open the file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw InputError(path.string(), "", "cannot read the file (a directory?)");
  return parse_json_text(buffer.str(), path.string());
}

JsonReader::JsonReader(const nlohmann::json& object, std::string file, std::string pointer)
    : object_(&object), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!object.is_object()) {
    throw InputError(file_, pointer_.empty() ? "/" : pointer_, fmt::format("expected an object, got {}", type_name(object)));
  }
}

bool JsonReader::has(const std::string& key) const { return object_->contains(key); }

void JsonReader::fail(const std::string& key, const std::string& message) const {
  throw InputError(file_, pointer_of(key), message);
}

const nlohmann::json& JsonReader::at(const std::string& key, nlohmann::json::value_t expected, const char* what) {
  read_.insert(key);
  auto it = object_->find(key);
  if (it == object_->end()) fail(key, fmt::format("missing field: expected {}", what));
  bool ok = it->type() == expected ||
            (expected == nlohmann::json::value_t::number_float && it->is_number()) ||
            (expected == nlohmann::json::value_t::number_integer && it->is_number_integer());
  if (!ok) fail(key, fmt::format("expected {}, got {}", what, shown(*it)));
  return *it;
}

std::int64_t JsonReader::integer(const std::string& key) {
  const nlohmann::json& v = at(key, nlohmann::json::value_t::number_integer, "an integer");
  if (!integer_in(v, INT64_MIN, INT64_MAX)) fail(key, fmt::format("expected an integer up to {}, got {}", INT64_MAX, v.dump()));
  return v.get<std::int64_t>();
}
std::int64_t JsonReader::integer_or(const std::string& key, std::int64_t fallback) {
  return has(key) ? integer(key) : (read_.insert(key), fallback);
}
bool integer_in(const nlohmann::json& v, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    return u >= static_cast<std::uint64_t>(std::max<std::int64_t>(lo, 0)) && u <= static_cast<std::uint64_t>(hi);
  }
  return v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
}

std::int64_t JsonReader::count(const std::string& key, std::int64_t max) {
  const nlohmann::json& v = at(key, nlohmann::json::value_t::number_integer, "a positive integer");
  if (!integer_in(v, 1, max)) fail(key, fmt::format("expected an integer from 1 to {}, got {}", max, v.dump()));
  return v.get<std::int64_t>();
}
std::int64_t JsonReader::count_or(const std::string& key, std::int64_t fallback, std::int64_t max) {
  return has(key) ? count(key, max) : (read_.insert(key), fallback);
}
double JsonReader::number(const std::string& key) {
  return at(key, nlohmann::json::value_t::number_float, "a number").get<double>();
}
double JsonReader::number_or(const std::string& key, double fallback) {
  return has(key) ? number(key) : (read_.insert(key), fallback);
}
std::string JsonReader::string(const std::string& key) {
  return at(key, nlohmann::json::value_t::string, "a string").get<std::string>();
}
std::string JsonReader::string_or(const std::string& key, const std::string& fallback) {
  return has(key) ? string(key) : (read_.insert(key), fallback);
}
std::string JsonReader::choice(const std::string& key, std::initializer_list<const char*> valid) {
  std::string value = at(key, nlohmann::json::value_t::string, "a string").get<std::string>();
  for (const char* v : valid) {
    if (value == v) return value;
  }
  fail(key, fmt::format("expected one of {}, got \"{}\"", fmt::join(valid, ", "), value));
}
std::string JsonReader::choice_or(const std::string& key, std::initializer_list<const char*> valid,
                                  const std::string& fallback) {
  return has(key) ? choice(key, valid) : (read_.insert(key), fallback);
}
bool JsonReader::boolean_or(const std::string& key, bool fallback) {
  return has(key) ? at(key, nlohmann::json::value_t::boolean, "true or false").get<bool>() : (read_.insert(key), fallback);
}

template <class Parse>
auto JsonReader::quantity(const std::string& key, Parse parse) {
  read_.insert(key);
  auto it = object_->find(key);
  try {
    if (it == object_->end()) parse("<missing>");
    if (!it->is_string()) parse(shown(*it));
    return parse(it->get<std::string>());
  } catch (const std::invalid_argument& e) {
    std::string message = e.what();
    if (it == object_->end()) message = "missing field: " + message.substr(0, message.find(", got"));
    fail(key, message);
  }
}

Bytes JsonReader::bytes(const std::string& key) { return quantity(key, [](std::string_view s) { return parse_bytes(s); }); }
BytesPerSecond JsonReader::bandwidth(const std::string& key) {
  return quantity(key, [](std::string_view s) { return parse_bandwidth(s); });
}
Seconds JsonReader::duration(const std::string& key) {
  return quantity(key, [](std::string_view s) { return parse_duration(s); });
}
Seconds JsonReader::duration_or(const std::string& key, Seconds fallback) {
  return has(key) ? duration(key) : (read_.insert(key), fallback);
}
Flops JsonReader::flops(const std::string& key) { return quantity(key, [](std::string_view s) { return parse_flops(s); }); }
FlopsPerSecond JsonReader::flop_rate(const std::string& key) {
  return quantity(key, [](std::string_view s) { return parse_flop_rate(s); });
}

JsonReader JsonReader::object(const std::string& key) {
  return JsonReader(at(key, nlohmann::json::value_t::object, "an object"), file_, pointer_of(key));
}
std::optional<JsonReader> JsonReader::optional_object(const std::string& key) {
  if (!has(key)) return (read_.insert(key), std::nullopt);
  return object(key);
}
std::vector<JsonReader> JsonReader::objects(const std::string& key) {
  const nlohmann::json& array = at(key, nlohmann::json::value_t::array, "an array of objects");
  std::vector<JsonReader> out;
  out.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) out.emplace_back(array[i], file_, pointer_of(key) + "/" + std::to_string(i));
  return out;
}

void JsonReader::ignore(const std::string& key) { read_.insert(key); }

void JsonReader::finish() const {
  for (const auto& [key, value] : object_->items()) {
    if (read_.count(key)) continue;
    std::vector<std::string> valid(read_.begin(), read_.end());
    throw InputError(file_, pointer_of(key), fmt::format("unknown key; valid keys here: {}", fmt::join(valid, ", ")));
  }
}

}  // namespace dtsim::core
