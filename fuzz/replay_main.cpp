// A main() for the harnesses where libFuzzer is not linked (GCC builds, and
// the test suite): runs every file of the corpora given, then a fixed number
// of deterministic mutations of them (bit flips, byte changes, inserted
// tokens that broke parsers before, deleted and repeated ranges, splices), so
// a run is a fixed number of executions, not a timed one. A crash, sanitizer
// report or escaping exception fails the run as it would under libFuzzer.
//
//   fuzz_workload tests/fuzz/workload [more dirs or files] [--runs 2000] [--seed 1]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;

void run(const Bytes& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }

Bytes read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Values and shapes that found bugs in dtsim's parsers (see the README's
// reliability section): wrapping integers, numbers beyond double, zero
// rates, deep nesting, repeated keys.
const char* const kTokens[] = {
    "-1", "0", "1e400", "4294967297", "2147483648", "9223372036854775808", "18446744073709551616", "1e9", "nan", "inf",
    "\"\"", "[]", "{}", "null", "true", "[[[[[[[[[[", "]]]]]", "\"0 GiB\"", "\"0 B/s\"", "\"1e300 s\"", "\"1e308 TB/s\"",
    "\"inf TFLOP/s\"", ",\"name\":\"x\",\"name\":\"y\"", "\\u0000", "\xff\xfe", "mbs=536870912", ",gbs=1000000000", ",tp=0",
    "=", ",,", "1048577"};

class Mutator {
 public:
  Mutator(std::uint64_t seed, const std::vector<Bytes>& corpus) : rng_(seed), corpus_(corpus) {}

  Bytes next() {
    Bytes b = corpus_[pick(corpus_.size())];
    const std::size_t rounds = 1 + pick(4);
    for (std::size_t r = 0; r < rounds; ++r) mutate(b);
    return b;
  }

 private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

  void mutate(Bytes& b) {
    const std::size_t at = pick(b.size() + 1);
    switch (pick(7)) {
      case 0:
        if (!b.empty()) b[pick(b.size())] ^= static_cast<std::uint8_t>(1u << pick(8));
        break;
      case 1:
        if (!b.empty()) b[pick(b.size())] = static_cast<std::uint8_t>(pick(256));
        break;
      case 2: {
        const std::string t = kTokens[pick(std::size(kTokens))];
        b.insert(b.begin() + static_cast<long>(at), t.begin(), t.end());
        break;
      }
      case 3: {
        const std::size_t n = std::min(b.size() - std::min(at, b.size()), pick(16) + 1);
        b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        break;
      }
      case 4: {
        const std::size_t n = std::min(b.size() - std::min(at, b.size()), pick(64) + 1);
        const Bytes piece(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        b.insert(b.begin() + static_cast<long>(at), piece.begin(), piece.end());
        break;
      }
      case 5: {  // a number replaced by a token
        auto digit = std::find_if(b.begin() + static_cast<long>(std::min(at, b.size())), b.end(),
                                  [](std::uint8_t c) { return c >= '0' && c <= '9'; });
        if (digit == b.end()) break;
        auto end = std::find_if(digit, b.end(), [](std::uint8_t c) { return c < '0' || c > '9'; });
        const std::string t = kTokens[pick(10)];
        digit = b.erase(digit, end);
        b.insert(digit, t.begin(), t.end());
        break;
      }
      default: {  // the head of this input and the tail of another
        const Bytes& other = corpus_[pick(corpus_.size())];
        const std::size_t from = pick(other.size() + 1);
        b.resize(std::min(at, b.size()));
        b.insert(b.end(), other.begin() + static_cast<long>(from), other.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Bytes>& corpus_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<Bytes> corpus;
  long runs = 1000;
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) {
      runs = std::atol(argv[++i]);
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());  // the same order, so the same mutations, on every machine
      for (const auto& f : files) corpus.push_back(read(f));
    } else if (std::filesystem::is_regular_file(arg)) {
      corpus.push_back(read(arg));
    } else {
      std::fprintf(stderr, "%s: no corpus directory or file \"%s\"\n", argv[0], arg.c_str());
      return 2;
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "%s: expected corpus directories or files\n", argv[0]);
    return 2;
  }
  for (const Bytes& input : corpus) run(input);
  Mutator mutator(seed, corpus);
  for (long r = 0; r < runs; ++r) run(mutator.next());
  std::printf("%s: %zu corpus inputs and %ld mutations (seed %llu) ran without a crash\n", argv[0], corpus.size(), runs,
              static_cast<unsigned long long>(seed));
  return 0;
}
