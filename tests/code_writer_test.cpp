// The rules coder's code writer (coder/rules/text/code_writer.hpp): lines at their level,
// blocks that close at the level they opened, splices as they are.
#include <catch2/catch.hpp>

#include <string>

#include "coder/rules/text/code_writer.hpp"

using ks::rules::code_writer;

TEST_CASE("code writer: blocks indent and close at their level", "[code_writer]") {
  std::string out = "// kept\n";
  code_writer w(out);
  w.line("extern \"C\" __global__ void k(float* y)");
  {
    auto body = w.block("");
    w.line("const int t = threadIdx.x;");
    {
      auto loop = w.block("for (int k = 0; k < 4; ++k)");
      w.splice("#pragma unroll\n");
      w.line("y[t] += k;");
    }
    w.line("");
    {
      auto in = w.indented();
      CHECK(w.level() == 2);
      w.line("(void)t;");
    }
  }
  CHECK(w.level() == 0);
  CHECK(out ==
        "// kept\n"
        "extern \"C\" __global__ void k(float* y)\n"
        "{\n"
        "  const int t = threadIdx.x;\n"
        "  for (int k = 0; k < 4; ++k) {\n"
        "#pragma unroll\n"
        "    y[t] += k;\n"
        "  }\n"
        "\n"
        "    (void)t;\n"
        "}\n");
}

TEST_CASE("code writer: a writer started deep writes a chain's statements", "[code_writer]") {
  std::string code;
  code_writer w(code, 2);
  w.line("const float e0 = x0 * 2.0f;").line("const float e1 = e0 + 1.0f;");
  CHECK(code == "    const float e0 = x0 * 2.0f;\n    const float e1 = e0 + 1.0f;\n");
}
