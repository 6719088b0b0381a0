#pragma once
/// Reading of people-written JSON objects with exact errors. A JsonReader is a
/// view of one object that knows its file and JSON pointer; every accessor
/// records the key it read, and finish() rejects the keys nobody read, listing
/// the valid ones. Wrong types, bad enum values and unitless quantities throw
/// InputError naming file, pointer and what was expected.
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dtsim/core/input_error.hpp"
#include "dtsim/core/units.hpp"

namespace dtsim::core {

/// No dtsim file nests deeper; deeper input is refused before it can exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON text; malformed JSON (a number out of double's range included),
/// nesting deeper than kMaxJsonDepth and a key repeated in one object become an
/// InputError naming `file`, with line and column or the JSON pointer.
nlohmann::json parse_json_text(std::string_view text, const std::string& file);
/// parse_json_text of a file's contents.
nlohmann::json load_json_file(const std::filesystem::path& path);

/// Whether `v` is an integer from `lo` to `hi`, checked before any narrowing
/// (nlohmann keeps non-negative literals unsigned, past int64 included).
bool integer_in(const nlohmann::json& v, std::int64_t lo, std::int64_t hi);

/// The largest count a field may hold unless it says less: INT32_MAX.
inline constexpr std::int64_t kMaxCount = 2147483647;

class JsonReader {
 public:
  JsonReader(const nlohmann::json& object, std::string file, std::string pointer = "");

  [[nodiscard]] bool has(const std::string& key) const;
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] std::string pointer_of(const std::string& key) const { return pointer_ + "/" + key; }
  [[nodiscard]] const nlohmann::json& raw() const { return *object_; }

  std::int64_t integer(const std::string& key);
  std::int64_t integer_or(const std::string& key, std::int64_t fallback);
  /// A positive integer from 1 to `max` (by default what an int holds, so
  /// callers may narrow it); the error states the range.
  std::int64_t count(const std::string& key, std::int64_t max = kMaxCount);
  std::int64_t count_or(const std::string& key, std::int64_t fallback, std::int64_t max = kMaxCount);
  double number(const std::string& key);
  double number_or(const std::string& key, double fallback);
  std::string string(const std::string& key);
  std::string string_or(const std::string& key, const std::string& fallback);
  std::string choice(const std::string& key, std::initializer_list<const char*> valid);
  std::string choice_or(const std::string& key, std::initializer_list<const char*> valid, const std::string& fallback);
  bool boolean_or(const std::string& key, bool fallback);

  Bytes bytes(const std::string& key);
  BytesPerSecond bandwidth(const std::string& key);
  Seconds duration(const std::string& key);
  Seconds duration_or(const std::string& key, Seconds fallback);
  Flops flops(const std::string& key);
  FlopsPerSecond flop_rate(const std::string& key);

  JsonReader object(const std::string& key);
  std::optional<JsonReader> optional_object(const std::string& key);
  std::vector<JsonReader> objects(const std::string& key);

  /// Marks a key as read without reading it (free-text fields such as "source").
  void ignore(const std::string& key);
  /// Throws for the first key that no accessor read.
  void finish() const;

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  const nlohmann::json& at(const std::string& key, nlohmann::json::value_t expected, const char* what);
  template <class Parse>
  auto quantity(const std::string& key, Parse parse);

  const nlohmann::json* object_;
  std::string file_;
  std::string pointer_;
  std::set<std::string> read_;
};

}  // namespace dtsim::core
