#pragma once
// Errors as values. Every fallible operation in KernelSkill returns a result<T>
// (or a status) whose error message is written for the person who has to fix the
// input: it names the file, the field and what was expected.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace ks {

// An error with a message a user can act on.
struct error {
  std::string message;
};

// Either a value or an error. Accessing the wrong alternative is a bug (asserted).
template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(ks::error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const std::string& message() const {
    assert(!ok());
    return std::get<1>(v_).message;
  }
  const ks::error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, ks::error> v_;
};

// Success, or an error: for operations that produce nothing.
class [[nodiscard]] status {
 public:
  status() = default;
  status(ks::error e) : ok_(false), message_(std::move(e.message)) {}
  static status success() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

}  // namespace ks
