#include <gtest/gtest.h>

#include "dtsim/core/json_reader.hpp"

using dtsim::core::InputError;
using dtsim::core::JsonReader;

namespace {
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(JsonReader, UnknownKeyListsTheValidOnes) {
  auto doc = nlohmann::json::parse(R"({"layers": 2, "hiden": 8})");
  JsonReader r(doc, "m.json");
  EXPECT_EQ(r.count("layers"), 2);
  EXPECT_EQ(message_of([&] { r.finish(); }), "m.json: /hiden: unknown key; valid keys here: layers");
}

TEST(JsonReader, MissingFieldAndWrongTypeNameThePointer) {
  auto doc = nlohmann::json::parse(R"({"net": {"rate": 400, "n": "8"}})");
  JsonReader r(doc, "c.json");
  JsonReader net = r.object("net");
  EXPECT_EQ(message_of([&] { net.bandwidth("rate"); }),
            "c.json: /net/rate: expected a bandwidth like \"400 Gb/s\", got \"400\"");
  EXPECT_EQ(message_of([&] { net.count("n"); }), "c.json: /net/n: expected a positive integer, got \"8\"");
  EXPECT_EQ(message_of([&] { net.duration("latency"); }),
            "c.json: /net/latency: missing field: expected a duration like \"1.5 us\"");
}

TEST(JsonReader, BadEnumListsTheChoices) {
  auto doc = nlohmann::json::parse(R"({"mlp": "relu"})");
  JsonReader r(doc, "m.json");
  EXPECT_EQ(message_of([&] { r.choice("mlp", {"gelu", "swiglu"}); }),
            "m.json: /mlp: expected one of gelu, swiglu, got \"relu\"");
}
