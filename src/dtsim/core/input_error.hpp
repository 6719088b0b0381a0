#pragma once
/// The one error type for bad input: it names the file, the JSON pointer of
/// the field and what was expected, and prints as a single line.
#include <stdexcept>
#include <string>

namespace dtsim::core {

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string pointer, std::string message)
      : std::runtime_error(compose(file, pointer, message)),
        file_(std::move(file)), pointer_(std::move(pointer)), message_(std::move(message)) {}

  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] const std::string& pointer() const { return pointer_; }
  [[nodiscard]] const std::string& message() const { return message_; }

 private:
  static std::string compose(const std::string& file, const std::string& pointer, const std::string& message) {
    std::string line = file.empty() ? std::string("<input>") : file;
    if (!pointer.empty()) line += ": " + pointer;
    return line + ": " + message;
  }
  std::string file_;
  std::string pointer_;
  std::string message_;
};

}  // namespace dtsim::core
