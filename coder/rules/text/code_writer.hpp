#pragma once
// Generated CUDA written as lines (as PyTorch Inductor's IndentedBuffer): each line at
// the writer's indentation, two spaces a level; blocks that open a brace, indent what
// is written inside them and close it; splices of text already written (a chain's
// statements, a device helper) as they are.
//
// What it promises:
// - the writer appends to the string it was given and never rewrites what is there;
// - line("") is an empty line with no spaces; a block's closing brace is at the level
//   its header was written at, when the block object goes out of scope.

#include <string>
#include <string_view>

namespace ks::rules {

class code_writer {
 public:
  // Appends to `out`, starting `level` levels deep.
  explicit code_writer(std::string& out, int level = 0) : out_(out), level_(level) {}

  // `text` at the current indentation, then a newline.
  code_writer& line(std::string_view text) {
    if (!text.empty()) out_.append(2 * static_cast<size_t>(level_), ' ');
    out_.append(text);
    out_ += '\n';
    return *this;
  }
  // `text` exactly as it is (lines that carry their own indentation or none, such as
  // "#pragma unroll").
  code_writer& splice(std::string_view text) {
    out_.append(text);
    return *this;
  }

  // One level deeper while it lives; a block writes its header and " {" first (only
  // "{" without one) and "}" at the outer level at the end.
  class scope {
   public:
    scope(code_writer& w, bool brace) : w_(w), brace_(brace) { ++w_.level_; }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
    ~scope() {
      --w_.level_;
      if (brace_) w_.line("}");
    }

   private:
    code_writer& w_;
    bool brace_;
  };
  [[nodiscard]] scope block(std::string_view header) {
    line(header.empty() ? std::string("{") : std::string(header) + " {");
    return scope(*this, true);
  }
  [[nodiscard]] scope indented() { return scope(*this, false); }

  int level() const { return level_; }

 private:
  std::string& out_;
  int level_;
};

}  // namespace ks::rules
